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
}
