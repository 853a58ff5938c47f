/// The `backend` setting (product contract §2): what the user asked for.
public enum RequestedBackend: String, Sendable, CaseIterable {
    case auto
    case secretService = "secret-service"
    case file
}

/// Which store keeps the credentials, and why (product contract §6). `status` prints it; the
/// fallback from the Secret Service to the file announces itself in one stderr line.
public struct BackendChoice: Sendable, Equatable {
    public enum Backend: String, Sendable {
        case secretService = "secret-service"
        case file
    }

    public var backend: Backend
    /// Why this backend is in use, in words fit for `status` and the fallback line.
    public var reason: String
    /// Whether `auto` fell back to the file because the Secret Service could not serve.
    public var isFallback: Bool
    /// Whether lookups also consult the encrypted file when it exists: in `auto` the file may
    /// hold credentials stored while no keyring was there.
    public var consultsFile: Bool

    public init(backend: Backend, reason: String, isFallback: Bool = false, consultsFile: Bool = false) {
        self.backend = backend
        self.reason = reason
        self.isFallback = isFallback
        self.consultsFile = consultsFile
    }

    /// The one stderr line that says the file is used and why, when `auto` fell back.
    public var fallbackNotice: String? {
        isFallback ? "using the encrypted file store: \(reason)" : nil
    }

    /// Decides the backend. `probe` connects to the Secret Service within its bound; only
    /// `auto` calls it.
    ///
    /// A Secret Service that is missing or does not answer in time is a reason to use the file;
    /// one that is there but locked, or that fails otherwise, is the user's to fix, never a
    /// silent switch (exit 4).
    public static func decide(
        _ requested: RequestedBackend, requestedBy origin: String,
        probe: () throws(StoreError) -> Void
    ) throws(StoreError) -> BackendChoice {
        switch requested {
        case .file:
            return BackendChoice(backend: .file, reason: "chosen by \(origin)")
        case .secretService:
            return BackendChoice(backend: .secretService, reason: "chosen by \(origin)")
        case .auto:
            do {
                try probe()
                return BackendChoice(backend: .secretService, reason: "the Secret Service answered",
                                     consultsFile: true)
            } catch where error.kind == .unavailable || error.kind == .timedOut {
                return BackendChoice(backend: .file, reason: error.message, isFallback: true)
            }
        }
    }
}
