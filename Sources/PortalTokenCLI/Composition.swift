import EncryptedFileStore
import KernelKeyring
import PortalHTTP
import PortalTokenCore
import SecretServiceStore

/// The one place that picks concrete adapters for the settings in force.
enum Composition {
    static let defaultKeyringTimeoutMilliseconds = 3000
    /// How long `auto` waits for the Secret Service before it uses the file: product contract
    /// §6 allows "never more than about 1 second" when there is no bus or no provider.
    static let autoProbeTimeoutMilliseconds = 1000
    /// gpg-agent's default-cache-ttl is 10 minutes; a run of git commands over a quarter of an
    /// hour should ask once.
    static let defaultKeyCacheTimeoutSeconds = 900
    static let maximumKeyCacheTimeoutSeconds = 30 * 24 * 3600

    static func requestedBackend(_ settings: Settings) throws(CLIError) -> RequestedBackend {
        guard let text = settings.value(.backend) else { return .auto }
        guard let backend = RequestedBackend(rawValue: text) else {
            throw .usage("\(settings.origin(of: .backend)) must be auto, secret-service or file")
        }
        return backend
    }

    static func keyringTimeout(_ settings: Settings) throws -> Int {
        try settings.milliseconds(.keyringTimeout, default: defaultKeyringTimeoutMilliseconds)
    }

    /// Which backend serves, and why. In `auto` this asks the Secret Service once, within
    /// its bound.
    static func backendChoice(for context: Context) throws -> BackendChoice {
        let requested = try requestedBackend(context.settings)
        let probeTimeout = min(try keyringTimeout(context.settings), autoProbeTimeoutMilliseconds)
        return try BackendChoice.decide(requested, requestedBy: context.settings.origin(of: .backend)) { () throws(StoreError) in
            try SecretServiceStore(timeoutMilliseconds: probeTimeout, allowPrompt: false).probe()
        }
    }

    /// The backend in use and why, for `status`.
    static func backendDescription(for context: Context) throws -> (name: String, reason: String) {
        let choice = try context.backendChoice()
        return (choice.backend.rawValue, choice.reason)
    }

    static func credentialStore(for context: Context) throws -> any CredentialStore {
        let choice = try context.backendChoice()
        switch choice.backend {
        case .file:
            return try context.fileStore()
        case .secretService:
            let keyring = SecretServiceStore(timeoutMilliseconds: try keyringTimeout(context.settings),
                                             allowPrompt: context.allowPrompt)
            guard choice.consultsFile, EncryptedFileStore.exists(at: try storeFilePath(context)) else { return keyring }
            return CombinedCredentialStore(primary: keyring, secondary: try context.fileStore(), now: context.now)
        }
    }

    static func sessionStore(for context: Context) throws -> any SessionStore {
        let choice = try context.backendChoice()
        switch choice.backend {
        case .file:
            return EncryptedFileSessionStore(try context.fileStore())
        case .secretService:
            let keyring = SecretServiceSessionStore(timeoutMilliseconds: try keyringTimeout(context.settings),
                                                    allowPrompt: context.allowPrompt)
            guard choice.consultsFile, EncryptedFileStore.exists(at: try storeFilePath(context)) else { return keyring }
            return CombinedSessionStore(primary: keyring, secondary: EncryptedFileSessionStore(try context.fileStore()))
        }
    }

    /// `PORTAL_TOKEN_FILE`, else `$XDG_DATA_HOME/portal-token/store` (product contract §2).
    static func storeFilePath(_ context: Context) throws(CLIError) -> String {
        if let path = context.settings.value(.storeFile) { return path }
        if context.environment["XDG_DATA_HOME"]?.hasPrefix("/") != true, context.environment["HOME"]?.isEmpty ?? true {
            throw .usage("cannot place the encrypted store: neither XDG_DATA_HOME nor HOME is set",
                         hint: "set PORTAL_TOKEN_FILE to the store's path")
        }
        return context.xdgDirectory("XDG_DATA_HOME", default: ".local/share") + "/portal-token/store"
    }

    /// The encrypted file store; Context keeps one per run, so credentials and the session share
    /// one unlock.
    static func fileStore(for context: Context) throws -> EncryptedFileStore {
        let path = try storeFilePath(context)
        let source = PassphraseSource(settings: context.settings, environment: context.environment,
                                      streams: context.streams, storePath: path)
        let streams = context.streams
        return EncryptedFileStore(
            path: path,
            keyCacheTimeoutSeconds: try context.settings.seconds(
                .keyCacheTimeout, default: defaultKeyCacheTimeoutSeconds, maximum: maximumKeyCacheTimeoutSeconds),
            lockTimeoutMilliseconds: try keyringTimeout(context.settings),
            passphrase: source.passphrase(for:),
            warn: { streams.printError("portal-token: warning: \($0)") })
    }

    /// The Portal session of the configured auth environment, with the libcurl transport, the
    /// host gate of the configured API, the session lock and the user's hook.
    static func sessionService(for context: Context) throws -> SessionService {
        let environmentID = try context.authEnvironmentID()
        let apiBase = try context.apiBase()
        let timeout = try keyringTimeout(context.settings)
        let hook = SessionHook(context: context)
        let lock = SessionFileLock(context: context, timeoutMilliseconds: max(timeout, 1000))
        // The store behind the cache: which backend was asked for, which file and which bus.
        let scope = [
            try requestedBackend(context.settings).rawValue,
            (try? storeFilePath(context)) ?? "",
            context.environment["DBUS_SESSION_BUS_ADDRESS"] ?? "",
        ].joined(separator: "\u{0}")
        let store = CachedSessionStore(
            cache: KernelKeyring(), lock: lock, scope: scope,
            timeoutSeconds: try context.settings.seconds(
                .keyCacheTimeout, default: defaultKeyCacheTimeoutSeconds, maximum: maximumKeyCacheTimeoutSeconds),
            now: context.now, store: { try sessionStore(for: context) })
        return SessionService(
            authEnvironmentID: environmentID, apiBase: apiBase, store: store, lock: lock,
            transport: CurlTransport(options: try HTTPTransportOptions(settings: context.settings)),
            requests: PortalRequestBuilder(gate: PortalHostGate(apiBase: apiBase), version: PortalTokenCLI.version),
            sessionEnded: hook.run,
            warn: { context.streams.printError("portal-token: warning: \($0)") },
            now: context.now)
    }
}
