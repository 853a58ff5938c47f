import EncryptedFileStore
import Glibc
import PortalTokenCore
import SecretServiceStore
import SessionBus

/// What a command runs with: the streams, the environment and the resolved settings, and the
/// adapters that Composition picks for them.
final class Context {
    let streams: StandardStreams
    let environment: [String: String]
    let settings: Settings
    /// The name the binary was started under, for messages.
    let programName: String
    /// Why the config file could not be used, for `doctor`, which runs on without it.
    var settingsError: (any Error)?

    init(streams: StandardStreams, environment: [String: String], settings: Settings, programName: String) {
        self.streams = streams
        self.environment = environment
        self.settings = settings
        self.programName = programName
    }

    /// A keyring may prompt to unlock only when a person is at a terminal.
    var allowPrompt: Bool { streams.inputIsTerminal || streams.errorIsTerminal }

    /// Whether `--verbose` or `PORTAL_TOKEN_TRACE` asked for the debug trace.
    var isTracing: Bool { ((try? settings.bool(.trace)) ?? nil) ?? false }

    /// The debug trace, on stderr: a line per step, every secret left out by the callers (they
    /// pass paths, statuses, end users and reasons, never a value).
    var trace: @Sendable (String) -> Void {
        guard isTracing else { return { _ in } }
        let streams = self.streams
        return { streams.printError("portal-token: trace: \($0)") }
    }

    func now() -> Int64 { Int64(time(nil)) }

    private var cachedCredentialStore: (any CredentialStore)?
    private var cachedFileStore: EncryptedFileStore?

    /// The encrypted file store, one per run: git credentials and the Portal session share its
    /// unlock.
    func fileStore() throws -> EncryptedFileStore {
        if let cachedFileStore { return cachedFileStore }
        let store = try Composition.fileStore(for: self)
        cachedFileStore = store
        return store
    }

    private var cachedBackendChoice: BackendChoice?

    /// The backend in use and why (what `status` shows), decided once per run. Silent: the
    /// fallback to the file is announced by the write that creates the file store.
    func backendChoice() throws -> BackendChoice {
        if let cachedBackendChoice { return cachedBackendChoice }
        let choice = try Composition.backendChoice(for: self)
        cachedBackendChoice = choice
        return choice
    }

    private var connectedSessionBus: SessionBus??

    /// The session bus through sd-bus, connected once per run; nil when there is none.
    func sessionBus() throws -> SessionBus? {
        if let connectedSessionBus { return connectedSessionBus }
        let bus = try Composition.sessionBus(for: self)
        connectedSessionBus = .some(bus)
        return bus
    }

    private var cachedKeyringItems: SecretServiceItemStore?

    /// The Secret Service as an item store, one connection per run.
    func keyringItems() throws -> SecretServiceItemStore {
        if let cachedKeyringItems { return cachedKeyringItems }
        let items = try Composition.keyringItems(for: self)
        cachedKeyringItems = items
        return items
    }

    private var cachedStoreLock: SessionFileLock?

    /// The one cross-process lock around every write to either store, shared by everything in
    /// this run (it is reentrant within the process).
    func storeLock() throws -> SessionFileLock {
        if let cachedStoreLock { return cachedStoreLock }
        let lock = try Composition.storeLock(for: self)
        cachedStoreLock = lock
        return lock
    }

    /// The store for git credentials: the backend in use, and only it.
    func credentialStore() throws -> any CredentialStore {
        if let cachedCredentialStore { return cachedCredentialStore }
        let store = try Composition.credentialStore(for: self, backend: try backendChoice().backend)
        cachedCredentialStore = store
        return store
    }

    /// The configured auth environment ID; every Portal-session command needs one.
    func authEnvironmentID() throws(CLIError) -> String {
        guard let value = settings.value(.authEnvironmentID)?.trimmingWhitespace, !value.isEmpty else {
            throw .usage("no auth environment ID is set",
                         hint: "set PORTAL_AUTH_ENVIRONMENT_ID, pass --env ID, or add auth-environment-id to the config file")
        }
        return value
    }

    /// The Portal API base URL from the api-host setting (wire contract §8.3).
    func apiBase() throws(CLIError) -> PortalAPIBase {
        do {
            return try PortalAPIBase(apiHost: settings.value(.apiHost) ?? PortalAPIBase.defaultHost)
        } catch {
            throw .usage("\(settings.origin(of: .apiHost)): \(error.message)", hint: error.hint)
        }
    }

    /// Whether a credential-protocol request names a Portal origin, answered from the session
    /// (product contract §5) rather than from generic storage.
    func isPortalOrigin(_ request: CredentialRequest) throws(CLIError) -> Bool {
        guard let protocolName = request.protocolName, let host = request.host else { return false }
        return PortalHostGate(apiBase: try apiBase()).isPortalOrigin(protocolName: protocolName, host: host.gitHost)
    }

    /// XDG base directories (XDG Base Directory Specification): the variable when it holds an
    /// absolute path, otherwise the default under `HOME`.
    func xdgDirectory(_ variable: String, default relative: String) -> String {
        if let value = environment[variable], value.hasPrefix("/") { return value }
        return (environment["HOME"] ?? "") + "/" + relative
    }
}

/// Reading the process environment and small files without Foundation, to keep start-up short.
enum ProcessEnvironment {
    static func current() -> [String: String] {
        var result: [String: String] = [:]
        var pointer = environ
        while let entry = pointer.pointee {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "=") {
                result[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            pointer += 1
        }
        return result
    }
}

enum FileReading {
    enum Failure: Error { case missing, unreadable(errno: Int32), tooLarge, notRegular, foreignOwner(uid: uid_t), writableByOthers(mode: mode_t) }

    /// The whole file, up to `limit` bytes. With `regularOnly`, anything but a regular file (a
    /// FIFO, a device) is refused at once, never waited on (product contract §6); without it (a
    /// request body given as @FILE, which may be a shell's `<(…)`), a pipe is read like a file.
    /// The config file's bound, and the default one.
    static let defaultLimit = 1 << 20

    /// With `ownOnly`, a file another user owns, or that group or others may write, is refused
    /// as ssh refuses such a config: whoever can write it chooses what runs and where the token goes.
    static func contents(of path: String, limit: Int = defaultLimit, regularOnly: Bool = true,
                         ownOnly: Bool = false) throws(Failure) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | (regularOnly ? O_NONBLOCK : 0))
        if descriptor < 0 { throw errno == ENOENT ? .missing : .unreadable(errno: errno) }
        defer { close(descriptor) }
        if regularOnly {
            var status = stat()
            guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { throw .notRegular }
            if ownOnly {
                if status.st_uid != geteuid() && status.st_uid != 0 { throw .foreignOwner(uid: status.st_uid) }
                if status.st_mode & 0o022 != 0 { throw .writableByOthers(mode: status.st_mode & 0o7777) }
            }
            if Int64(status.st_size) > Int64(limit) { throw .tooLarge }
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .unreadable(errno: errno)
            }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
            if bytes.count > limit { throw .tooLarge }
        }
        return bytes
    }
}
