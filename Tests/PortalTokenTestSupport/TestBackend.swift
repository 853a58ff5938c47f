import Foundation

/// The storage backends the end-to-end suites run on. Each scenario runs once per backend.
public enum TestBackend: String, CaseIterable, Sendable, CustomStringConvertible {
    case secretService = "secret-service"

    public var description: String { rawValue }

    /// Environment changes that make portal-token use this backend, with any state it needs
    /// kept under `directory`.
    public func environment(directory: URL) -> [String: String?] {
        switch self {
        case .secretService:
            return ["PORTAL_TOKEN_BACKEND": rawValue]
        }
    }
}
