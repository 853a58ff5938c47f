import PortalHTTP
import PortalTokenCore
import SecretServiceStore

/// The one place that picks concrete adapters for the settings in force.
enum Composition {
    static let defaultKeyringTimeoutMilliseconds = 3000

    enum Backend: String, CaseIterable {
        case auto
        case secretService = "secret-service"
        case file
    }

    static func backend(_ settings: Settings) throws(CLIError) -> Backend {
        guard let text = settings.value(.backend) else { return .auto }
        guard let backend = Backend(rawValue: text) else {
            throw .usage("\(settings.origin(of: .backend)) must be auto, secret-service or file")
        }
        return backend
    }

    static func credentialStore(for context: Context) throws -> any CredentialStore {
        let timeout = try context.settings.milliseconds(.keyringTimeout, default: defaultKeyringTimeoutMilliseconds)
        switch try backend(context.settings) {
        case .auto, .secretService:
            return SecretServiceStore(timeoutMilliseconds: timeout, allowPrompt: context.allowPrompt)
        case .file:
            throw CLIError("the encrypted file backend is not available in this build", exitCode: .storage)
        }
    }

    static func sessionStore(for context: Context) throws -> any SessionStore {
        let timeout = try context.settings.milliseconds(.keyringTimeout, default: defaultKeyringTimeoutMilliseconds)
        switch try backend(context.settings) {
        case .auto, .secretService:
            return SecretServiceSessionStore(timeoutMilliseconds: timeout, allowPrompt: context.allowPrompt)
        case .file:
            throw CLIError("the encrypted file backend is not available in this build", exitCode: .storage)
        }
    }

    /// The backend in use and why, for `status`.
    static func backendDescription(for context: Context) throws -> (name: String, reason: String) {
        switch try backend(context.settings) {
        case .auto: return ("secret-service", "the default backend")
        case .secretService: return ("secret-service", "chosen by \(context.settings.origin(of: .backend))")
        case .file: return ("file", "chosen by \(context.settings.origin(of: .backend))")
        }
    }

    /// The Portal session of the configured auth environment, with the libcurl transport, the
    /// host gate of the configured API, the session lock and the user's hook.
    static func sessionService(for context: Context) throws -> SessionService {
        let environmentID = try context.authEnvironmentID()
        let apiBase = try context.apiBase()
        let timeout = try context.settings.milliseconds(.keyringTimeout, default: defaultKeyringTimeoutMilliseconds)
        let hook = SessionHook(context: context)
        return SessionService(
            authEnvironmentID: environmentID, apiBase: apiBase, store: try sessionStore(for: context),
            lock: SessionFileLock(context: context, timeoutMilliseconds: max(timeout, 1000)),
            transport: CurlTransport(options: try HTTPTransportOptions(settings: context.settings)),
            requests: PortalRequestBuilder(gate: PortalHostGate(apiBase: apiBase), version: PortalTokenCLI.version),
            sessionEnded: hook.run,
            warn: { context.streams.printError("portal-token: warning: \($0)") },
            now: context.now)
    }
}
