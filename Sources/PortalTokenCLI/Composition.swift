import EncryptedFileStore
import KernelKeyring
import PortalHTTP
import PortalTokenCore
import SecretServiceStore
import SessionBus

/// The one place that picks concrete adapters for the settings in force.
enum Composition {
    static let defaultKeyringTimeoutMilliseconds = 3000
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

    /// The session bus through sd-bus, bounded like the keyring; nil when there is none (no
    /// address, no socket: known at once, well within the second that docs/storage.md, "Backends and the auto
    /// decision", allows).
    static func sessionBus(for context: Context) throws -> SessionBus? {
        try SessionBus.connect(timeoutMilliseconds: try keyringTimeout(context.settings))
    }

    /// What the session bus shows of the Secret Service: no bus, no provider, or a provider.
    /// The bus daemon answers, never the keyring, so a stalled keyring reads as present.
    static func secretServicePresence(for context: Context) throws -> SecretServicePresence {
        try presence(on: try context.sessionBus())
    }

    private static func presence(on bus: SessionBus?) throws(StoreError) -> SecretServicePresence {
        guard let bus else { return .noBus }
        return try bus.hasSecretServiceProvider() ? .provider : .noProvider
    }

    /// Which backend serves, and why: in `auto`, from what the session bus shows.
    static func backendChoice(for context: Context) throws -> BackendChoice {
        let requested = try requestedBackend(context.settings)
        let bus = requested == .auto ? try context.sessionBus() : nil
        return try BackendChoice.decide(requested, requestedBy: context.settings.origin(of: .backend)) {
            () throws(StoreError) in
            try presence(on: bus)
        }
    }

    /// The backend in use and why, for `status`.
    static func backendDescription(for context: Context) throws -> (name: String, reason: String) {
        let choice = try context.backendChoice()
        return (choice.backend.rawValue, choice.reason)
    }

    /// The Secret Service as an item store, bounded like every keyring call.
    static func keyringItems(for context: Context) throws -> SecretServiceItemStore {
        SecretServiceItemStore(
            timeoutMilliseconds: try keyringTimeout(context.settings), allowPrompt: context.allowPrompt)
    }

    /// `PORTAL_TOKEN_FILE`, else `$XDG_DATA_HOME/portal-token/store` (docs/settings.md, "The encrypted file store").
    static func storeFilePath(_ context: Context) throws(CLIError) -> String {
        if let path = context.settings.value(.storeFile) { return path }
        if context.environment["XDG_DATA_HOME"]?.hasPrefix("/") != true, context.environment["HOME"]?.isEmpty ?? true {
            throw .usage(
                "cannot place the encrypted store: neither XDG_DATA_HOME nor HOME is set",
                hint: "set PORTAL_TOKEN_FILE to the store's path")
        }
        return context.xdgDirectory("XDG_DATA_HOME", default: ".local/share") + "/portal-token/store"
    }

    /// The encrypted file store; Context keeps one per run, so credentials and the session share
    /// one unlock.
    static func fileStore(for context: Context) throws -> EncryptedFileStore {
        let path = try storeFilePath(context)
        let source = PassphraseSource(
            settings: context.settings, environment: context.environment,
            streams: context.streams, storePath: path)
        let streams = context.streams
        return EncryptedFileStore(
            path: path,
            keyCacheTimeoutSeconds: try context.settings.seconds(
                .keyCacheTimeout, default: defaultKeyCacheTimeoutSeconds, maximum: maximumKeyCacheTimeoutSeconds),
            lockTimeoutMilliseconds: try keyringTimeout(context.settings),
            passphrase: source.passphrase(for:),
            warn: { streams.printError("portal-token: warning: \($0)") },
            created: { [weak context] in
                // The one announcement of the fallback (docs/storage.md, "Backends and the auto decision"): by the
                // write that creates the file store, never again.
                if let notice = (try? context?.backendChoice())??.fallbackNotice {
                    streams.printError("portal-token: \(notice)")
                }
            })
    }

    /// The cross-process lock around every write to either store (docs/storage.md, "The store lock"), one per
    /// run and reentrant, so a session change and a credential write in one process share it.
    /// A holder's every keyring call is bounded, so waiting for a few of them is bounded too.
    static func storeLock(for context: Context) throws -> SessionFileLock {
        SessionFileLock(context: context, timeoutMilliseconds: max(4 * (try keyringTimeout(context.settings)), 1000))
    }

    /// The stores a cached session may come from, together: the file and the bus. A locked
    /// keyring, or a migration between the two, drops this family's cached copies and no other's.
    static func cacheFamily(_ context: Context) -> String {
        [(try? storeFilePath(context)) ?? "", context.environment["DBUS_SESSION_BUS_ADDRESS"] ?? ""]
            .joined(separator: "\u{0}")
    }

    /// The backend's sessions behind a short-lived copy in the kernel keyring. Every change to a
    /// session, a sign-in's included, goes through it, so the copy never outlives what is stored.
    static func cachedSessions(for context: Context) throws -> CachedSessions {
        let choice = try context.backendChoice()
        return CachedSessions(
            SessionItems(try context.items(choice.backend)), cache: context.services.secretCache(context),
            lock: try context.storeLock(),
            // The store behind the cache: which backend was asked for, in which family.
            scope: try requestedBackend(context.settings).rawValue, family: cacheFamily(context),
            timeoutSeconds: try context.settings.seconds(
                .keyCacheTimeout, default: defaultKeyCacheTimeoutSeconds, maximum: maximumKeyCacheTimeoutSeconds),
            now: context.now,
            confirmUnlocked: choice.backend == .secretService
                ? { () throws(StoreError) in try confirmKeyringUnlocked(context) } : nil)
    }

    /// One bounded sd-bus read of the default collection's `Locked` property, without libsecret:
    /// what a cached keyring answer costs before it is served.
    static func confirmKeyringUnlocked(_ context: Context) throws(StoreError) {
        let connected: SessionBus?
        do {
            connected = try context.sessionBus()
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.failed, "the session bus could not be asked (\(type(of: error)))")
        }
        guard let bus = connected else {
            throw StoreError(
                .unavailable, "no D-Bus session bus",
                hint: "run inside a desktop session or dbus-run-session, or use --backend file")
        }
        if try bus.isDefaultCollectionLocked() {
            throw StoreError(.locked, "the default keyring is locked", hint: StoreError.keyringLockedHint)
        }
    }

    /// The Portal session of the configured auth environment, with the libcurl transport, the
    /// host gate of the configured API, the session lock and the user's hook.
    static func sessionService(for context: Context) throws -> SessionService {
        let environmentID = try context.authEnvironmentID()
        let apiBase = try context.apiBase()
        return SessionService(
            authEnvironmentID: environmentID, apiBase: apiBase, store: try cachedSessions(for: context),
            lock: try context.storeLock(),
            transport: try context.services.transport(context),
            requests: PortalRequestBuilder(gate: PortalHostGate(apiBase: apiBase), version: PortalTokenCLI.version),
            sessionEnded: context.services.sessionEnded(context),
            warn: { context.streams.printError("portal-token: warning: \($0)") },
            now: context.now)
    }

    /// libcurl with the configured bounds; every request named in the trace when it is on.
    static func transport(for context: Context) throws -> any HTTPTransport {
        let curl = CurlTransport(options: try HTTPTransportOptions(settings: context.settings))
        return context.isTracing ? TracingTransport(curl, trace: context.trace) : curl
    }

    // MARK: Sign-in

    /// The Client Auth client for the configured environment and API host (docs/portal-api.md, "The Client Auth
    /// endpoints").
    static func clientAuthClient(for context: Context, configuration: ClientAuthConfiguration) throws
        -> ClientAuthClient
    {
        let apiBase = try context.apiBase()
        let api = ClientAuthAPI(
            configuration: configuration, apiBase: apiBase,
            builder: PortalRequestBuilder(gate: PortalHostGate(apiBase: apiBase), version: PortalTokenCLI.version))
        return ClientAuthClient(api: api, transport: try context.services.transport(context))
    }

    /// Held around a whole grant exchange or code check, the request included: long enough to
    /// wait for another process's exchange to finish, bounded like every other lock.
    static func signInLock(for context: Context) throws -> SessionFileLock {
        let http = try HTTPTransportOptions(settings: context.settings)
        let wait =
            http.connectTimeoutMilliseconds + http.totalTimeoutMilliseconds + 4 * (try keyringTimeout(context.settings))
        return SessionFileLock(context: context, timeoutMilliseconds: wait, name: "sign-in.lock")
    }

    /// Completing a sign-in for the configured environment: its client, the session and step
    /// stores of the backend in use, the locks, and the kernel keyring for results that could
    /// not be written.
    static func signInService(for context: Context, configuration: ClientAuthConfiguration) throws -> SignInService {
        return SignInService(
            configuration: configuration, client: try clientAuthClient(for: context, configuration: configuration),
            sessions: try cachedSessions(for: context), steps: try context.twoFactorSteps(),
            sessionLock: try context.storeLock(), signInLock: try signInLock(for: context),
            memory: context.services.secretCache(context),
            now: context.now, trace: context.trace)
    }
}
