import Basics
import PortalTokenCore

/// `migrate`: every item of one store copied into another, newest kept, then the source cleared
/// (docs/storage.md, "Migrating").
package enum Migrate {
    package enum Outcome {
        /// The source holds nothing (its description).
        case nothingStored(String)
        /// Items moved, newer ones the destination kept, and what became of the source. Then
        /// `Context.makeDefault` makes the destination the store later runs use.
        case moved(Int, kept: Int, aside: String)
    }

    package static func run(
        from source: BackendChoice.Backend, to destination: BackendChoice.Backend, _ context: Context
    ) throws -> Outcome {
        guard try context.storeExists(source) else { return .nothingStored(try context.storeDescription(source)) }
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
        return .moved(outcome.moved.count, kept: outcome.kept, aside: aside)
    }
}

extension Context {
    /// Makes `backend` the store later runs use, once a migration moved everything there: the
    /// config file's `backend` is set when the settings would choose another; a flag or variable
    /// that names another is left alone. Returns the line that says what was done, or nil when
    /// the settings already choose it.
    package func makeDefault(_ backend: BackendChoice.Backend) throws -> String? {
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
    package func clear(_ backend: BackendChoice.Backend, removing items: [StoredItem]) throws -> String {
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
