import EncryptedFileStore
import KernelKeyring
import PortalTokenCore
import SecretServiceStore

struct MigrateCommand: Command {
    static let name = "migrate"
    static let summary = "Move every item from the other store into the named one"
    static let details = """
        One store is in use at a time. When the other one also holds items (a file left from
        a time without a keyring, say), migrate copies each git credential, Portal session and
        waiting two-factor step into the store named by --to; where that store already holds
        an item of the same slot at least as new (by the items' modification times), the one
        already there is kept. Only once everything is written is the other store moved aside: the
        encrypted file is renamed to <file>.migrated-<UTC time> (it still opens with its
        passphrase); keyring items are deleted, except one whose slot the file kept with another
        secret, which nothing else holds. Prints what it did on stderr.
        """

    let destination: BackendChoice.Backend

    init(arguments: ParsedArguments) throws(CLIError) {
        guard let to = arguments.value(.migrateTo) else {
            throw .usage("'migrate' needs --to secret-service or --to file", hint: "see 'portal-token migrate --help'")
        }
        guard let destination = BackendChoice.Backend(rawValue: to) else {
            throw .usage("--to must be secret-service or file")
        }
        self.destination = destination
    }

    func run(in context: Context) throws {
        let source = destination.other
        let streams = context.streams
        guard try Composition.storeExists(source, for: context) else {
            streams.printError(
                """
                portal-token: nothing to migrate: \(try Composition.storeDescription(source, for: context)) holds \
                nothing
                """
            )
            return
        }
        if destination == .secretService, try context.services.secretServicePresence(context) != .provider {
            throw StoreError(
                .unavailable, "no Secret Service provider is registered on the session bus",
                hint: "start a keyring (gnome-keyring-daemon, KWallet or KeePassXC), or migrate --to file")
        }
        let (outcome, aside) = try context.storeLock().withLock { () throws -> (ItemMigration.Outcome, String) in
            let outcome = try ItemMigration.copy(from: context.items(source), to: context.items(destination))
            // Everything is in the destination now: only then does the source go. An item whose
            // slot the destination kept newer with another secret was never written there, so
            // the keyring keeps it (the file is only moved aside, so it keeps it anyway).
            var aside = try Composition.clear(source, removing: outcome.moved + outcome.superseded, for: context)
            if source == .secretService, !outcome.differing.isEmpty {
                let count = outcome.differing.count
                aside +=
                    "; left \(count) item\(count == 1 ? "" : "s") there whose secret differs from the one the file"
                    + " keeps (see 'secret-tool search --all')"
            }
            return (outcome, aside)
        }
        KernelKeyring().dropAll(withPrefix: CachedSessions.namePrefix(family: Composition.cacheFamily(context)))
        let moved = outcome.moved.count, kept = outcome.kept
        streams.printError(
            "portal-token: moved \(moved) item\(moved == 1 ? "" : "s") to the \(destination.rawValue) store"
                + (kept > 0 ? " (kept \(kept) newer one\(kept == 1 ? "" : "s") already there)" : "") + "; \(aside)")
    }
}

extension Composition {
    /// Whether a backend may hold anything: the file exists; the keyring is registered on the bus.
    static func storeExists(_ backend: BackendChoice.Backend, for context: Context) throws -> Bool {
        switch backend {
        case .file: return EncryptedFileStore.exists(at: try storeFilePath(context))
        case .secretService: return try context.services.secretServicePresence(context) == .provider
        }
    }

    /// The store in words, for messages.
    static func storeDescription(_ backend: BackendChoice.Backend, for context: Context) throws -> String {
        switch backend {
        case .file: return "the encrypted file store at \(try storeFilePath(context))"
        case .secretService: return "the Secret Service"
        }
    }

    /// Moves a migrated store aside: the file renamed, the keyring's `items` deleted. Returns what
    /// was done, in words.
    static func clear(_ backend: BackendChoice.Backend, removing items: [StoredItem], for context: Context) throws
        -> String
    {
        switch backend {
        case .file:
            return "moved the encrypted file aside to \(try context.fileStore().moveAsideAfterMigration())"
        case .secretService:
            let store = try context.items(.secretService)
            let ids = Set(items.map(\.id))
            let deleted = try store.delete(ItemMigration.everything) { ids.contains($0.id) }
            return "deleted the \(deleted) item\(deleted == 1 ? "" : "s") it moved from the Secret Service"
        }
    }

    /// A sentence for `status` when the store not in use also holds items, or nil. The file is
    /// judged by its existence (opening it would need its passphrase); the keyring is asked
    /// only when it is registered and not in use.
    static func otherStoreNotice(for context: Context) throws -> String? {
        let inUse = try context.backendChoice().backend
        let other = inUse.other
        switch other {
        case .file:
            guard EncryptedFileStore.exists(at: try storeFilePath(context)) else { return nil }
        case .secretService:
            guard try context.services.secretServicePresence(context) == .provider,
                let items = try? context.items(.secretService).search(ItemMigration.everything), !items.isEmpty
            else { return nil }
        }
        return
            """
            \(try storeDescription(other, for: context)) also holds items; 'portal-token migrate --to \
            \(inUse.rawValue)' merges them
            """
    }
}
