import CLibSecret
import Dispatch
import Glibc
import PortalTokenCore

/// git credentials in the freedesktop Secret Service, laid out exactly as git-credential-libsecret
/// lays them out (product contract §6), so that either helper reads what the other wrote.
///
/// Every libsecret call runs under a `GCancellable` that a timer cancels after the bound: a
/// stopped keyring daemon would otherwise keep libsecret waiting for 50 s, and an unanswered
/// prompt forever.
public final class SecretServiceStore: CredentialStore {
    /// git 2.45 and later store under this schema name.
    public static let schemaName = "org.git.Password"
    /// git 2.39 (Debian 12) stores under libsecret's compatibility schema.
    public static let legacySchemaName = "org.gnome.keyring.NetworkPassword"

    private let timeoutMilliseconds: Int
    private let allowPrompt: Bool
    private var service: UnsafeMutablePointer<SecretService>?

    /// - Parameters:
    ///   - timeoutMilliseconds: the bound on each libsecret call.
    ///   - allowPrompt: whether the keyring may show an unlock prompt; true only when a person
    ///     is at a terminal (stdin or stderr is a tty).
    public init(timeoutMilliseconds: Int = 3000, allowPrompt: Bool) {
        self.timeoutMilliseconds = timeoutMilliseconds
        self.allowPrompt = allowPrompt
        _ = silenceGLibLogs
    }

    deinit {
        if let service { g_object_unref(service) }
    }

    /// Connects to the session bus and the Secret Service within the bound, for `auto` to
    /// decide whether the keyring can serve (product contract §6). A missing bus or provider
    /// throws `.unavailable`, one that does not answer in time `.timedOut`.
    public func probe() throws(StoreError) {
        _ = try connect()
    }

    // MARK: CredentialStore

    public func lookup(_ query: CredentialQuery) throws(StoreError) -> [Credential] {
        let items = try search(query, loadSecrets: true, while: "looking up a credential")
        defer { g_list_free_full(items.list, g_object_unref) }
        var found: [(credential: Credential, order: ItemOrder)] = []
        for item in items.matches {
            guard let credential = item.credential else {
                // The item is there but its secret is not: a locked collection must never
                // read as "nothing stored".
                throw try lockedError(for: item.pointer)
            }
            if query.matches(credential) { found.append((credential, item.order)) }
        }
        if found.isEmpty, try defaultCollectionIsLocked() {
            throw StoreError(.locked, "keyring '\(try defaultCollectionLabel())' is locked", hint: lockedHint)
        }
        return found.sorted { $0.order > $1.order }.map(\.credential)
    }

    public func store(_ credential: Credential) throws(StoreError) {
        let collection = try defaultCollection()
        defer { g_object_unref(collection) }
        if secret_collection_get_locked(collection) != 0 {
            guard allowPrompt else {
                throw StoreError(.locked, "keyring '\(label(of: collection))' is locked", hint: lockedHint)
            }
            try unlock(collection)
        }
        // Items of the same slot, from either schema. gnome-keyring's own "replace" matches on a
        // subset of attributes and would overwrite a credential that has a port or path, so the
        // slot is matched here, exactly, and old items go only after the new one is safe.
        let slotQuery = CredentialQuery(protocolName: credential.protocolName, host: credential.host,
                                        path: credential.path, username: credential.username)
        let existing = try search(slotQuery, loadSecrets: false, while: "storing a credential")
        defer { g_list_free_full(existing.list, g_object_unref) }

        let packed = SecretPacking.pack(password: credential.password,
                                        passwordExpiresAt: credential.passwordExpiresAt,
                                        oauthRefreshToken: credential.oauthRefreshToken)
        let value = packed.withBytes { bytes in
            // secret_value_new copies the bytes; an empty password still needs a valid pointer.
            withUnsafeTemporaryAllocation(of: CChar.self, capacity: max(bytes.count, 1)) { buffer in
                for index in 0..<bytes.count { buffer[index] = CChar(bitPattern: bytes[index]) }
                let copy = secret_value_new(buffer.baseAddress!, gssize(bytes.count), "text/plain")!
                explicit_bzero(buffer.baseAddress!, buffer.count)
                return copy
            }
        }
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        let attributes = makeAttributeTable(Self.attributes(of: credential))
        defer { g_hash_table_unref(attributes) }
        let created = try bounded("storing a credential") { cancellable, error in
            secret_item_create_sync(collection, Self.schema, attributes, credential.keyringLabel, value,
                                    SECRET_ITEM_CREATE_NONE, cancellable, &error)
        }
        guard let created else { throw StoreError(.failed, "the Secret Service did not create the item") }
        defer { g_object_unref(created) }
        let createdPath = objectPath(of: created)
        for item in existing.matches where item.isExactSlot(of: credential) && item.order.path != createdPath {
            try delete(item.pointer, while: "replacing the previous credential")
        }
    }

    @discardableResult
    public func erase(_ query: CredentialQuery) throws(StoreError) -> Int {
        let items = try search(query, loadSecrets: query.password != nil, while: "erasing a credential")
        defer { g_list_free_full(items.list, g_object_unref) }
        var doomed: [UnsafeMutablePointer<SecretItem>] = []
        for item in items.matches {
            if query.password == nil {
                if secret_item_get_locked(item.pointer) != 0 { throw try lockedError(for: item.pointer) }
                if query.matches(item.credentialWithoutSecret) { doomed.append(item.pointer) }
            } else {
                guard let credential = item.credential else { throw try lockedError(for: item.pointer) }
                if query.matches(credential) { doomed.append(item.pointer) }
            }
        }
        for item in doomed { try delete(item, while: "erasing a credential") }
        return doomed.count
    }

    // MARK: Schema and attributes

    /// `org.git.Password`, matched without its name so that items of git 2.39's schema are found.
    nonisolated(unsafe) private static let schema: UnsafeMutablePointer<SecretSchema> = {
        let types = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, nil)!
        for name in ["user", "object", "protocol", "server"] {
            g_hash_table_insert(types, g_strdup(name), nil)
        }
        g_hash_table_insert(types, g_strdup("port"),
                            UnsafeMutableRawPointer(bitPattern: Int(SECRET_SCHEMA_ATTRIBUTE_INTEGER.rawValue)))
        let schema = secret_schema_newv(schemaName, SECRET_SCHEMA_DONT_MATCH_NAME, types)!
        g_hash_table_unref(types)
        return schema
    }()

    static func attributes(of query: CredentialQuery) -> [(String, String)] {
        var attributes: [(String, String)] = []
        if let username = query.username { attributes.append(("user", username)) }
        if let protocolName = query.protocolName { attributes.append(("protocol", protocolName)) }
        if let host = query.host {
            attributes.append(("server", host.server))
            if let port = host.port { attributes.append(("port", String(port))) }
        }
        if let path = query.path { attributes.append(("object", path)) }
        return attributes
    }

    static func attributes(of credential: Credential) -> [(String, String)] {
        attributes(of: CredentialQuery(protocolName: credential.protocolName, host: credential.host,
                                       path: credential.path, username: credential.username))
    }

    // MARK: libsecret calls

    private struct SearchResult {
        var list: UnsafeMutablePointer<GList>?
        var matches: [FoundItem]
    }

    private func search(_ query: CredentialQuery, loadSecrets: Bool, while operation: String) throws(StoreError) -> SearchResult {
        let service = try connect()
        let attributes = makeAttributeTable(Self.attributes(of: query))
        defer { g_hash_table_unref(attributes) }
        var flags = SECRET_SEARCH_ALL.rawValue
        if loadSecrets { flags |= SECRET_SEARCH_LOAD_SECRETS.rawValue }
        if allowPrompt { flags |= SECRET_SEARCH_UNLOCK.rawValue }
        let list = try bounded(operation) { cancellable, error in
            secret_service_search_sync(service, nil, attributes, SecretSearchFlags(flags), cancellable, &error)
        }
        var matches: [FoundItem] = []
        var node = list
        while let current = node {
            if let data = current.pointee.data {
                let item = FoundItem(data.assumingMemoryBound(to: SecretItem.self))
                if item.isGitCredential { matches.append(item) }
            }
            node = current.pointee.next
        }
        return SearchResult(list: list, matches: matches)
    }

    private func connect() throws(StoreError) -> UnsafeMutablePointer<SecretService> {
        if let service { return service }
        // Ask for the bus first, so that "no bus" and "no keyring on the bus" read differently.
        let bus = try bounded("connecting to the D-Bus session bus", classify: { error in
            let message = String(cString: error.pointee.message)
            g_error_free(error)
            return StoreError(.unavailable, "no D-Bus session bus (\(message))",
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

    private func defaultCollection() throws(StoreError) -> UnsafeMutablePointer<SecretCollection> {
        let service = try connect()
        let collection = try bounded("opening the default keyring") { cancellable, error in
            secret_collection_for_alias_sync(service, "default", SECRET_COLLECTION_NONE, cancellable, &error)
        }
        guard let collection else {
            throw StoreError(.unavailable, "the Secret Service has no default keyring",
                             hint: "create one with Passwords and Keys (seahorse), or use --backend file")
        }
        return collection
    }

    private func defaultCollectionIsLocked() throws(StoreError) -> Bool {
        let service = try connect()
        let collection = try bounded("checking whether the keyring is locked") { cancellable, error in
            secret_collection_for_alias_sync(service, "default", SECRET_COLLECTION_NONE, cancellable, &error)
        }
        guard let collection else { return false }
        defer { g_object_unref(collection) }
        return secret_collection_get_locked(collection) != 0
    }

    private func defaultCollectionLabel() throws(StoreError) -> String {
        let collection = try defaultCollection()
        defer { g_object_unref(collection) }
        return label(of: collection)
    }

    private func label(of collection: UnsafeMutablePointer<SecretCollection>) -> String {
        guard let label = secret_collection_get_label(collection) else { return "default" }
        defer { g_free(label) }
        return String(cString: label)
    }

    private func lockedError(for item: UnsafeMutablePointer<SecretItem>) throws(StoreError) -> StoreError {
        StoreError(.locked, "keyring '\(try defaultCollectionLabel())' is locked", hint: lockedHint)
    }

    private func unlock(_ collection: UnsafeMutablePointer<SecretCollection>) throws(StoreError) {
        let service = try connect()
        let objects = g_list_append(nil, collection)
        defer { g_list_free(objects) }
        let unlocked = try bounded("unlocking the keyring") { cancellable, error in
            secret_service_unlock_sync(service, objects, cancellable, nil, &error)
        }
        if unlocked == 0 {
            throw StoreError(.locked, "keyring '\(label(of: collection))' is still locked", hint: lockedHint)
        }
    }

    private func delete(_ item: UnsafeMutablePointer<SecretItem>, while operation: String) throws(StoreError) {
        _ = try bounded(operation) { cancellable, error in
            secret_item_delete_sync(item, cancellable, &error)
        }
    }

    /// Runs one libsecret call with a GCancellable that a timer cancels at the bound.
    private func bounded<T>(
        _ operation: String,
        classify: ((UnsafeMutablePointer<GError>) -> StoreError)? = nil,
        _ body: (UnsafeMutablePointer<GCancellable>, inout UnsafeMutablePointer<GError>?) -> T
    ) throws(StoreError) -> T {
        let cancellable = g_cancellable_new()!
        defer { g_object_unref(cancellable) }
        let handle = CancellableHandle(pointer: cancellable)
        let timer = DispatchWorkItem { g_cancellable_cancel(handle.pointer) }
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(timeoutMilliseconds), execute: timer)
        var error: UnsafeMutablePointer<GError>?
        let result = body(cancellable, &error)
        timer.cancel()
        if let error {
            if let classify, g_error_matches(error, g_io_error_quark(), gint(G_IO_ERROR_CANCELLED.rawValue)) == 0 {
                throw classify(error)
            }
            throw storeError(from: error, while: operation, timeoutMilliseconds: timeoutMilliseconds)
        }
        return result
    }
}

private func objectPath(of item: UnsafeMutablePointer<SecretItem>) -> String {
    let proxy = UnsafeMutableRawPointer(item).assumingMemoryBound(to: GDBusProxy.self)
    guard let path = g_dbus_proxy_get_object_path(proxy) else { return "" }
    return String(cString: path)
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

/// One item a search returned, read into the protocol's terms.
private struct FoundItem {
    let pointer: UnsafeMutablePointer<SecretItem>
    let attributes: [String: String]

    init(_ pointer: UnsafeMutablePointer<SecretItem>) {
        self.pointer = pointer
        var attributes: [String: String] = [:]
        if let table = secret_item_get_attributes(pointer) {
            for name in ["xdg:schema", "user", "object", "protocol", "server", "port"] {
                if let value = attribute(table, name) { attributes[name] = value }
            }
            g_hash_table_unref(table)
        }
        self.attributes = attributes
    }

    /// Only items that git's helpers (or portal-token) wrote: other applications' items that
    /// happen to share an attribute name are never returned or erased.
    var isGitCredential: Bool {
        guard let schema = attributes["xdg:schema"] else { return false }
        return (schema == SecretServiceStore.schemaName || schema == SecretServiceStore.legacySchemaName)
            && attributes["protocol"] != nil
    }

    var order: ItemOrder {
        ItemOrder(modified: secret_item_get_modified(pointer), created: secret_item_get_created(pointer),
                  path: objectPath(of: pointer))
    }

    private var host: CredentialHost? {
        guard let server = attributes["server"] else { return nil }
        return CredentialHost(server: server, port: attributes["port"].flatMap { Int($0) }.flatMap { $0 == 0 ? nil : $0 })
    }

    /// The credential with its packed secret unpacked, or nil when the secret was not loaded
    /// (the item is locked).
    var credential: Credential? {
        guard let value = secret_item_get_secret(pointer) else { return nil }
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        var length = 0
        let bytes = secret_value_get(value, &length)
        let packed = Secret(bytes: Array(UnsafeRawBufferPointer(start: bytes, count: length)))
        let unpacked = SecretPacking.unpack(packed)
        var credential = credentialWithoutSecret
        credential.password = unpacked.password
        credential.passwordExpiresAt = unpacked.passwordExpiresAt
        credential.oauthRefreshToken = unpacked.oauthRefreshToken
        return credential
    }

    var credentialWithoutSecret: Credential {
        Credential(protocolName: attributes["protocol"] ?? "", host: host, path: attributes["object"],
                   username: attributes["user"] ?? "", password: Secret(""))
    }

    /// Whether this item holds exactly the slot of `credential`, with no extra attribute.
    func isExactSlot(of credential: Credential) -> Bool {
        let slot = Dictionary(uniqueKeysWithValues: SecretServiceStore.attributes(of: credential))
        var mine = attributes
        mine["xdg:schema"] = nil
        return mine == slot
    }
}
