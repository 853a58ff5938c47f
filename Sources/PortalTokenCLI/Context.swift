import EncryptedFileStore
import Glibc
import PortalTokenCore
import SecretServiceStore
import SessionBus

/// What a command runs with: the streams, the environment and the resolved settings, and the
/// services (the ports) that the composition root or a test fills. Commands reach every
/// adapter through here.
final class Context {
    let streams: StandardStreams
    let environment: [String: String]
    let settings: Settings
    let services: Services
    /// The name the binary was started under, for messages.
    let programName: String
    /// Why the config file could not be used, for `doctor`, which runs on without it.
    var settingsError: (any Error)?

    init(
        streams: StandardStreams, environment: [String: String], settings: Settings, programName: String,
        services: Services = .live
    ) {
        self.streams = streams
        self.environment = environment
        self.settings = settings
        self.services = services
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

    func now() -> Int64 { services.now() }

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
        let choice = try services.backendChoice(self)
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

    private var lockedItemStores: [BackendChoice.Backend: LockedItemStore] = [:]

    /// One backend's items, every write under the store lock; one store per backend and run.
    func items(_ backend: BackendChoice.Backend) throws -> any ItemStore {
        if let store = lockedItemStores[backend] { return store }
        let store = LockedItemStore(try services.itemStore(self, backend), lock: try storeLock())
        lockedItemStores[backend] = store
        return store
    }

    /// git credentials: in the backend in use, and only it.
    func credentials() throws -> CredentialItems { CredentialItems(try items(backendChoice().backend)) }

    /// The Portal session of the configured auth environment.
    func sessionService() throws -> SessionService {
        try checkPortalSettings()
        return try Composition.sessionService(for: self)
    }

    /// Where a waiting two-factor step is kept: beside the session, in the backend in use.
    func twoFactorSteps() throws -> TwoFactorStepItems { TwoFactorStepItems(try items(backendChoice().backend)) }

    /// The Client Auth client for a sign-in configuration.
    func clientAuthClient(configuration: ClientAuthConfiguration) throws -> ClientAuthClient {
        try Composition.clientAuthClient(for: self, configuration: configuration)
    }

    /// Completing a sign-in for the configured environment.
    func signInService(configuration: ClientAuthConfiguration) throws -> SignInService {
        try Composition.signInService(for: self, configuration: configuration)
    }

    /// The lock held around a whole grant exchange or code check.
    func signInLock() throws -> SessionFileLock { try Composition.signInLock(for: self) }

    /// The HTTP transport to Portal.
    func transport() throws -> any HTTPTransport { try services.transport(self) }

    /// The configured auth environment ID; every Portal-session command needs one.
    func authEnvironmentID() throws(CLIError) -> String {
        guard let value = settings.value(.authEnvironmentID)?.trimmingWhitespace, !value.isEmpty else {
            throw .usage(
                "no auth environment ID is set",
                hint: "set PORTAL_AUTH_ENVIRONMENT_ID, pass --env ID, or add auth-environment-id to the config file")
        }
        return value
    }

    /// The Portal API base URL from the api-host setting (docs/portal-api.md, "Base URL").
    func apiBase() throws(CLIError) -> PortalAPIBase {
        do {
            return try PortalAPIBase(apiHost: settings.value(.apiHost) ?? PortalAPIBase.defaultHost)
        } catch {
            throw .usage("\(settings.origin(of: .apiHost)): \(error.message)", hint: error.hint)
        }
    }

    /// Whether a credential-protocol request is answered from the Portal session
    /// (docs/sessions.md, "Portal origins in the credential protocol") rather than from generic
    /// storage: the core's routing, with this run's API host.
    func isPortalOrigin(_ request: CredentialRequest) throws(CLIError) -> Bool {
        do {
            return try CredentialRouting.route(request, apiHost: settings.value(.apiHost)) == .portalSession
        } catch {
            throw .usage("\(settings.origin(of: .apiHost)): \(error.message)", hint: error.hint)
        }
    }

    /// XDG base directories (XDG Base Directory Specification): the variable when it holds an
    /// absolute path, otherwise the default under `HOME`.
    func xdgDirectory(_ variable: String, default relative: String) -> String {
        if let value = environment[variable], value.hasPrefix("/") { return value }
        return (environment["HOME"] ?? "") + "/" + relative
    }
}
