/// The `backend` setting (docs/settings.md, "Every setting"): what the user asked for.
public enum RequestedBackend: String, Sendable, CaseIterable {
    case auto
    case secretService = "secret-service"
    case file
    /// KV v2 on an OpenBao or HashiCorp Vault server (docs/storage.md, "Vault / OpenBao"); never
    /// chosen by `auto`.
    case vault
}

extension RequestedBackend {
    /// The backend people mean by the names they call the stores (`keyring`, `gnome-keyring`,
    /// `kwallet`, `openbao`, `encrypted-file`), for a "did you mean"; nil for any other word.
    public static func commonlyCalled(_ word: String) -> RequestedBackend? {
        switch word.lowercased() {
        case "keyring", "libsecret", "gnome-keyring", "kwallet", "keepassxc", "secretservice", "secret_service",
            "secrets":
            return .secretService
        case "encrypted-file", "encrypted", "files": return .file
        case "openbao", "bao", "kv": return .vault
        default: return nil
        }
    }
}

/// What the session bus shows of the Secret Service, which is all `auto` decides from
/// (docs/storage.md, "Backends and the auto decision"): what exists, never how fast the keyring answers.
public enum SecretServicePresence: Sendable, Equatable {
    /// No session bus to connect to.
    case noBus
    /// A bus, but nothing owns or can activate `org.freedesktop.secrets` on it.
    case noProvider
    /// A provider owns the name, or the bus can start one.
    case provider
}

/// Which store keeps the credentials, and why (docs/storage.md, "Backends and the auto decision"). One store is in use
/// at a time: lookups never mix two. `status` prints the choice; the `store` or sign-in that creates
/// the file store under `auto` announces it once.
public struct BackendChoice: Sendable, Equatable {
    public enum Backend: String, Sendable, CaseIterable {
        case secretService = "secret-service"
        case file
        case vault

        /// The store that is not this one: where `migrate` looks for items left behind. The Vault
        /// store's is the file, which a headless host (a CI runner, a server) kept before it.
        public var other: Backend { self == .file ? .secretService : .file }
    }

    public var backend: Backend
    /// Why this backend is in use, in words fit for `status` and the fallback notice.
    public var reason: String
    /// Whether `auto` chose the file because there is no keyring to use.
    public var isFallback: Bool

    public init(backend: Backend, reason: String, isFallback: Bool = false) {
        self.backend = backend
        self.reason = reason
        self.isFallback = isFallback
    }

    /// The one stderr line that says the file is used and why; printed only by the write that
    /// creates the file store.
    public var fallbackNotice: String? {
        isFallback ? "using the encrypted file store: \(reason)" : nil
    }

    /// Decides the backend. `presence` asks the session bus (never the keyring itself, so a
    /// stalled keyring cannot make the file look right); only `auto` calls it. A failure to get
    /// an answer from the bus is thrown (exit 4), never taken as "no keyring".
    public static func decide(
        _ requested: RequestedBackend, requestedBy origin: String,
        presence: () throws(StoreError) -> SecretServicePresence
    ) throws(StoreError) -> BackendChoice {
        switch requested {
        case .file:
            return BackendChoice(backend: .file, reason: "chosen by \(origin)")
        case .secretService:
            return BackendChoice(backend: .secretService, reason: "chosen by \(origin)")
        case .vault:
            return BackendChoice(backend: .vault, reason: "chosen by \(origin)")
        case .auto:
            switch try presence() {
            case .provider:
                return BackendChoice(
                    backend: .secretService,
                    reason: "a Secret Service provider is registered on the session bus")
            case .noProvider:
                return BackendChoice(
                    backend: .file, reason: "no Secret Service provider is registered on the session bus",
                    isFallback: true)
            case .noBus:
                return BackendChoice(backend: .file, reason: "there is no D-Bus session bus", isFallback: true)
            }
        }
    }
}
