import Foundation
import Glibc
@testable import Commands
@testable import Operations
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
    /// The hook's runs: the variables each was given.
    let hookRuns = Locked<[[String: String]]>([])
    /// The end users whose session ended, in order, from the hook's runs.
    var endedEndUsers: [String] { hookRuns.value.compactMap { $0["PORTAL_END_USER_ID"] } }
    /// The session bus the run sees: none, so `auto` chooses the encrypted file (kept in `items`).
    var bus: (any SessionBusConnection)? = nil
    /// What both backends' item stores are: `items`, or a store a test puts in front of it.
    var store: (any ItemStore)? = nil
    let clock = Locked<Int64>(InProcessCLI.issued)
    var transport: ScriptedTransport
    /// What /proc/self/mountinfo says: nil when it cannot be read.
    var procMountInfo: String? = nil
    /// Other programs (git): none is found, unless a test puts a fake here.
    var programs: any ProgramLauncher = RecordingProgramLauncher()
    /// The audit log: what each run recorded, and the lines `audit` reads.
    let audit = RecordingAuditLog()

    init(transport: ScriptedTransport = ScriptedTransport(status: 200)) throws {
        self.transport = transport
        directory =
            FileManager.default.temporaryDirectory.appendingPathComponent("portal-token-inprocess-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: directory + "/run", withIntermediateDirectories: true)
        chmod(directory + "/run", 0o700)
        // The hook is never started (the launcher records it); it only has to be there.
        _ = FileManager.default.createFile(
            atPath: directory + "/on-session-invalidated", contents: Data("#!/bin/sh\n".utf8))
        chmod(directory + "/on-session-invalidated", 0o700)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    /// The environment of a run: a private HOME and runtime directory, the test's auth
    /// environment, and nothing inherited from the test process.
    var environment: [String: String] {
        [
            "HOME": directory, "XDG_RUNTIME_DIR": directory + "/run", "XDG_CONFIG_HOME": directory + "/config",
            "XDG_DATA_HOME": directory + "/data", "PORTAL_AUTH_ENVIRONMENT_ID": Self.environmentID,
            "PORTAL_TOKEN_ON_SESSION_INVALIDATED": directory + "/on-session-invalidated",
            "PATH": "/usr/bin:/bin",
        ]
    }

    /// The real Services with every adapter faked: the session bus answers as `bus` says, both
    /// backends keep their items in `items`, the kernel keyring is `cache`, the hook and other
    /// programs are recorded, the clock is `clock`. The `auto` decision, the store lock and the
    /// session cache are the real ones.
    var services: Services {
        let items: any ItemStore = store ?? items
        let cache = cache, hookRuns = hookRuns, clock = clock, transport = transport, bus = bus,
            procMountInfo = procMountInfo, programs = programs
        return Services(
            connectSessionBus: { _ throws(StoreError) in bus },
            keyringItems: { _, _, _ in items },
            keyringDiagnosis: { _ in FakeKeyringDiagnosis() },
            fileItems: { _ in items },
            vaultItems: { _, _ in items },
            fileExists: { _ in false },
            fileLock: { _, _ in UnsharedFileLock() },
            moveFileAside: { path, _ in path + ".migrated" },
            transport: { _ in transport },
            secretCache: { cache },
            hookLauncher: { _ in RecordingHookLauncher(runs: hookRuns) },
            programs: programs,
            listen: { _, _, _ throws(RedirectListenerError) in throw .socketFailure(errorNumber: EACCES) },
            renderQRCode: { $0 },
            serveDesktopActivation: { _, _ in false },
            now: { clock.value },
            procMountInfo: { procMountInfo },
            auditLog: { [audit] options in
                audit.options.update { $0.append(options.directory) }
                return audit
            })
    }

    /// Signs `endUserID` in with `token`, as a sign-in would have stored it.
    func signIn(token: String = "token-1", endUserID: String = "user-1") throws {
        try Sessions(items).saveSession(
            PortalSession(
                token: Secret(token), endUserID: endUserID, authEnvironmentID: Self.environmentID,
                issuedAt: clock.value, lastActivityAt: clock.value))
    }

    var storedSession: StoredSession {
        (try? Sessions(items).loadSession(authEnvironmentID: Self.environmentID)) ?? .absent
    }

    func run(
        _ arguments: [String], stdin: String = "", environment extra: [String: String] = [:],
        unsetting unset: [String] = [], isGitHelper: Bool = false
    ) -> CommandResult {
        var environment = environment.merging(extra) { $1 }
        for name in unset { environment[name] = nil }
        return withStreams(stdin: stdin) { streams in
            PortalTokenCLI.execute(
                arguments, isGitHelper: isGitHelper, streams: streams, environment: environment, services: services)
        }
    }

    /// One operation of the Docker credential-helper protocol, as `docker-credential-portal-token`
    /// runs it.
    func runDocker(_ operation: String, stdin: String = "") -> CommandResult {
        withStreams(stdin: stdin) { streams in
            DockerCredentialHelper.main(
                [operation], streams: streams, environment: environment, services: services)
        }
    }

    private func withStreams(stdin: String, _ body: (StandardStreams) -> Int32) -> CommandResult {
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
        let code = body(streams)
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

/// An audit log that keeps the events it is given, and answers `lines()` with what a test put there.
final class RecordingAuditLog: AuditLog, Sendable {
    let events = Locked<[AuditEvent]>([])
    let storedLines = Locked<[String]>([])
    /// The directory of each opening.
    let options = Locked<[String]>([])
    func record(_ event: AuditEvent) { events.update { $0.append(event) } }
    func lines() throws(AuditLogError) -> [String] { storedLines.value }
}

/// A hook launcher that records what it was asked to run, and runs nothing.
struct RecordingHookLauncher: HookLauncher {
    let runs: Locked<[[String: String]]>
    func run(executable: String, variables: [String: String]) -> HookOutcome {
        runs.update { $0.append(variables) }
        return .exited(status: 0)
    }
}

/// Programs that are never started: git, the browser and notifications all fail to start.
struct RecordingProgramLauncher: ProgramLauncher {
    func run(_ program: String, _ arguments: [String], timeoutMilliseconds: Int) -> ProgramResult {
        ProgramResult(status: nil, output: "", startError: ENOENT)
    }
    func start(_ program: String, _ arguments: [String], waitMilliseconds: Int) -> Bool { false }
}

/// A Secret Service that has no provider.
struct FakeKeyringDiagnosis: KeyringDiagnosis {
    func ping() throws(StoreError) { throw StoreError(.unavailable, "no Secret Service provider") }
    func defaultCollection() throws(StoreError) -> (label: String, isLocked: Bool) {
        throw StoreError(.unavailable, "no Secret Service provider")
    }
}

/// The fake file store's lock: its items live in this process alone, so there is no other
/// process to wait for; taking it again while held, as the real one allows, is allowed.
final class UnsharedFileLock: SessionLock {
    func withLock<Result>(_ body: () throws -> Result) throws -> Result { try body() }
}
