import Foundation

/// The storage backends the end-to-end suites run on. Each scenario runs once per backend.
public enum TestBackend: String, CaseIterable, Sendable, CustomStringConvertible {
    case secretService = "secret-service"
    /// The encrypted file, with a passphrase from the environment and the key cached as it
    /// would be for a user, for a shorter time.
    case file

    public var description: String { rawValue }

    /// Environment changes that make portal-token use this backend, with any state it needs
    /// kept under `directory`.
    public func environment(directory: URL) -> [String: String?] {
        switch self {
        case .secretService:
            return ["PORTAL_TOKEN_BACKEND": rawValue]
        case .file:
            return ["PORTAL_TOKEN_BACKEND": rawValue,
                    "PORTAL_TOKEN_FILE": directory.appendingPathComponent("store").path,
                    "PORTAL_TOKEN_PASSPHRASE": "scenario passphrase",
                    // Each test's file caches a key of its own; a minute is enough for a test and
                    // keeps them from piling up in the user's keyring.
                    "PORTAL_TOKEN_KEY_CACHE_TIMEOUT": "60"]
        }
    }
}
