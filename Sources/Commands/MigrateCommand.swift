import PortalTokenCore

struct MigrateCommand: Command {
    static let name = "migrate"
    static let summary = "Move every item from the other store into the named one"
    static let details = """
        One store is in use at a time. When the other one also holds items (a file left from
        a time without a keyring, say), migrate copies each git credential, Portal session and
        waiting two-factor step into the store named by --to, from the store named by --from:
        by default the file for --to secret-service or --to vault, and the keyring for --to
        file (--from vault --to file moves a host off the Vault store); where that store already holds
        an item of the same slot at least as new (by the items' modification times), the one
        already there is kept. Only once everything is written is the other store moved aside: the
        encrypted file is renamed to <file>.migrated-<UTC time> (it still opens with its
        passphrase); keyring and Vault items are deleted, except a keyring item whose slot the
        file kept with another secret, which nothing else holds. Prints what it did on stderr.
        """

    let destination: BackendChoice.Backend
    let source: BackendChoice.Backend

    init(arguments: ParsedArguments) throws(CLIError) {
        guard let to = arguments.value(.migrateTo) else {
            throw .usage(
                "'migrate' needs --to secret-service, --to file or --to vault",
                hint: "see 'portal-token migrate --help'")
        }
        guard let destination = BackendChoice.Backend(rawValue: to) else {
            throw .usage("--to must be secret-service, file or vault")
        }
        var source = destination.other
        if let from = arguments.value(.migrateFrom) {
            guard let named = BackendChoice.Backend(rawValue: from) else {
                throw .usage("--from must be secret-service, file or vault")
            }
            source = named
        }
        guard source != destination else { throw .usage("--from and --to name the same store") }
        self.destination = destination
        self.source = source
    }

    func run(in context: Context) throws {
        let streams = context.streams
        guard try context.storeExists(source) else {
            streams.printError(
                """
                portal-token: nothing to migrate: \(try context.storeDescription(source)) holds \
                nothing
                """
            )
            return
        }
        if destination == .secretService, try context.secretServicePresence() != .provider {
            throw StoreError(
                .unavailable, "no Secret Service provider is registered on the session bus",
                hint: "start a keyring (gnome-keyring-daemon, KWallet or KeePassXC), or migrate --to file")
        }
        let (outcome, aside) = try context.storeLock().withLock { () throws -> (ItemMigration.Outcome, String) in
            let outcome = try ItemMigration.copy(from: context.items(source), to: context.items(destination))
            // Everything is in the destination now: only then does the source go. An item whose
            // slot the destination kept newer with another secret was never written there, so
            // the keyring keeps it (the file is only moved aside, so it keeps it anyway).
            var aside = try context.clear(source, removing: outcome.moved + outcome.superseded)
            if source == .secretService, !outcome.differing.isEmpty {
                let count = outcome.differing.count
                aside +=
                    "; left \(count) item\(count == 1 ? "" : "s") there whose secret differs from the one the file"
                    + " keeps (see 'secret-tool search --all')"
            }
            return (outcome, aside)
        }
        // Both stores changed: no copy of either may be served, whatever it is named after.
        Sessions.dropEveryCopy(from: context.services.secretCache())
        let moved = outcome.moved.count, kept = outcome.kept
        streams.printError(
            "portal-token: moved \(moved) item\(moved == 1 ? "" : "s") to the \(destination.rawValue) store"
                + (kept > 0 ? " (kept \(kept) newer one\(kept == 1 ? "" : "s") already there)" : "") + "; \(aside)")
    }
}

extension Context {
    /// Moves a migrated store aside: the file renamed, the keyring's `items` deleted. Returns what
    /// was done, in words.
    func clear(_ backend: BackendChoice.Backend, removing items: [StoredItem]) throws -> String {
        switch backend {
        case .file:
            let aside = try services.moveFileAside(try storeFilePath(), try keyringTimeout)
            return "moved the encrypted file aside to \(aside)"
        case .secretService, .vault:
            let store = try self.items(backend)
            let ids = Set(items.map(\.id))
            let deleted = try store.delete(ItemMigration.everything) { ids.contains($0.id) }
            let name = backend == .vault ? "the Vault store" : "the Secret Service"
            return "deleted the \(deleted) item\(deleted == 1 ? "" : "s") it moved from \(name)"
        }
    }

    /// A sentence for `status` when the store not in use also holds items, or nil. The file is
    /// judged by its existence (opening it would need its passphrase); the keyring is asked
    /// only when it is registered and not in use.
    func otherStoreNotice() throws -> String? {
        let inUse = try backendChoice().backend
        let other = inUse.other
        switch other {
        case .file:
            guard services.fileExists(try storeFilePath()) else { return nil }
        case .secretService:
            guard try secretServicePresence() == .provider,
                let items = try? self.items(.secretService).search(ItemMigration.everything), !items.isEmpty
            else { return nil }
        case .vault:
            // No store's other is the Vault store: its items are never left behind by a switch.
            return nil
        }
        return
            """
            \(try storeDescription(other)) also holds items; 'portal-token migrate --to \
            \(inUse.rawValue)' merges them
            """
    }
}
