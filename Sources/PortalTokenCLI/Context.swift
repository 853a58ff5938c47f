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
        let base: PortalAPIBase
        do {
            base = try apiBase()
        } catch {
            // An unreadable API host is reported only to a request it could be about: a plain
            // git request for another host is answered from generic storage as ever.
            let configured = settings.value(.apiHost) ?? ""
            if PortalHostGate.mayBePortalOrigin(protocolName: protocolName, host: host.gitHost, unreadableAPIHost: configured) {
                throw error
            }
            return false
        }
        return PortalHostGate(apiBase: base).isPortalOrigin(protocolName: protocolName, host: host.gitHost)
    }

    /// XDG base directories (XDG Base Directory Specification): the variable when it holds an
    /// absolute path, otherwise the default under `HOME`.
    func xdgDirectory(_ variable: String, default relative: String) -> String {
        if let value = environment[variable], value.hasPrefix("/") { return value }
        return (environment["HOME"] ?? "") + "/" + relative
    }
}
