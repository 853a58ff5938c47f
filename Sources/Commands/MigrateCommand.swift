import Basics
import Operations
import PortalTokenCore

struct MigrateCommand: Command {
    static let name = "migrate"
    static let isRefusedInClientMode = true
    static let summary = "Move every item from the other store into the named one"
    static let details = """
        One store is in use at a time, and lookups never mix two; status says when the
        other one also holds items (a file left from a time without a keyring, say).
        migrate copies each git credential, Portal session and waiting two-factor step
        into the store named by --to, from the store named by --from: by default the
        file for --to secret-service or --to vault, and the keyring for --to file
        (--from vault --to file moves a host off the Vault store). Where the destination
        already holds an item of the same slot at least as new (by the items'
        modification and creation times), the one already there is kept.

        Only once everything is written is the other store moved aside: the encrypted
        file is renamed to <file>.migrated-<UTC time> (it still opens with its
        passphrase); keyring and Vault items are deleted, the older copy of a slot the
        destination kept included, so one copy of each slot remains, the newest. The
        session copies cached in the kernel keyring are dropped.

        Then the store named by --to is the one in use: where the settings would choose
        another (auto picks the keyring while one is registered), backend = <store> is
        written to the config file, and migrate says so in one line. A --backend flag or
        PORTAL_TOKEN_BACKEND naming another store is left alone, with a warning. Prints
        what it did on stderr: how many items it moved, how many newer ones it kept, and
        where the other store went.

        When the store to move from holds nothing, migrate says so: exit 0. With
        --to secret-service and no Secret Service provider registered on the session bus
        it is exit 4, and so is migrate in client mode (PORTAL_TOKEN_AGENT_SOCK),
        refused naming the agent.
        """

    let destination: BackendChoice.Backend
    let source: BackendChoice.Backend

    init(arguments: ParsedArguments) throws(CLIError) {
        guard let to = arguments.value(.migrateTo) else {
            throw .usage(
                "'migrate' needs --to secret-service, --to file or --to vault",
                hint: "see 'portal-token migrate --help'")
        }
        let names = BackendChoice.Backend.allCases.map(\.rawValue)
        guard let destination = BackendChoice.Backend(rawValue: to) else {
            throw .usage("--to must be secret-service, file or vault", hint: Context.backendHint(for: to, among: names))
        }
        var source = destination.other
        if let from = arguments.value(.migrateFrom) {
            guard let named = BackendChoice.Backend(rawValue: from) else {
                throw .usage(
                    "--from must be secret-service, file or vault", hint: Context.backendHint(for: from, among: names))
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
        // Under both stores' locks (one, when neither is the file): no write to either meanwhile.
        let (outcome, aside) = try context.storeLock(for: source).withLock {
            try context.storeLock(for: destination).withLock { () throws -> (ItemMigration.Outcome, String) in
                let outcome = try ItemMigration.copy(from: context.items(source), to: context.items(destination))
                // Everything is in the destination now: only then does the source go, with the older
                // copies of slots the destination kept, so that no store in use serves a stale one.
                let aside = try context.clear(source, removing: outcome.moved + outcome.superseded + outcome.differing)
                return (outcome, aside)
            }
        }
        // Both stores changed: no copy of either may be served, whatever it is named after.
        Sessions.dropEveryCopy(from: context.services.secretCache())
        let moved = outcome.moved.count, kept = outcome.kept
        streams.printError(
            "portal-token: moved \(moved) item\(moved == 1 ? "" : "s") to the \(destination.rawValue) store"
                + (kept > 0 ? " (kept \(kept) newer one\(kept == 1 ? "" : "s") already there)" : "") + "; \(aside)")
        if let line = try context.makeDefault(destination) { streams.printError("portal-token: \(line)") }
    }
}

extension Context {
    /// Makes `backend` the store later runs use, once a migration moved everything there: the
    /// config file's `backend` is set when the settings would choose another; a flag or variable
    /// that names another is left alone. Returns the line that says what was done, or nil when
    /// the settings already choose it.
    func makeDefault(_ backend: BackendChoice.Backend) throws -> String? {
        let requested = try Self.requestedBackend(settings)
        let chosen =
            requested == .auto ? try backendChoice().backend : BackendChoice.Backend(rawValue: requested.rawValue)
        guard chosen != backend else { return nil }
        if settings.isGivenOutsideTheConfigFile(.backend) {
            return """
                warning: \(settings.origin(of: .backend)) still chooses the \(requested.rawValue) store; set it to \
                \(backend.rawValue), or leave it out
                """
        }
        guard let path = settings.configPath else { return nil }
        let current: [UInt8]
        do {
            current = try FileReading.contents(of: path, ownOnly: true)
        } catch .missing {
            current = []
        } catch {
            return "warning: could not make \(backend.rawValue) the default: cannot read \(path) (\(error.reason))"
        }
        let changed = Settings.settingValue(
            in: String(decoding: current, as: UTF8.self), key: Setting.backend.key, to: backend.rawValue)
        do {
            try Directories.createParent(of: path)
            try AtomicFile.replace(path, with: Array(changed.utf8), temporaryPrefix: ".config.tmp-")
        } catch {
            return "warning: could not make \(backend.rawValue) the default in \(path): \(error)"
        }
        return "the \(backend.rawValue) store is the default now (backend = \(backend.rawValue) in \(path))"
    }

    /// Moves a migrated store aside: the file renamed, the keyring's `items` deleted. Returns what
    /// was done, in words.
    func clear(_ backend: BackendChoice.Backend, removing items: [StoredItem]) throws -> String {
        switch backend {
        case .file:
            let aside = try services.moveFileAside(try storeFilePath(), try storeLock(for: .file))
            return "moved the encrypted file aside to \(aside)"
        case .secretService, .vault:
            let store = try self.items(backend)
            let ids = Set(items.map(\.id))
            let deleted = try store.delete(ItemMigration.everything) { ids.contains($0.id) }
            let name = backend == .vault ? "the Vault store" : "the Secret Service"
            return "deleted \(deleted) item\(deleted == 1 ? "" : "s") from \(name)"
        }
    }

}
