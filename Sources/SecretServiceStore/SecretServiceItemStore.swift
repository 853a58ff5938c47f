import CLibSecret
import PortalTokenCore

/// The item-store port on the freedesktop Secret Service: items in the default collection, every
/// attribute a string, searched without matching the schema name (the `xdg:schema` attribute
/// selects it). Portal sessions and two-factor steps live here through their codecs
/// (`ItemSessionStore`, `ItemTwoFactorStepStore`), laid out as product contract §6 says.
public final class SecretServiceItemStore: ItemStore {
    private let connection: SecretServiceConnection
    /// Schemas built so far, by name: libsecret wants one per item created.
    private var schemas: [String: UnsafeMutablePointer<SecretSchema>] = [:]

    /// - Parameters:
    ///   - timeoutMilliseconds: the bound on each libsecret call.
    ///   - allowPrompt: whether the keyring may show an unlock prompt; true only when a person
    ///     is at a terminal.
    public init(timeoutMilliseconds: Int = 3000, allowPrompt: Bool) {
        connection = SecretServiceConnection(timeoutMilliseconds: timeoutMilliseconds, allowPrompt: allowPrompt)
    }

    public func search(schema: String, attributes: [String: String]) throws(StoreError) -> [StoredItem] {
        let found = try items(schema, attributes, loadSecrets: true, while: "reading \(Self.describe(schema))")
        var items: [StoredItem] = []
        for item in found {
            // Not loaded: locked (an error), or deleted since the search (gone).
            guard let secret = item.secret else {
                try connection.ensureItemIsGone(item)
                continue
            }
            var attributes = item.attributes
            attributes["xdg:schema"] = nil
            items.append(StoredItem(schema: schema, attributes: attributes, label: item.label, secret: secret))
        }
        // A locked collection finds nothing, exactly like one that holds nothing.
        if items.isEmpty { try connection.ensureDefaultCollectionIsNotLocked() }
        return items
    }

    public func replace(matching key: [String: String], with item: StoredItem) throws(StoreError) {
        let operation = "storing \(Self.describe(item.schema))"
        let collection = try connection.unlockedDefaultCollection()
        let previous = try items(item.schema, key, loadSecrets: false, while: operation)
        let created = try connection.create(
            in: collection, schema: schema(item.schema, attributes: item.attributes.keys),
            attributes: item.attributes.sorted { $0.key < $1.key }.map { ($0.key, $0.value) },
            label: item.label, secret: item.secret, while: operation)
        for old in previous where old.objectPath != created {
            try connection.delete(old, while: "replacing the previous \(Self.describe(item.schema))")
        }
    }

    @discardableResult
    public func delete(schema: String, attributes: [String: String]) throws(StoreError) -> Int {
        let operation = "removing \(Self.describe(schema))"
        let found = try items(schema, attributes, loadSecrets: false, while: operation)
        if found.contains(where: \.isLocked) { throw connection.lockedError() }
        for item in found { try connection.delete(item, while: operation) }
        return found.count
    }

    /// The schema's items that carry all of `attributes`, newest first.
    private func items(
        _ schema: String, _ attributes: [String: String], loadSecrets: Bool,
        while operation: String
    ) throws(StoreError) -> [FoundItem] {
        var query = attributes.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        query.append(("xdg:schema", schema))
        let found = try connection.search(query, loadSecrets: loadSecrets, while: operation)
        return found.items.filter { $0.schemaName == schema }.sorted { $0.order > $1.order }
    }

    private func schema(_ name: String, attributes: Dictionary<String, String>.Keys) -> UnsafeMutablePointer<
        SecretSchema
    > {
        if let built = schemas[name] { return built }
        let built = makeSchema(name: name, attributes: attributes.sorted().map { ($0, SECRET_SCHEMA_ATTRIBUTE_STRING) })
        schemas[name] = built
        return built
    }

    /// Words for messages: what kind of record a schema holds.
    private static func describe(_ schema: String) -> String {
        switch schema {
        case ItemSessionStore.schema: return "the Portal session"
        case ItemTwoFactorStepStore.schema: return "the two-factor step"
        default: return "an item of \(schema)"
        }
    }
}
