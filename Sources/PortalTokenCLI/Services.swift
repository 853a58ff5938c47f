import Glibc
import KernelKeyring
import PortalTokenCore

/// The ports a command reaches, through its Context and nowhere else. The composition root
/// fills them with the real adapters (`Services.live`); a test fills them with fakes and runs
/// every command in-process.
struct Services {
    /// Which backend serves, and why.
    var backendChoice: (Context) throws -> BackendChoice
    /// What the session bus shows of the Secret Service.
    var secretServicePresence: (Context) throws -> SecretServicePresence
    /// The item store of one backend.
    var itemStore: (Context, BackendChoice.Backend) throws -> any ItemStore
    /// The HTTP transport to Portal.
    var transport: (Context) throws -> any HTTPTransport
    /// The short-lived copy of a session (the kernel keyring).
    var secretCache: (Context) -> any SecretCache
    /// What runs when a session ends (the user's hook).
    var sessionEnded: (Context) -> (SessionEndedEvent) -> Void
    /// The clock, in seconds since the epoch.
    var now: () -> Int64

    /// The real adapters for the settings in force.
    static var live: Services {
        Services(
            backendChoice: { try Composition.backendChoice(for: $0) },
            secretServicePresence: { try Composition.secretServicePresence(for: $0) },
            itemStore: { context, backend in
                switch backend {
                case .file: return try context.fileStore()
                case .secretService: return try context.keyringItems()
                }
            },
            transport: { try Composition.transport(for: $0) },
            secretCache: { _ in KernelKeyring() },
            sessionEnded: { SessionHook(context: $0).run },
            now: { Int64(time(nil)) })
    }
}
