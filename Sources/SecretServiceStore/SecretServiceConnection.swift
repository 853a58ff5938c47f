import CLibSecret
import Glibc
import PortalTokenCore

/// One process's use of the Secret Service: the connection, and every libsecret call bounded by
/// a timer. The stores for git credentials and Portal sessions both go through it.
///
/// Every call runs under a `GCancellable` that a timer cancels after the bound: a stopped keyring
/// daemon would otherwise keep libsecret waiting for 50 s, and an unanswered prompt forever.
final class SecretServiceConnection {
    let timeoutMilliseconds: Int
    /// Whether the keyring may show an unlock prompt: only when a person is at a terminal.
    let allowPrompt: Bool
    private var service: UnsafeMutablePointer<SecretService>?

    init(timeoutMilliseconds: Int, allowPrompt: Bool) {
        self.timeoutMilliseconds = timeoutMilliseconds
        self.allowPrompt = allowPrompt
        _ = silenceGLibLogs
    }

    deinit {
        if let service { g_object_unref(service) }
    }

    func connect() throws(StoreError) -> UnsafeMutablePointer<SecretService> {
        if let service { return service }
        // Ask for the bus first, so that "no bus" and "no keyring on the bus" read differently.
        let bus = try bounded("connecting to the D-Bus session bus", classify: { error in
            let message = String(cString: error.pointee.message)
            g_error_free(error)
            return StoreError(.unavailable, "no D-Bus session bus: \(message)",
                              hint: "run inside a desktop session or dbus-run-session, or use --backend file")
        }) { cancellable, error in
            g_bus_get_sync(G_BUS_TYPE_SESSION, cancellable, &error)
        }
        if let bus { g_object_unref(UnsafeMutableRawPointer(bus)) }
        let service = try bounded("connecting to the Secret Service") { cancellable, error in
            secret_service_get_sync(SECRET_SERVICE_NONE, cancellable, &error)
        }
        guard let service else { throw StoreError(.unavailable, "the Secret Service could not be reached") }
        self.service = service
        return service
    }

    /// Connects, then asks the provider itself to answer (a D-Bus `Peer.Ping`, which starts an
    /// activatable keyring as any call would). libsecret connects happily to a bus with no
    /// provider on it, so only an answer shows the keyring can serve: no provider throws
    /// `.unavailable`, one that does not answer in time `.timedOut`.
    func ping() throws(StoreError) {
        let service = try connect()
        let proxy = UnsafeMutableRawPointer(service).assumingMemoryBound(to: GDBusProxy.self)
        guard let bus = g_dbus_proxy_get_connection(proxy) else {
            throw StoreError(.unavailable, "the Secret Service could not be reached")
        }
        let reply = try bounded("asking the Secret Service to answer") { cancellable, error in
            g_dbus_connection_call_sync(bus, "org.freedesktop.secrets", "/org/freedesktop/secrets",
                                        "org.freedesktop.DBus.Peer", "Ping", nil, nil, G_DBUS_CALL_FLAGS_NONE,
                                        gint(timeoutMilliseconds), cancellable, &error)
        }
        if let reply { g_variant_unref(reply) }
    }

    /// Items whose attributes include all of `attributes`, of any schema; locked items are
    /// returned too, without their secrets.
    func search(_ attributes: [(String, String)], loadSecrets: Bool, while operation: String) throws(StoreError) -> ItemList {
        let service = try connect()
        let table = makeAttributeTable(attributes)
        defer { g_hash_table_unref(table) }
        var flags = SECRET_SEARCH_ALL.rawValue
        if loadSecrets { flags |= SECRET_SEARCH_LOAD_SECRETS.rawValue }
        if allowPrompt { flags |= SECRET_SEARCH_UNLOCK.rawValue }
        let list = try bounded(operation) { cancellable, error in
            secret_service_search_sync(service, nil, table, SecretSearchFlags(flags), cancellable, &error)
        }
        return ItemList(list)
    }

    /// The default collection, unlocked: with a prompt when a person is at a terminal, else an
    /// error naming the lock.
    func unlockedDefaultCollection() throws(StoreError) -> CollectionReference {
        let collection = try defaultCollection()
        guard collection.isLocked else { return collection }
        guard allowPrompt else { throw StoreError(.locked, "keyring '\(collection.label)' is locked", hint: lockedHint) }
        let service = try connect()
        let objects = g_list_append(nil, collection.pointer)
        defer { g_list_free(objects) }
        let unlocked = try bounded("unlocking the keyring") { cancellable, error in
            secret_service_unlock_sync(service, objects, cancellable, nil, &error)
        }
        if unlocked == 0 {
            throw StoreError(.locked, "keyring '\(collection.label)' is still locked", hint: lockedHint)
        }
        return collection
    }

    func defaultCollection() throws(StoreError) -> CollectionReference {
        guard let collection = try defaultCollectionIfAny() else {
            throw StoreError(.unavailable, "the Secret Service has no default keyring",
                             hint: "create one with Passwords and Keys (seahorse), or use --backend file")
        }
        return collection
    }

    private func defaultCollectionIfAny() throws(StoreError) -> CollectionReference? {
        let service = try connect()
        let collection = try bounded("opening the default keyring") { cancellable, error in
            secret_collection_for_alias_sync(service, "default", SECRET_COLLECTION_NONE, cancellable, &error)
        }
        return collection.map(CollectionReference.init)
    }

    /// Throws when the default collection is locked. Called on a miss only: a lookup in a locked
    /// collection finds nothing, exactly like one that has nothing, and must not read as such.
    func ensureDefaultCollectionIsNotLocked() throws(StoreError) {
        if let collection = try defaultCollectionIfAny(), collection.isLocked {
            throw StoreError(.locked, "keyring '\(collection.label)' is locked", hint: lockedHint)
        }
    }

    /// The error for an item found locked.
    func lockedError() -> StoreError {
        let label = (try? defaultCollection().label) ?? "default"
        return StoreError(.locked, "keyring '\(label)' is locked", hint: lockedHint)
    }

    /// Creates an item (never replacing one) and returns its object path.
    func create(in collection: CollectionReference, schema: UnsafeMutablePointer<SecretSchema>,
                attributes: [(String, String)], label: String, secret: Secret, while operation: String) throws(StoreError) -> String {
        let value = secret.withBytes { bytes in
            // secret_value_new copies the bytes; an empty secret still needs a valid pointer.
            withUnsafeTemporaryAllocation(of: CChar.self, capacity: max(bytes.count, 1)) { buffer in
                for index in 0..<bytes.count { buffer[index] = CChar(bitPattern: bytes[index]) }
                let copy = secret_value_new(buffer.baseAddress!, gssize(bytes.count), "text/plain")!
                explicit_bzero(buffer.baseAddress!, buffer.count)
                return copy
            }
        }
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        let table = makeAttributeTable(attributes)
        defer { g_hash_table_unref(table) }
        let created = try bounded(operation) { cancellable, error in
            secret_item_create_sync(collection.pointer, schema, table, label, value, SECRET_ITEM_CREATE_NONE, cancellable, &error)
        }
        guard let created else { throw StoreError(.failed, "the Secret Service did not create the item") }
        defer { g_object_unref(created) }
        return FoundItem(created).objectPath
    }

    func delete(_ item: FoundItem, while operation: String) throws(StoreError) {
        _ = try bounded(operation) { cancellable, error in
            secret_item_delete_sync(item.pointer, cancellable, &error)
        }
    }

    /// Runs one libsecret call with a GCancellable that a timer cancels at the bound.
    func bounded<T>(
        _ operation: String,
        classify: ((UnsafeMutablePointer<GError>) -> StoreError)? = nil,
        _ body: (UnsafeMutablePointer<GCancellable>, inout UnsafeMutablePointer<GError>?) -> T
    ) throws(StoreError) -> T {
        let cancellable = g_cancellable_new()!
        defer { g_object_unref(cancellable) }
        let timer = CancellationTimer(cancelling: cancellable, afterMilliseconds: timeoutMilliseconds)
        var error: UnsafeMutablePointer<GError>?
        let result = body(cancellable, &error)
        timer.stop()
        if let error {
            if let classify, g_error_matches(error, g_io_error_quark(), gint(G_IO_ERROR_CANCELLED.rawValue)) == 0 {
                throw classify(error)
            }
            throw storeError(from: error, while: operation, timeoutMilliseconds: timeoutMilliseconds)
        }
        return result
    }
}

/// A schema matched without its name, so lookups find items that other helpers wrote under
/// older names; built once per process.
func makeSchema(name: String, attributes: [(String, SecretSchemaAttributeType)]) -> UnsafeMutablePointer<SecretSchema> {
    let types = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, nil)!
    for (attribute, type) in attributes {
        g_hash_table_insert(types, g_strdup(attribute), UnsafeMutableRawPointer(bitPattern: Int(type.rawValue)))
    }
    let schema = secret_schema_newv(name, SECRET_SCHEMA_DONT_MATCH_NAME, types)!
    g_hash_table_unref(types)
    return schema
}

/// A search's result list, freed with the items when the last reference goes.
final class ItemList {
    private let list: UnsafeMutablePointer<GList>?
    let items: [FoundItem]

    init(_ list: UnsafeMutablePointer<GList>?) {
        self.list = list
        var items: [FoundItem] = []
        var node = list
        while let current = node {
            if let data = current.pointee.data { items.append(FoundItem(data.assumingMemoryBound(to: SecretItem.self))) }
            node = current.pointee.next
        }
        self.items = items
    }

    deinit { g_list_free_full(list, g_object_unref) }
}

/// A collection, released when the last reference goes.
final class CollectionReference {
    let pointer: UnsafeMutablePointer<SecretCollection>

    init(_ pointer: UnsafeMutablePointer<SecretCollection>) { self.pointer = pointer }
    deinit { g_object_unref(pointer) }

    var isLocked: Bool { secret_collection_get_locked(pointer) != 0 }

    var label: String {
        guard let label = secret_collection_get_label(pointer) else { return "default" }
        defer { g_free(label) }
        return String(cString: label)
    }
}

/// One item a search returned. Valid while its ItemList lives.
struct FoundItem {
    let pointer: UnsafeMutablePointer<SecretItem>
    let attributes: [String: String]

    init(_ pointer: UnsafeMutablePointer<SecretItem>) {
        self.pointer = pointer
        var attributes: [String: String] = [:]
        if let table = secret_item_get_attributes(pointer) {
            var iterator = GHashTableIter()
            g_hash_table_iter_init(&iterator, table)
            var key: gpointer?
            var value: gpointer?
            while g_hash_table_iter_next(&iterator, &key, &value) != 0 {
                if let key, let value {
                    attributes[String(cString: key.assumingMemoryBound(to: CChar.self))] =
                        String(cString: value.assumingMemoryBound(to: CChar.self))
                }
            }
            g_hash_table_unref(table)
        }
        self.attributes = attributes
    }

    var schemaName: String? { attributes["xdg:schema"] }
    var isLocked: Bool { secret_item_get_locked(pointer) != 0 }

    var objectPath: String {
        let proxy = UnsafeMutableRawPointer(pointer).assumingMemoryBound(to: GDBusProxy.self)
        guard let path = g_dbus_proxy_get_object_path(proxy) else { return "" }
        return String(cString: path)
    }

    var order: ItemOrder {
        ItemOrder(modified: secret_item_get_modified(pointer), created: secret_item_get_created(pointer), path: objectPath)
    }

    /// The secret, or nil when it was not loaded (the item is locked).
    var secret: Secret? {
        guard let value = secret_item_get_secret(pointer) else { return nil }
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        var length = 0
        let bytes = secret_value_get(value, &length)
        return Secret(bytes: Array(UnsafeRawBufferPointer(start: bytes, count: length)))
    }
}

/// Recency of an item: modification time, then creation time (both in whole seconds, as the
/// Secret Service keeps them), then the item's object path, which gnome-keyring numbers in order
/// of creation. Together they make "the most recently stored" deterministic.
struct ItemOrder: Comparable {
    var modified: UInt
    var created: UInt
    var path: String

    static func < (lhs: ItemOrder, rhs: ItemOrder) -> Bool {
        if lhs.modified != rhs.modified { return lhs.modified < rhs.modified }
        if lhs.created != rhs.created { return lhs.created < rhs.created }
        if lhs.path.utf8.count != rhs.path.utf8.count { return lhs.path.utf8.count < rhs.path.utf8.count }
        return lhs.path < rhs.path
    }
}
