import Foundation
import Glibc
import Testing

@testable import AuditFileLog
import PortalTokenCore

/// The audit log's file in this process: appends, rotation, the key, and the one warning.
@Suite("the audit log file", .serialized)
struct AuditFileLogTests {
    final class Folder {
        let path: String
        var warnings: [String] = []
        init() throws {
            path = FileManager.default.temporaryDirectory.appendingPathComponent("audit-\(UUID().uuidString)").path
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }

        func log(maximumBytes: Int = 10 << 20) -> AuditFileLog {
            AuditFileLog(directory: path + "/state/portal-token", maximumBytes: maximumBytes) {
                [unowned self] message, _ in
                warnings.append(message)
            }
        }
    }

    static func event(_ token: String? = nil) -> AuditEvent {
        AuditEvent(
            operation: .token, outcome: .served, time: 1_764_609_603_123_456_789, exitCode: 0,
            authEnvironmentID: "env-1", endUserID: "user-1", token: token.map(Secret.init))
    }

    @Test("the first line makes the directory 0700, the log and its key 0600; the line is the event as JSON")
    func firstLine() throws {
        let folder = try Folder()
        let log = folder.log()
        log.record(Self.event("token-1"))
        let lines = try log.lines()
        #expect(lines.count == 1)
        let entry = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        #expect(entry["time"] as? String == "2025-12-01T17:20:03.123456Z")
        #expect(entry["operation"] as? String == "token" && entry["outcome"] as? String == "served")
        #expect((entry["tokenFingerprint"] as? String)?.count == 16)
        let caller = try #require(entry["caller"] as? [String: Any])
        #expect(caller["pid"] as? Int == Int(getpid()) && caller["uid"] as? Int == Int(getuid()))
        #expect((caller["userNamespace"] as? Int ?? 0) > 0)
        for (path, mode) in [(log.directory, 0o700), (log.path, 0o600), (log.directory + "/audit.key", 0o600)] {
            var status = stat()
            #expect(stat(path, &status) == 0 && Int(status.st_mode & 0o777) == mode, "\(path)")
        }
        #expect(folder.warnings.isEmpty)
    }

    @Test("another process is read as this one is: its executable, user namespace and parents; pid 0 gives nothing")
    func anotherProcess() throws {
        let own = LocalCaller.current()
        let child = fork()
        if child == 0 {
            pause()
            _exit(0)
        }
        defer {
            kill(child, SIGKILL)
            _ = waitpid(child, nil, 0)
        }
        let peer = AuditFileLog.caller(ofProcess: child)
        #expect(peer.pid == child)
        #expect(peer.executable == own.executable && peer.executable != nil)
        #expect(peer.userNamespace == own.userNamespace && peer.userNamespace != nil)
        // Its parent is this process: the same chain, one step longer.
        #expect(peer.parents == Array(([own.executable!] + own.parents).prefix(AuditCaller.maximumParents)))
        // Filled in by whoever knows them from the kernel.
        #expect(peer.uid == nil && peer.gid == nil && peer.socket == nil)
        #expect(AuditFileLog.caller(ofProcess: 0) == AuditCaller())
    }

    @Test("the key is made once: one token, one fingerprint across log handles; another token, another one")
    func fingerprints() throws {
        let folder = try Folder()
        folder.log().record(Self.event("token-1"))
        folder.log().record(Self.event("token-1"))
        folder.log().record(Self.event("token-2"))
        let prints = try folder.log().lines().map {
            (try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["tokenFingerprint"] as? String
        }
        #expect(prints.count == 3 && prints[0] == prints[1] && prints[0] != prints[2])
        let key = try #require(FileManager.default.contents(atPath: folder.log().directory + "/audit.key"))
        #expect(key.count == 32)
        let expected = AuditFingerprint.of(Secret("token-1"), key: Array(key))
        #expect(prints[0] == expected)
    }

    @Test("rotation keeps the file under the cap and the newest lines in the two files")
    func rotation() throws {
        let folder = try Folder()
        let log = folder.log(maximumBytes: 4096)
        for _ in 0..<40 { log.record(Self.event("token-1")) }
        var current = stat(), rotated = stat()
        #expect(stat(log.path, &current) == 0 && stat(log.rotatedPath, &rotated) == 0)
        #expect(current.st_size <= 4096 && rotated.st_size <= 4096)
        #expect(try log.lines().count < 40)
    }

    @Test("a log that cannot be written warns once per process, however many events follow")
    func warnsOnce() throws {
        let folder = try Folder()
        let log = folder.log()
        try FileManager.default.createDirectory(atPath: log.path, withIntermediateDirectories: true)
        chmod(log.directory, 0o700)
        AuditFileLog.resetWarning()
        log.record(Self.event())
        log.record(Self.event())
        folder.log().record(Self.event())
        #expect(folder.warnings == ["cannot write the audit log \(log.path): it is a directory"])
    }

    @Test("a symbolic link at the log's name, or a directory others may write, is refused")
    func refusesWhatOthersCouldPlant() throws {
        let folder = try Folder()
        let log = folder.log()
        try FileManager.default.createDirectory(atPath: log.directory, withIntermediateDirectories: true)
        chmod(log.directory, 0o700)
        let target = folder.path + "/elsewhere"
        #expect(symlink(target, log.path) == 0)
        AuditFileLog.resetWarning()
        log.record(Self.event())
        #expect(!FileManager.default.fileExists(atPath: target))
        #expect(folder.warnings.last?.hasSuffix("it is a symbolic link") == true)
        unlink(log.path)
        chmod(log.directory, 0o777)
        AuditFileLog.resetWarning()
        log.record(Self.event())
        #expect(folder.warnings.last?.contains("other users can write to its directory (mode 777)") == true)
        #expect(!FileManager.default.fileExists(atPath: log.path))
    }
}
