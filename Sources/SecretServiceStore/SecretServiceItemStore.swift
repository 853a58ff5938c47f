import CLibSecret
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

    /// - Parameters:
    ///   - timeoutMilliseconds: the bound on each libsecret call.
    ///   - promptPermission: whether the keyring may show an unlock prompt (allowed only when a
    ///     person is at a terminal and no setting rules prompts out); asked once, and only when
    ///     something is found locked.
    public init(timeoutMilliseconds: Int = 3000, promptPermission: @escaping () -> PromptPermission) {
        connection = SecretServiceConnection(
            timeoutMilliseconds: timeoutMilliseconds, promptPermission: promptPermission)
    }

    /// A store that may prompt (`allowPrompt`) or never does.
    public convenience init(timeoutMilliseconds: Int = 3000, allowPrompt: Bool) {
        self.init(timeoutMilliseconds: timeoutMilliseconds) { allowPrompt ? .allowed : .noTerminal }
    }

    public func search(_ filters: [ItemAttributes]) throws(StoreError) -> [StoredItem] {
        let items = try loaded(filters, while: "reading the keyring")
        // A locked collection finds nothing, exactly like one that holds nothing.
        if items.isEmpty { try connection.ensureDefaultCollectionIsNotLocked() }
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
        let collection = try connection.unlockedDefaultCollection()
        let matching = try loaded(filters, while: operation)
        guard condition(matching.first?.item) else { return false }
        let previous = matching.filter { isPrevious($0.item) }
        var attributes = ProviderSemantics.ownAttributes(item.attributes)
        attributes[StoredItem.schemaAttribute] = nil
        attributes[ProviderSemantics.sequenceAttribute] = String(
            ProviderSemantics.nextSequence(after: matching.map(\.item.sequence)))
        let created = try connection.create(
            in: collection, schema: schema(item.schema, attributes: attributes.keys),
            attributes: attributes.sorted { $0.key < $1.key }.map { ($0.key, $0.value) },
            label: item.label, secret: item.secret, while: operation)
        for old in previous where old.found.objectPath != created {
            try connection.delete(old.found, while: "replacing an item in the keyring")
        }
        return true
    }

    public func delete(_ filters: [ItemAttributes], where isDoomed: (StoredItem) -> Bool) throws(StoreError) -> Int {
        let operation = "deleting from the keyring"
        let doomed = try loaded(filters, while: operation).filter { isDoomed($0.item) }
        for item in doomed { try connection.delete(item.found, while: operation) }
        return doomed.count
    }

    /// The items matching any filter, each once, newest first, with their secrets. An item whose
    /// secret did not load is locked (an error) or was deleted since the search (left out).
    private typealias Loaded = (found: FoundItem, item: StoredItem)
    private func loaded(_ filters: [ItemAttributes], while operation: String) throws(StoreError) -> [Loaded] {
        var found: [String: FoundItem] = [:]
        for filter in filters {
            let query = filter.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
            // The provider's own matching is not trusted to be a subset match: an item that does
            // not carry every attribute of the filter is not an answer (docs/storage.md, "Providers").
            for item in try connection.search(query, loadSecrets: true, while: operation).items
            where ProviderSemantics.matches(item.attributes, filter) {
                found[item.objectPath] = item
            }
        }
        var items: [Loaded] = []
        for item in found.values {
            guard let secret = item.secret else {
                try connection.ensureItemIsGone(item)
                continue
            }
            let (created, modified) = item.times
            let stored = StoredItem(
                attributes: ProviderSemantics.ownAttributes(item.attributes), label: item.label, secret: secret,
                created: Int64(created), modified: Int64(modified),
                sequence: ProviderSemantics.sequence(of: item.attributes, modified: modified, created: created),
                id: item.objectPath)
            items.append((item, stored))
        }
        // Newest first by the order of writes; the object path only makes ties (items another
        // program wrote within one second) come out the same way each time.
        return items.sorted { ($0.item.sequence, $0.item.id) > ($1.item.sequence, $1.item.id) }
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
