import Foundation
import Glibc
@testable import PortalTokenCLI
import PortalTokenCore
import PortalTokenTestSupport

/// What one in-process run printed and returned.
struct CommandResult {
    let exitCode: Int32
    let stdout: String
    let stderr: String
}

/// Runs portal-token commands inside the test process, the way swift-argument-parser's
/// `AssertParseCommand` does: the real parser, Context and error funnel, with every port faked
/// (an in-memory item store, a scripted Portal, an in-memory secret cache, a
/// recording hook, a fixed clock). stdin, stdout and stderr are unlinked temporary files.
final class InProcessCLI {
    static let environmentID = "env-1"
    static let issued: Int64 = 1_700_000_000

    let directory: String
    let items = InMemoryItemStore()
    var credentials: CredentialItems { CredentialItems(items) }
    let cache = InMemorySecretCache()
    let endedSessions = Locked<[SessionEndedEvent]>([])
    let clock = Locked<Int64>(InProcessCLI.issued)
    var transport: ScriptedTransport
    var backend = BackendChoice(backend: .file, reason: "chosen by the test")

    init(transport: ScriptedTransport = ScriptedTransport(status: 200)) throws {
        self.transport = transport
        directory =
            FileManager.default.temporaryDirectory.appendingPathComponent("portal-token-inprocess-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: directory + "/run", withIntermediateDirectories: true)
        chmod(directory + "/run", 0o700)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    /// The environment of a run: a private HOME and runtime directory, the test's auth
    /// environment, and nothing inherited from the test process.
    var environment: [String: String] {
        [
            "HOME": directory, "XDG_RUNTIME_DIR": directory + "/run", "XDG_CONFIG_HOME": directory + "/config",
            "XDG_DATA_HOME": directory + "/data", "PORTAL_AUTH_ENVIRONMENT_ID": Self.environmentID,
            "PATH": "/usr/bin:/bin",
        ]
    }

    var services: Services {
        let items = items, cache = cache, endedSessions = endedSessions
        let clock = clock, transport = transport, backend = backend
        return Services(
            backendChoice: { _ in backend },
            secretServicePresence: { _ in .noBus },
            itemStore: { _, _ in items },
            transport: { _ in transport },
            secretCache: { _ in cache },
            sessionEnded: { _ in { event in endedSessions.update { $0.append(event) } } },
            now: { clock.value })
    }

    /// Signs `endUserID` in with `token`, as a sign-in would have stored it.
    func signIn(token: String = "token-1", endUserID: String = "user-1") throws {
        try SessionItems(items).saveSession(
            PortalSession(
                token: Secret(token), endUserID: endUserID, authEnvironmentID: Self.environmentID,
                issuedAt: clock.value, lastActivityAt: clock.value))
    }

    var storedSession: StoredSession {
        (try? SessionItems(items).loadSession(authEnvironmentID: Self.environmentID)) ?? .absent
    }

    func run(
        _ arguments: [String], stdin: String = "", environment extra: [String: String] = [:],
        unsetting unset: [String] = [], isGitHelper: Bool = false
    ) -> CommandResult {
        let input = Self.unlinkedFile(directory), output = Self.unlinkedFile(directory),
            error = Self.unlinkedFile(directory)
        defer { close(input); close(output); close(error) }
        let bytes = Array(stdin.utf8)
        _ = bytes.withUnsafeBytes { write(input, $0.baseAddress, $0.count) }
        lseek(input, 0, SEEK_SET)
        var streams = StandardStreams()
        streams.input = input
        streams.output = output
        streams.error = error
        var environment = environment.merging(extra) { $1 }
        for name in unset { environment[name] = nil }
        let code = PortalTokenCLI.execute(
            arguments, isGitHelper: isGitHelper, streams: streams,
            environment: environment, services: services)
        return CommandResult(exitCode: code, stdout: Self.contents(output), stderr: Self.contents(error))
    }

    private static func unlinkedFile(_ directory: String) -> Int32 {
        var template = Array((directory + "/stream-XXXXXX").utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        precondition(descriptor >= 0, "mkstemp failed")
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        return descriptor
    }

    private static func contents(_ descriptor: Int32) -> String {
        lseek(descriptor, 0, SEEK_SET)
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            bytes += chunk[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
