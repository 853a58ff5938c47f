import Basics

/// The attributes an item carries, or a search asks for: string names and values, as the
/// freedesktop Secret Service keeps them. The schema is one of them, `xdg:schema`.
public typealias ItemAttributes = [String: String]

/// An item a store holds: attributes (its schema among them), a label and a secret, with the
/// times and order the store keeps for it (docs/storage.md, "Items").
public struct StoredItem: Sendable, Equatable {
    /// The attribute that names an item's schema, as libsecret writes it.
    public static let schemaAttribute = "xdg:schema"

    public var attributes: ItemAttributes
    public var label: String
    public var secret: Secret
    /// Unix seconds; nil where the store does not say.
    public var created: Int64?
    public var modified: Int64?
    /// Higher is more recently stored. It orders items within one store; a store that keeps no
    /// sequence of its own leaves it 0 and orders its answers by what it has.
    public var sequence: Int64
    /// The store's name for the item (an object path, a position): set by the store on the items
    /// a search returns, ignored when an item is written.
    public var id: String

    public init(
        attributes: ItemAttributes, label: String, secret: Secret, created: Int64? = nil, modified: Int64? = nil,
        sequence: Int64 = 0, id: String = ""
    ) {
        self.attributes = attributes
        self.label = Self.storableLabel(label)
        self.secret = secret
        self.created = created
        self.modified = modified
        self.sequence = sequence
        self.id = id
    }

    public var schema: String { attributes[Self.schemaAttribute] ?? "" }

    /// The attribute under which a store that keeps nothing but attributes (the Secret Service)
    /// keeps `sequence`: a provider's own times are whole seconds, missing on some providers,
    /// and not moved by every change, so they cannot order items (docs/storage.md, "Items").
    public static let sequenceAttribute = "portal-token:sequence"

    /// The attributes KeePassXC adds to every item it exposes over the Secret Service (its
    /// entry's fields). portal-token's schemas never use these names: they are the provider's,
    /// never part of an item portal-token reads.
    public static let providerAddedAttributes: Set<String> = ["Title", "UserName", "URL", "Notes", "Uuid", "Path"]

    /// An item as a Secret Service provider holds it: `sequenceAttribute` is taken out of the
    /// attributes into `sequence`, and the attributes the provider added are left out. An item
    /// another program wrote has no sequence: its place is its provider's `Modified` (or
    /// `Created`) time in the same unit, nanoseconds of the wall clock, so it sorts among
    /// portal-token's own writes by when it was made, to the second (docs/storage.md, "Items").
    public init(
        storedAttributes: ItemAttributes, label: String, secret: Secret, created: Int64?, modified: Int64?, id: String
    ) {
        var attributes = storedAttributes.filter { !Self.providerAddedAttributes.contains($0.key) }
        let stored = attributes.removeValue(forKey: Self.sequenceAttribute).flatMap { Int64($0) }
        let sequence =
            stored ?? max(modified ?? 0, created ?? 0).multipliedReportingOverflow(by: 1_000_000_000).partialValue
        self.init(
            attributes: attributes, label: label, secret: secret, created: created, modified: modified,
            sequence: sequence, id: id)
        // As the provider holds it: another program's label is shown as it wrote it.
        self.label = label
    }

    /// The label an item is written with: every `/` becomes `∕` (U+2215 DIVISION SLASH), which
    /// reads the same. KWallet turns a `/` in a label into a folder, and the item's label then
    /// comes back without it; no lookup ever uses a label, so nothing depends on this but what a
    /// person sees in a keyring manager (docs/storage.md, "Items").
    public static func storableLabel(_ label: String) -> String {
        guard label.contains("/") else { return label }
        var storable = ""
        for character in label {
            if character == "/" { storable += labelSlash } else { storable.append(character) }
        }
        return storable
    }

    /// What stands for `/` in a label portal-token writes.
    public static let labelSlash = "\u{2215}"

    /// The order a store lists items in: newest first by sequence; the id only makes ties
    /// (items another program wrote within one second) come out the same way every time.
    public static func isListedBefore(_ first: StoredItem, _ second: StoredItem) -> Bool {
        (first.sequence, first.id) > (second.sequence, second.id)
    }

    /// Whether the item carries every attribute of `filter` with the same value.
    public func matches(_ filter: ItemAttributes) -> Bool {
        filter.allSatisfy { attributes[$0.key] == $0.value }
    }

    /// Whether the item matches any of `filters`.
    public func matches(any filters: [ItemAttributes]) -> Bool {
        filters.contains { matches($0) }
    }

    /// Whether this item was written after `other`, by their own times: modification time, then
    /// creation time. Items of one time are not newer than each other: a migration keeps what
    /// its destination holds then (docs/storage.md, "Migrating").
    public func isNewer(than other: StoredItem) -> Bool {
        let mine = (modified ?? created ?? 0, created ?? 0)
        let theirs = (other.modified ?? other.created ?? 0, other.created ?? 0)
        return mine > theirs
    }
}

/// The one storage port, on the model of oo7's `Keyring`: a store of attributed items. Git
/// credentials, Portal sessions and two-factor steps are codecs over it (`CredentialItems`,
/// `SessionItems`, `TwoFactorStepItems`), and every backend keeps the same items, so moving
/// between backends copies items (docs/storage.md).
///
/// A search takes a list of filters and answers the items that match any of them, so one call
/// can look in several schemas, each with its own attribute names. Every method fails with a
/// `StoreError`: a locked store is `.locked`, never "nothing found"; an item that vanishes
/// between a search and its read is simply not found. Every store passes the contract suite in
/// `Tests/PortalTokenTestSupport/ItemStoreContract.swift`.
public protocol ItemStore: AnyObject {
    /// The items matching any of `filters`, each once, newest first. A filter must name a schema.
    func search(_ filters: [ItemAttributes]) throws(StoreError) -> [StoredItem]
    /// Stores `item`, then removes every other item that matches any of `filters` and satisfies
    /// `isPrevious`: the new item is safe before the old ones go.
    ///
    /// Only if the newest item matching any of `filters` (nil when there is none) satisfies
    /// `condition` at the moment of the write: the check and the write are one step, so no other
    /// writer, of this host or another, changes what was checked in between. When the condition
    /// fails, nothing is written or removed and the answer is false. Each store makes the step
    /// atomic its own way (docs/storage.md, "Items").
    @discardableResult
    func replace(
        _ filters: [ItemAttributes], ifNewest condition: (StoredItem?) -> Bool,
        where isPrevious: (StoredItem) -> Bool, with item: StoredItem
    ) throws(StoreError) -> Bool
    /// Removes every item that matches any of `filters` and satisfies `isDoomed`; returns how
    /// many were removed.
    func delete(_ filters: [ItemAttributes], where isDoomed: (StoredItem) -> Bool) throws(StoreError) -> Int
    /// The newest item matching any of `filters`, when `id` named the newest one at an earlier
    /// read. A store that can read one item by its `id` more cheaply than it searches (the Vault
    /// store: one request instead of a listing and a read per key) reads that one again and
    /// answers with it when it is still there and still matches; otherwise, and in every other
    /// store, this is `search(filters).first`.
    func newest(_ filters: [ItemAttributes], lastSeen id: String) throws(StoreError) -> StoredItem?
}

extension ItemStore {
    public func newest(_ filters: [ItemAttributes], lastSeen id: String) throws(StoreError) -> StoredItem? {
        try search(filters).first
    }

    /// Replaces every item matching any of `filters` with `item`.
    public func replace(_ filters: [ItemAttributes], with item: StoredItem) throws(StoreError) {
        try replace(filters, where: { _ in true }, with: item)
    }

    /// Stores `item`, then removes every other item that matches any of `filters` and satisfies
    /// `isPrevious`, whatever is stored now.
    public func replace(
        _ filters: [ItemAttributes], where isPrevious: (StoredItem) -> Bool, with item: StoredItem
    ) throws(StoreError) {
        try replace(filters, ifNewest: { _ in true }, where: isPrevious, with: item)
    }

    /// Removes every item matching any of `filters`.
    @discardableResult
    public func delete(_ filters: [ItemAttributes]) throws(StoreError) -> Int {
        try delete(filters, where: { _ in true })
    }
}

/// An item store whose every write runs under the cross-process store lock
/// (docs/storage.md, "The store lock"): a write's search, create and removal of the previous
/// items happen while no other process writes, so parallel writes of one slot leave one item.
public final class LockedItemStore: ItemStore {
    public let store: any ItemStore
    public let lock: any SessionLock
    /// Told of every call with its outcome and duration, for `--verbose`: counts and kinds of
    /// failure only, never an attribute's value or a secret. `name` says which store it is.
    public let trace: ((String) -> Void)?
    public let name: String

    public init(_ store: any ItemStore, lock: any SessionLock, name: String = "", trace: ((String) -> Void)? = nil) {
        self.store = store
        self.lock = lock
        self.name = name
        self.trace = trace
    }

    public func search(_ filters: [ItemAttributes]) throws(StoreError) -> [StoredItem] {
        try traced("search") { () throws(StoreError) in
            let found = try store.search(filters)
            return (found, "\(found.count) item\(found.count == 1 ? "" : "s")")
        }
    }

    private func traced<Result>(
        _ operation: String, _ body: () throws(StoreError) -> (Result, String)
    ) throws(StoreError) -> Result {
        guard let trace else { return try body().0 }
        let start = MonotonicClock.microseconds()
        let elapsed = {
            let micro = MonotonicClock.microseconds() - start
            return "\(micro / 1000).\(micro % 1000 / 100) ms"
        }
        do {
            let (result, outcome) = try body()
            trace("\(name): \(operation): \(outcome) (\(elapsed()))")
            return result
        } catch {
            trace("\(name): \(operation) failed: \(error.kind) (\(elapsed()))")
            throw error
        }
    }

    @discardableResult
    public func replace(
        _ filters: [ItemAttributes], ifNewest condition: (StoredItem?) -> Bool,
        where isPrevious: (StoredItem) -> Bool, with item: StoredItem
    ) throws(StoreError) -> Bool {
        try traced("write") { () throws(StoreError) in
            let written = try lock.withStoreLock { () throws(StoreError) -> Bool in
                try store.replace(filters, ifNewest: condition, where: isPrevious, with: item)
            }
            return (written, written ? "written" : "not written (a newer item is there)")
        }
    }

    public func delete(_ filters: [ItemAttributes], where isDoomed: (StoredItem) -> Bool) throws(StoreError) -> Int {
        try traced("delete") { () throws(StoreError) in
            let deleted = try lock.withStoreLock { () throws(StoreError) in try store.delete(filters, where: isDoomed) }
            return (deleted, "\(deleted) item\(deleted == 1 ? "" : "s") removed")
        }
    }

    public func newest(_ filters: [ItemAttributes], lastSeen id: String) throws(StoreError) -> StoredItem? {
        try traced("read of the newest item") { () throws(StoreError) in
            let newest = try store.newest(filters, lastSeen: id)
            return (newest, newest == nil ? "none" : "found")
        }
    }
}

extension SessionLock {
    /// `withLock` for a body that throws only store errors; a failure of the lock itself is a
    /// store error too (exit 4).
    public func withStoreLock<Result>(_ body: () throws(StoreError) -> Result) throws(StoreError) -> Result {
        do {
            return try withLock { try body() }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.failed, "the store lock failed (\(type(of: error)))")
        }
    }
}

/// Why a store could not do what was asked. Every case means "retrying may work, and nothing
/// was deleted" (exit 4, docs/exit-codes.md), except one marked `outcomeUnknown`, whose message
/// says so. Messages name the store and the reason, never a stored value.
public struct StoreError: Error, Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// No session bus, no Secret Service provider, no usable file: another backend may serve.
        case unavailable
        /// The store exists but is locked; unlocking it is the user's move, not a switch.
        case locked
        /// The store did not answer within its bound.
        case timedOut
        /// Anything else the store reported.
        case failed
    }

    public var kind: Kind
    public var message: String
    public var hint: String?
    /// The store was asked to delete and did not answer in time, so the deletion may have
    /// happened (or may still happen): a keyring daemon that stalls after it received the
    /// request carries it out all the same. The message says so; never "nothing was deleted".
    public var outcomeUnknown: Bool
    /// The store's own program did what went wrong: the error names it (the Secret Service
    /// provider), as it does for a lock or a timeout.
    public var namesProvider: Bool

    /// The hint every "keyring is locked" error carries.
    public static let keyringLockedHint =
        "unlock it and try again: from a terminal with 'portal-token unlock', or in the desktop session"

    /// A search the Secret Service provider held until the bound while `keyring` (its name in
    /// the message) is locked: KeePassXC answers a search in a locked database only once a person
    /// unlocks it in its own dialog, so this is "locked", not a timeout. Both keyring reads use it.
    public static func lockedWhileSearchHeld(_ keyring: String, timeoutMilliseconds: Int) -> StoreError {
        StoreError(
            .locked,
            """
            \(keyring) is locked, and the Secret Service provider held the search for \(timeoutMilliseconds) ms \
            (it may be showing its own unlock dialog)
            """,
            hint: keyringLockedHint)
    }

    public init(
        _ kind: Kind, _ message: String, hint: String? = nil, outcomeUnknown: Bool = false, namesProvider: Bool = false
    ) {
        self.kind = kind
        self.message = message
        self.hint = hint
        self.outcomeUnknown = outcomeUnknown
        self.namesProvider = namesProvider
    }
}

/// How one keyring bound (`PORTAL_TOKEN_KEYRING_TIMEOUT_MS`) is shared when a search runs out of
/// time: the search waits the most of it, and whether the default collection is locked (a provider
/// that holds searches while it shows its own unlock dialog) is asked in the rest, so that a
/// provider that answers nothing costs a command one bound in all, on every read path.
public enum KeyringBound {
    /// What is kept for the lock check: a quarter of the bound, at most 750 ms (a provider that
    /// holds a search answers other calls at once).
    public static func lockCheckMilliseconds(of bound: Int) -> Int { max(1, min(bound / 4, 750)) }

    /// What a search may wait.
    public static func searchMilliseconds(of bound: Int) -> Int { max(1, bound - lockCheckMilliseconds(of: bound)) }
}
