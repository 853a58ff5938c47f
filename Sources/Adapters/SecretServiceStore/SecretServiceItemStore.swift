import CLibSecret
import Glibc
import PortalTokenCore

/// The item-store port on the freedesktop Secret Service: items in the default collection, every
/// attribute a string, the schema the `xdg:schema` attribute (docs/storage.md, "Items"). git credentials, Portal
/// sessions and two-factor steps live here through their codecs, laid out so that git's own libsecret helper reads the
/// credentials.
public final class SecretServiceItemStore: ItemStore {
    private let connection: SecretServiceConnection
    /// Schemas built so far, by name and attribute names: libsecret wants one per item created,
    /// and refuses an attribute its schema does not list.
    private var schemas: [String: OpaquePointer] = [:]
    /// The session bus this run holds, for reads that need no unlock; nil without one.
    private let sessionBus: () -> (any SessionBusConnection)?
    private let unlockWithoutPrompt: UnlockWithoutPrompt

    /// - Parameters:
    ///   - timeoutMilliseconds: the bound on each libsecret call.
    ///   - promptPermission: whether the keyring may show an unlock prompt (allowed only when a
    ///     person is at a terminal and no setting rules prompts out); asked once, and only when
    ///     something is found locked.
    ///   - sessionBus: the session bus the run holds, asked for when a search is made: a search
    ///     that needs no unlock reads over it, without libsecret (docs/storage.md, "Reading
    ///     without libsecret"); libsecret reads when there is none, or when a lock is in the way.
    public init(
        timeoutMilliseconds: Int = 3000, promptPermission: @escaping () -> PromptPermission,
        sessionBus: @escaping () -> (any SessionBusConnection)? = { nil }
    ) {
        // A locked default collection is first asked to unlock with no prompt, over the bus the
        // run holds: one place for that rule, for the reads over the bus and for libsecret.
        let unlock = UnlockWithoutPrompt(sessionBus)
        connection = SecretServiceConnection(
            timeoutMilliseconds: timeoutMilliseconds, promptPermission: promptPermission,
            unlockWithoutPrompt: { () throws(StoreError) -> Bool in try unlock.ask() })
        unlockWithoutPrompt = unlock
        self.sessionBus = sessionBus
    }

    /// A store that may prompt (`allowPrompt`) or never does.
    public convenience init(
        timeoutMilliseconds: Int = 3000, allowPrompt: Bool,
        sessionBus: @escaping () -> (any SessionBusConnection)? = { nil }
    ) {
        self.init(
            timeoutMilliseconds: timeoutMilliseconds, promptPermission: { allowPrompt ? .allowed : .noTerminal },
            sessionBus: sessionBus)
    }

    public func search(_ filters: [ItemAttributes]) throws(StoreError) -> [StoredItem] {
        if let bus = sessionBus() {
            var locked: StoreError?
            do {
                if let items = try bus.unlockedSecretServiceItems(filters) { return items }
            } catch  where error.kind == .locked {
                // A provider that held the search while locked.
                locked = error
            }
            // A lock in the way: the provider may unlock with no prompt.
            if try unlockWithoutPrompt.ask(), let items = try bus.unlockedSecretServiceItems(filters) {
                return items
            }
            if let locked { throw locked }
        }
        // libsecret: it unlocks, with a prompt where one is allowed, or says what is locked.
        var items = try loaded(filters, while: "reading the keyring")
        // A locked collection finds nothing, exactly like one that holds nothing.
        if items.isEmpty, try connection.ensureDefaultCollectionIsNotLocked() {
            items = try loaded(filters, while: "reading the keyring")
        }
        return items.map(\.item)
    }

    /// The check and the write are atomic only under the store lock (`LockedItemStore`), which
    /// every writer of the keyring holds: the Secret Service itself has no conditional write.
    @discardableResult
    public func replace(
        _ filters: [ItemAttributes], ifNewest condition: (StoredItem?) -> Bool,
        where isPrevious: (StoredItem) -> Bool, with item: StoredItem
    ) throws(StoreError) -> Bool {
        let operation = "writing to the keyring"
        var collection = try connection.unlockedDefaultCollection()
        let renewals = connection.renewals
        let matching = try loaded(filters, while: operation)
        if connection.renewals != renewals { collection = try connection.defaultCollection() }
        guard condition(matching.first?.item) else { return false }
        let previous = matching.filter { isPrevious($0.item) }
        var attributes = item.attributes
        attributes[StoredItem.schemaAttribute] = nil
        // After every item it replaces, and after every earlier write on this host by the clock.
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let sequence = max(
            Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec), (matching.first?.item.sequence ?? 0) + 1)
        attributes[StoredItem.sequenceAttribute] = String(sequence)
        let stored = attributes.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        var attempt = 1
        func underNewSession() throws(StoreError) {
            connection.renewSession()
            collection = try connection.defaultCollection()
            attempt += 1
        }
        var created: FoundItem
        while true {
            // A provider whose encrypted session failed either refuses the create (and leaves an
            // item with no secret, which is removed) or hands back no secret for the new item;
            // either way the write is made again under a new session (docs/storage.md,
            // "Providers"). A secret that reads back different is the provider's doing.
            var sessionRefused = false
            do {
                created = try connection.create(
                    in: collection, schema: schema(item.schema, attributes: attributes.keys), attributes: stored,
                    label: item.label, secret: item.secret, sessionRefused: &sessionRefused, while: operation)
            } catch  where sessionRefused && attempt < SecretServiceConnection.sessionAttempts {
                try connection.removeUnfinished(stored, while: operation)
                try underNewSession()
                continue
            }
            // Read back from the item just made: a provider may change a secret as it stores it
            // (KeePassXC expands `{REF:…}` and `{TITLE}`-style placeholders in what it hands out).
            // An item that does not hold what was given is removed again, and what it was to
            // replace stays (docs/storage.md, "Providers").
            let readBack = try connection.loadSecret(of: created, while: operation)
            if readBack == item.secret { break }
            try connection.delete(created, while: "removing an item the keyring changed")
            if readBack == nil, attempt < SecretServiceConnection.sessionAttempts {
                try underNewSession()
                continue
            }
            throw StoreError(
                .failed,
                """
                the Secret Service provider changed the secret as it stored it (it read back different), \
                so nothing was replaced
                """,
                hint: "the provider may expand placeholders such as {REF:…} or {TITLE}; store a secret without them",
                namesProvider: true)
        }
        // After a deletion on the way, the earlier search's paths are not safe names on
        // kwalletd5 (see `delete`): what is replaced is found again.
        let replaced =
            attempt == 1
            ? previous
            : try loaded(filters, while: operation).filter {
                isPrevious($0.item) && $0.item.sequence != sequence
            }
        for old in replaced where old.found.objectPath != created.objectPath {
            try connection.delete(old.found, while: "replacing an item in the keyring")
        }
        return true
    }

    public func delete(_ filters: [ItemAttributes], where isDoomed: (StoredItem) -> Bool) throws(StoreError) -> Int {
        let operation = "deleting from the keyring"
        // One item at a time, each from a fresh search: KWallet names items by number in its
        // wallet, and after a deletion a path from the earlier search may name another item or
        // none (docs/storage.md, "Providers"). One search when there is a single item to remove.
        var removed = 0
        for _ in 0..<Self.deletionBound {
            let doomed = try loaded(filters, while: operation).filter { isDoomed($0.item) }
            guard let first = doomed.first else { break }
            if try connection.delete(first.found, while: operation) { removed += 1 }
            if doomed.count == 1 { break }
        }
        return removed
    }

    /// The most items one delete removes: a bound on its searches.
    static let deletionBound = 256

    /// The items matching any filter, each once, newest first by the sequence each write
    /// stamps (items without one, written by another program, after them in the provider's
    /// order), with their secrets. An item whose secret did not load is locked (an error), was
    /// deleted since the search (left out), or came in a session whose encryption failed
    /// (kwalletd5, docs/storage.md "Providers"): the search is made again under a new session,
    /// and an item still without its secret after that is an error, never taken for gone.
    private typealias Loaded = (found: FoundItem, item: StoredItem)
    private func loaded(_ filters: [ItemAttributes], while operation: String) throws(StoreError) -> [Loaded] {
        var attempt = 1
        while true {
            var found: [FoundItem] = []
            for filter in filters {
                let query = filter.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
                for item in try connection.search(query, loadSecrets: true, while: operation).items
                where !found.contains(where: { $0.objectPath == item.objectPath }) {
                    found.append(item)
                }
            }
            var items: [Loaded] = []
            var unread = 0
            for item in found {
                guard let secret = item.secret else {
                    try connection.ensureUnreadItemIsNotLocked(item)
                    unread += 1
                    continue
                }
                let (created, modified) = item.times
                let stored = StoredItem(
                    storedAttributes: item.attributes, label: item.label, secret: secret, created: created,
                    modified: modified, id: item.objectPath)
                // The provider's own matching is not trusted to be a subset match: an item that
                // does not carry every attribute of a filter is not an answer (docs/storage.md,
                // "Providers").
                if stored.matches(any: filters) { items.append((item, stored)) }
            }
            if unread == 0 { return items.sorted { StoredItem.isListedBefore($0.item, $1.item) } }
            guard attempt < SecretServiceConnection.sessionAttempts else {
                throw StoreError(
                    .failed,
                    """
                    the Secret Service provider handed back \(unread == 1 ? "an item" : "\(unread) items") without \
                    \(unread == 1 ? "its secret" : "their secrets") in \(attempt) sessions while \(operation)
                    """,
                    hint: "try again; if it persists, restart the keyring daemon", namesProvider: true)
            }
            connection.renewSession()
            attempt += 1
        }
    }

    private func schema(_ name: String, attributes: Dictionary<String, String>.Keys) -> OpaquePointer {
        let names = attributes.sorted()
        let key = ([name] + names).joined(separator: "\u{0}")
        if let built = schemas[key] { return built }
        let built = makeSchema(name: name, attributes: names.map { ($0, SECRET_SCHEMA_ATTRIBUTE_STRING) })
        schemas[key] = built
        return built
    }
}

/// `Service.Unlock` on the default collection with no prompt, over the run's session bus. A
/// provider that answered with a prompt once is not asked again in the same run: each such call
/// leaves a prompt object behind, and the answer is the prompt path or "locked" either way.
private final class UnlockWithoutPrompt {
    private let sessionBus: () -> (any SessionBusConnection)?
    private var refused = false

    init(_ sessionBus: @escaping () -> (any SessionBusConnection)?) { self.sessionBus = sessionBus }

    /// True when the provider unlocked the collection with no prompt.
    func ask() throws(StoreError) -> Bool {
        guard !refused, let bus = sessionBus() else { return false }
        if try bus.unlockDefaultCollectionWithoutPrompt() { return true }
        refused = true
        return false
    }
}
