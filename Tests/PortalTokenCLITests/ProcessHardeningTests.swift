import Foundation
import Glibc
import PortalTokenTestSupport
import Testing

/// A process holding a token, a grant or a passphrase can be neither dumped to a core file nor
/// read through /proc by another process of the same user (docs/security.md, "Hardening rules").
@Suite("process hardening")
struct ProcessHardeningTests {
    @Test(
        "portal-token started by an unprivileged user has RLIMIT_CORE 0 and a /proc/PID/environ owned by root",
        arguments: BinaryTests.binaries)
    func noCoreDumps(binary: String) throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "portal-token-dump-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        // get waits on its request; holding the FIFO's write end keeps it waiting while it is looked at.
        let fifo = scratch.appendingPathComponent("stdin").path
        #expect(mkfifo(fifo, 0o666) == 0)
        chmod(fifo, 0o666)
        let writer = open(fifo, O_RDWR | O_CLOEXEC)
        #expect(writer >= 0)
        defer { close(writer) }
        let nobody = try #require(getpwnam("nobody")?.pointee)
        let pid = try ProcessRunner.spawn(
            "/usr/bin/setpriv",
            ["--reuid=\(nobody.pw_uid)", "--regid=\(nobody.pw_gid)", "--clear-groups", binary, "get"],
            environment: ["PATH": "/usr/bin:/bin", "HOME": "/nonexistent"], stdin: fifo)
        defer { kill(pid, SIGKILL); _ = waitpid(pid, nil, 0) }

        // Once the child runs portal-token as nobody, both must hold before it reads a byte.
        let deadline = ProcessRunner.monotonicSeconds() + 10
        var coreLimit = ""
        var environOwner: uid_t = nobody.pw_uid
        while ProcessRunner.monotonicSeconds() < deadline {
            let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")) ?? ""
            var status = stat()
            if executable.hasSuffix("/portal-token"), stat("/proc/\(pid)/environ", &status) == 0 {
                environOwner = status.st_uid
                let limits = (try? String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)) ?? ""
                coreLimit =
                    limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") }
                    .map {
                        $0.split(separator: " ", omittingEmptySubsequences: true).dropFirst(4).prefix(2).joined(
                            separator: " ")
                    } ?? ""
                if environOwner == 0 && coreLimit == "0 0" { break }
            }
            usleep(10_000)
        }
        #expect(coreLimit == "0 0")
        #expect(environOwner == 0)
        // The process itself does run as nobody: the ownership above is PR_SET_DUMPABLE's doing.
        var credentials = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        credentials = credentials.split(separator: "\n").first { $0.hasPrefix("Uid:") }.map(String.init) ?? ""
        #expect(credentials.split(separator: "\t").dropFirst().first == "\(nobody.pw_uid)")
    }
}
