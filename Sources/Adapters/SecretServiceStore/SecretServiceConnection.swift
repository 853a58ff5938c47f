import CLibSecret
import Glibc
import PortalTokenCore

/// One process's use of the Secret Service: the connection, and every libsecret call bounded by
/// a timer. The stores for git credentials and Portal sessions both go through it.
///
/// Every call runs under a `GCancellable` that a timer cancels after the bound: a stopped keyring
/// daemon would otherwise keep libsecret waiting for 50 s, and an unanswered prompt forever.
///
/// libsecret is loaded by the first `connect`, which every operation starts with; building a
/// connection loads nothing.
final class SecretServiceConnection {
    let timeoutMilliseconds: Int
    /// Whether the keyring may show an unlock prompt: only when a person is at a terminal and no
    /// setting rules prompts out. Asked only once something is found locked, so an unlocked
    /// keyring never pays for the question.
    private let askPromptPermission: () -> PromptPermission
    private var decidedPromptPermission: PromptPermission?
    private var service: OpaquePointer?

    /// Asks the provider to unlock the default collection with no prompt: true when it did.
    private let unlockWithoutPrompt: () throws(StoreError) -> Bool

    init(
        timeoutMilliseconds: Int, promptPermission: @escaping () -> PromptPermission,
        unlockWithoutPrompt: @escaping () throws(StoreError) -> Bool = { false }
    ) {
        self.unlockWithoutPrompt = unlockWithoutPrompt
        self.timeoutMilliseconds = timeoutMilliseconds
        askPromptPermission = promptPermission
    }

    var promptPermission: PromptPermission {
        if let decidedPromptPermission { return decidedPromptPermission }
        let permission = askPromptPermission()
        decidedPromptPermission = permission
        return permission
    }

    deinit {
        if let service { LibSecret.functions.objectUnref(service) }
    }

    func connect() throws(StoreError) -> OpaquePointer {
        if let service { return service }
        // Where GLib would find no session bus at all, say so before loading libsecret: with
        // `--backend secret-service` on a server or in a container, the error comes at once.
        if !Self.sessionBusMayExist() {
            throw StoreError(
                .unavailable,
                """
                no D-Bus session bus: DBUS_SESSION_BUS_ADDRESS is unset, $XDG_RUNTIME_DIR/bus does not exist and \
                there is no X11 display to autolaunch one
                """,
                hint: "run inside a desktop session or dbus-run-session, or use --backend file")
        }
        let lib = try LibSecret.load()
        // Ask for the bus first, so that "no bus" and "no keyring on the bus" read differently.
        let bus = try bounded(
            "connecting to the D-Bus session bus",
            classify: { error in
                let message = String(cString: error.pointee.message)
                lib.errorFree(error)
                return StoreError(
                    .unavailable, "no D-Bus session bus: \(message)",
                    hint: "run inside a desktop session or dbus-run-session, or use --backend file")
            }
        ) { cancellable, error in
            lib.busGetSync(G_BUS_TYPE_SESSION, cancellable, &error)
        }
        if let bus { lib.objectUnref(bus) }
        let service = try bounded("connecting to the Secret Service") { cancellable, error in
            lib.serviceGetSync(SECRET_SERVICE_NONE, cancellable, &error)
        }
        guard let service else { throw StoreError(.unavailable, "the Secret Service could not be reached") }
        self.service = service
        return service
    }

    /// Opens a new session with the provider for what follows: the shared service object, whose
    /// session the last call used, is dropped, and the next call connects anew. Items and
    /// collections found before keep the old session, so they are looked up again afterwards.
    /// For a session whose secrets did not decode (docs/storage.md, "Providers").
    func renewSession() {
        guard let service else { return }
        let lib = LibSecret.functions
        lib.objectUnref(service)
        self.service = nil
        lib.serviceDisconnect()
        renewals += 1
    }

    /// How many times `renewSession` has dropped the session: a collection found before the
    /// last renewal is looked up again.
    private(set) var renewals = 0

    /// How many sessions one read or write tries before it gives up on a provider whose
    /// encrypted sessions fail: each new session fails alone, so a second almost always works.
    static let sessionAttempts = 3

    /// Whether GLib could find a session bus (gio's g_dbus_address_get_for_bus_sync): an address
    /// in DBUS_SESSION_BUS_ADDRESS, the socket `$XDG_RUNTIME_DIR/bus`, or an X11 display through
    /// which dbus-launch can autolaunch one. When this says no, connecting cannot succeed.
    static func sessionBusMayExist() -> Bool {
        if let address = getenv("DBUS_SESSION_BUS_ADDRESS"), address.pointee != 0 { return true }
        if let runtime = getenv("XDG_RUNTIME_DIR"), runtime.pointee != 0 {
            var status = stat()
            if stat(String(cString: runtime) + "/bus", &status) == 0 { return true }
        }
        if let display = getenv("DISPLAY"), display.pointee != 0 { return true }
        return false
    }

    /// Connects, then asks the provider itself to answer (a D-Bus `Peer.Ping`, which starts an
    /// activatable keyring as any call would). libsecret connects happily to a bus with no
    /// provider on it, so only an answer shows the keyring can serve: no provider throws
    /// `.unavailable`, one that does not answer in time `.timedOut`.
    func ping() throws(StoreError) {
        let service = try connect()
        let lib = LibSecret.functions
        // The service is a GDBusProxy.
        guard let bus = lib.dbusProxyGetConnection(service) else {
            throw StoreError(.unavailable, "the Secret Service could not be reached")
        }
        let reply = try bounded("asking the Secret Service to answer") { cancellable, error in
            lib.dbusConnectionCallSync(
                bus, busName: "org.freedesktop.secrets", objectPath: "/org/freedesktop/secrets",
                interfaceName: "org.freedesktop.DBus.Peer", methodName: "Ping",
                flags: G_DBUS_CALL_FLAGS_NONE, timeoutMilliseconds: gint(timeoutMilliseconds),
                cancellable, &error)
        }
        if let reply { lib.variantUnref(reply) }
    }

    /// Items whose attributes include all of `attributes`, of any schema; locked items are
    /// returned too, without their secrets. When some are locked and a prompt is allowed, the
    /// search is asked again with the unlock prompt.
    func search(_ attributes: [(String, String)], loadSecrets: Bool, while operation: String) throws(StoreError)
        -> ItemList
    {
        let found: ItemList
        do {
            found = try search(
                attributes, loadSecrets: loadSecrets, unlocking: false,
                withinMilliseconds: KeyringBound.searchMilliseconds(of: timeoutMilliseconds), while: operation)
        } catch  where error.kind == .timedOut {
            throw lockedInsteadOfTimeout(error)
        }
        guard found.items.contains(where: \.isLocked) else { return found }
        if try unlockWithoutPrompt() {
            return try search(attributes, loadSecrets: loadSecrets, unlocking: false, while: operation)
        }
        guard promptPermission.isAllowed else { return found }
        return try search(attributes, loadSecrets: loadSecrets, unlocking: true, while: operation)
    }

    /// A search that ran out of time on a locked collection is "locked": KeePassXC (with "Unlock
    /// before search", its default) answers a search in a locked database only once a person
    /// unlocks it in the dialog it shows (docs/storage.md, "Providers"). The provider still
    /// answers other calls meanwhile, so whether the default collection is locked is asked
    /// within the rest of the bound (`KeyringBound`); when it is not, the timeout stands.
    func lockedInsteadOfTimeout(_ timeout: StoreError) -> StoreError {
        let rest = KeyringBound.lockCheckMilliseconds(of: timeoutMilliseconds)
        guard let collection = try? defaultCollectionIfAny(withinMilliseconds: rest), collection.isLocked else {
            return timeout
        }
        return .lockedWhileSearchHeld("keyring '\(collection.label)'", timeoutMilliseconds: timeoutMilliseconds)
    }

    private func search(
        _ attributes: [(String, String)], loadSecrets: Bool, unlocking: Bool,
        withinMilliseconds milliseconds: Int? = nil,
        while operation: String
    ) throws(StoreError) -> ItemList {
        let lib = try LibSecret.load()
        let table = makeAttributeTable(attributes)
        defer { lib.hashTableUnref(table) }
        var flags = SECRET_SEARCH_ALL.rawValue
        if loadSecrets { flags |= SECRET_SEARCH_LOAD_SECRETS.rawValue }
        if unlocking { flags |= SECRET_SEARCH_UNLOCK.rawValue }
        // An item another process deletes between the search and the loading of its secret
        // fails the whole call; it is gone, not an error, so the search is asked again. So is
        // a search whose encrypted session the provider refused, under a new session.
        var refusals = 0
        for _ in 0..<4 {
            let service = try connect()
            var vanished = false
            var refused = false
            do {
                let list = try bounded(
                    operation, withinMilliseconds: milliseconds,
                    classify: { error in
                        if Self.isVanishedItem(error) {
                            lib.errorFree(error)
                            vanished = true
                            return StoreError(.failed, "")
                        }
                        refused = Self.isRefusedSession(error) && refusals + 1 < Self.sessionAttempts
                        return storeError(from: error, while: operation, timeoutMilliseconds: self.timeoutMilliseconds)
                    }
                ) { cancellable, error in
                    lib.serviceSearchSync(service, table, SecretSearchFlags(flags), cancellable, &error)
                }
                return ItemList(list)
            } catch  where vanished {
                continue
            } catch  where refused {
                refusals += 1
                renewSession()
            }
        }
        throw StoreError(
            .timedOut, "items kept vanishing while \(operation)",
            hint: "another process is changing the keyring; try again")
    }

    /// The default collection, unlocked: with a prompt when a person is at a terminal and no
    /// setting rules it out, else an error naming the lock (and the setting).
    func unlockedDefaultCollection() throws(StoreError) -> CollectionReference {
        let collection = try defaultCollection()
        guard collection.isLocked, try !unlockWithoutPrompt() else { return collection }
        guard promptPermission.isAllowed else { throw lockedError(label: collection.label) }
        let service = try connect()
        let lib = LibSecret.functions
        let objects = lib.listAppend(nil, UnsafeMutableRawPointer(collection.pointer))
        defer { lib.listFree(objects) }
        let unlocked = try bounded("unlocking the keyring") { cancellable, error in
            lib.serviceUnlockSync(service, objects, cancellable, &error)
        }
        if unlocked == 0 {
            throw StoreError(.locked, "keyring '\(collection.label)' is still locked", hint: lockedHint)
        }
        return collection
    }

    func defaultCollection() throws(StoreError) -> CollectionReference {
        guard let collection = try defaultCollectionIfAny() else {
            throw StoreError(
                .unavailable, "the Secret Service has no default keyring",
                hint: "create one with Passwords and Keys (seahorse), or use --backend file")
        }
        return collection
    }

    private func defaultCollectionIfAny(withinMilliseconds milliseconds: Int? = nil) throws(StoreError)
        -> CollectionReference?
    {
        let service = try connect()
        let collection = try bounded("opening the default keyring", withinMilliseconds: milliseconds) {
            cancellable, error in
            LibSecret.functions.collectionForAliasSync(service, "default", SECRET_COLLECTION_NONE, cancellable, &error)
        }
        return collection.map { CollectionReference(owning: $0) }
    }

    /// Throws when the default collection is locked and the provider does not unlock it with no
    /// prompt; true when it was locked and now is not (the caller searches again). Called on a
    /// miss only: a lookup in a locked collection finds nothing, exactly like one that has
    /// nothing, and must not read as such.
    func ensureDefaultCollectionIsNotLocked() throws(StoreError) -> Bool {
        guard let collection = try defaultCollectionIfAny(), collection.isLocked else { return false }
        guard try unlockWithoutPrompt() else {
            throw StoreError(.locked, "keyring '\(collection.label)' is locked", hint: lockedHint)
        }
        return true
    }

    /// For an item a search returned without its secret: locked (the item, or its collection),
    /// which throws; else it was deleted by another process between the search and the read, or
    /// its secret did not decode, and the caller searches again (docs/storage.md, "A keyring that
    /// never hangs and never lies").
    func ensureUnreadItemIsNotLocked(_ item: FoundItem) throws(StoreError) {
        if item.isLocked { throw lockedError() }
        // Unlocked only now: the item was not read, and is not known to be gone.
        if try ensureDefaultCollectionIsNotLocked() { throw lockedError() }
    }

    /// The error for an item found locked.
    func lockedError() -> StoreError {
        lockedError(label: (try? defaultCollection().label) ?? "default")
    }

    /// "locked", naming the setting when one ruled the unlock prompt out (docs/settings.md,
    /// "Non-interactive callers").
    private func lockedError(label: String) -> StoreError {
        guard let setting = decidedPromptPermission?.ruledOutBy else {
            return StoreError(.locked, "keyring '\(label)' is locked", hint: lockedHint)
        }
        return StoreError(
            .locked, "keyring '\(label)' is locked, and \(setting) rules out the unlock prompt",
            hint: StoreError.keyringLockedHint)
    }

    /// Creates an item (never replacing one) and returns it. `sessionRefused` is set when the
    /// provider could not decrypt the secret under the session: kwalletd5 fails that way for
    /// about one encrypted session in a hundred, and leaves an item with no secret behind
    /// (`removeUnfinished` removes it; docs/storage.md, "Providers").
    func create(
        in collection: CollectionReference, schema: OpaquePointer, attributes: [(String, String)], label: String,
        secret: Secret, sessionRefused: inout Bool, while operation: String
    ) throws(StoreError) -> FoundItem {
        let lib = LibSecret.functions
        let value = secret.withBytes { bytes in
            // secret_value_new copies the bytes; an empty secret still needs a valid pointer.
            withUnsafeTemporaryAllocation(of: CChar.self, capacity: max(bytes.count, 1)) { buffer in
                for index in 0..<bytes.count { buffer[index] = CChar(bitPattern: bytes[index]) }
                let copy = lib.valueNew(buffer.baseAddress!, bytes.count, "text/plain")!
                explicit_bzero(buffer.baseAddress!, buffer.count)
                return copy
            }
        }
        defer { lib.valueUnref(value) }
        let table = makeAttributeTable(attributes)
        defer { lib.hashTableUnref(table) }
        var refused = false
        defer { sessionRefused = refused }
        let created = try bounded(
            operation,
            classify: { error in
                refused = Self.isRefusedSession(error)
                return storeError(from: error, while: operation, timeoutMilliseconds: self.timeoutMilliseconds)
            }
        ) { cancellable, error in
            lib.itemCreateSync(
                collection.pointer, schema, table, label, value, SECRET_ITEM_CREATE_NONE, cancellable, &error)
        }
        guard let created else { throw StoreError(.failed, "the Secret Service did not create the item") }
        return FoundItem(ItemReference(owning: created))
    }

    /// Removes what a create the provider refused left behind: an item that carries every
    /// attribute given, the sequence stamp of that write among them, so nothing else matches.
    func removeUnfinished(_ attributes: [(String, String)], while operation: String) throws(StoreError) {
        for item in try search(attributes, loadSecrets: false, while: operation).items {
            try delete(item, while: "removing an item the keyring did not finish")
        }
    }

    /// Whether the provider refused the encrypted session the secret came in: kwalletd5 answers
    /// "Can't find session /org/freedesktop/secrets/session/N" (though the session is open)
    /// when it cannot decrypt a secret, and refuses to open one whose client key is a byte short
    /// ("Client public key size is invalid"), which one key in 256 is. libsecret passes on the
    /// provider's text and not always the error's name, so the text is what is matched.
    static func isRefusedSession(_ error: UnsafeMutablePointer<GError>) -> Bool {
        let message = String(cString: error.pointee.message)
        return message.contains("Can't find session /org/freedesktop/secrets/session/")
            || message.contains("Client public key size is invalid")
    }

    /// The secret of an item, read from the provider now (one `GetSecret` call); nil when the
    /// provider gave none.
    func loadSecret(of item: FoundItem, while operation: String) throws(StoreError) -> Secret? {
        _ = try bounded(operation) { cancellable, error in
            LibSecret.functions.itemLoadSecretSync(item.pointer, cancellable, &error)
        }
        return item.secret
    }

    /// Deletes the item; one that another process deleted first counts as deleted. A delete the
    /// keyring does not answer in time may still be carried out (the request reached it; a
    /// stalled daemon acts on it once it runs again), so that timeout is `outcomeUnknown` and
    /// says so, never "nothing was deleted".
    /// Deletes an item; false when the provider said it was gone already.
    @discardableResult
    func delete(_ item: FoundItem, while operation: String) throws(StoreError) -> Bool {
        var vanished = false
        do {
            _ = try bounded(
                operation,
                classify: { error in
                    if Self.isVanishedItem(error) {
                        LibSecret.functions.errorFree(error)
                        vanished = true
                        return StoreError(.failed, "")
                    }
                    return storeError(from: error, while: operation, timeoutMilliseconds: self.timeoutMilliseconds)
                }
            ) { cancellable, error in
                LibSecret.functions.itemDeleteSync(item.pointer, cancellable, &error)
            }
        } catch  where vanished {
            return false
        } catch  where error.kind == .timedOut {
            throw StoreError(
                .timedOut,
                """
                the Secret Service did not confirm a deletion within \(timeoutMilliseconds) ms while \(operation): \
                it may still take effect
                """,
                hint:
                    """
                    check that the keyring daemon is running and responsive, then look again: the item may be gone \
                    already
                    """,
                outcomeUnknown: true)
        }
        return true
    }

    /// Whether the error says the item no longer exists.
    static func isVanishedItem(_ error: UnsafeMutablePointer<GError>) -> Bool {
        let lib = LibSecret.functions
        if let remote = lib.dbusErrorGetRemoteError(error) {
            defer { lib.free(remote) }
            return vanishedItemErrors.contains(String(cString: remote))
        }
        // libsecret strips the remote name from some errors; gnome-keyring's text remains.
        return String(cString: error.pointee.message).hasPrefix("No such secret item")
    }

    /// Runs one libsecret call with a GCancellable that a timer cancels at the bound.
    /// What the Secret Service answers for an object that no longer exists (gnome-keyring names
    /// the first; other providers the generic D-Bus ones).
    static let vanishedItemErrors: Set<String> = [
        "org.freedesktop.Secret.Error.NoSuchObject", "org.freedesktop.DBus.Error.UnknownObject",
        "org.freedesktop.DBus.Error.UnknownMethod",
    ]

    func bounded<T>(
        _ operation: String, withinMilliseconds milliseconds: Int? = nil,
        classify: ((UnsafeMutablePointer<GError>) -> StoreError)? = nil,
        _ body: (OpaquePointer, inout UnsafeMutablePointer<GError>?) -> T
    ) throws(StoreError) -> T {
        let lib = try LibSecret.load()
        let cancellable = lib.cancellableNew()!
        defer { lib.objectUnref(cancellable) }
        let timer = CancellationTimer(
            cancelling: cancellable, afterMilliseconds: milliseconds ?? timeoutMilliseconds, using: lib)
        var error: UnsafeMutablePointer<GError>?
        let result = body(cancellable, &error)
        timer.stop()
        if let error {
            if let classify, !lib.isCancellation(error) {
                throw classify(error)
            }
            throw storeError(from: error, while: operation, timeoutMilliseconds: timeoutMilliseconds)
        }
        return result
    }
}

/// A schema matched without its name, so lookups find items that other helpers wrote under
/// older names; built once per process, when the first item is created (after `connect`).
func makeSchema(name: String, attributes: [(String, SecretSchemaAttributeType)]) -> OpaquePointer {
    let lib = LibSecret.functions
    let types = lib.hashTableNewWithStringKeys(freeingValues: false)!
    for (attribute, type) in attributes {
        lib.hashTableInsert(
            types, UnsafeMutableRawPointer(lib.strdup(attribute)),
            UnsafeMutableRawPointer(bitPattern: Int(type.rawValue)))
    }
    let schema = lib.schemaNewv(name, SECRET_SCHEMA_DONT_MATCH_NAME, types)!
    lib.hashTableUnref(types)
    return schema
}

/// A search's result. Each item holds a reference of its own, so the list itself is freed at once.
struct ItemList {
    let items: [FoundItem]

    init(_ list: UnsafeMutablePointer<GList>?) {
        var items: [FoundItem] = []
        var node = list
        while let current = node {
            if let data = current.pointee.data {
                items.append(FoundItem(ItemReference(retaining: OpaquePointer(data))))
            }
            node = current.pointee.next
        }
        self.items = items
        LibSecret.functions.listFreeUnreferencingObjects(list)
    }
}

/// One reference to a GLib object of the kind `Object` names (a collection, an item), released
/// when the owner goes: the pointer is valid exactly as long as the owner lives. The C types are
/// incomplete (CLibSecret's shim.h), so the kind is this type's parameter.
final class GObjectReference<Object> {
    let pointer: OpaquePointer

    /// Takes over a reference the caller was given (a `_sync` call's result).
    init(owning pointer: OpaquePointer) { self.pointer = pointer }

    /// Takes a reference of its own to an object someone else owns (a list's element).
    init(retaining pointer: OpaquePointer) {
        LibSecret.functions.objectRef(pointer)
        self.pointer = pointer
    }

    deinit { LibSecret.functions.objectUnref(pointer) }
}

/// The kinds of GLib object a `GObjectReference` holds.
enum SecretCollectionObject {}
enum SecretItemObject {}

typealias CollectionReference = GObjectReference<SecretCollectionObject>
typealias ItemReference = GObjectReference<SecretItemObject>

extension GObjectReference<SecretCollectionObject> {
    var isLocked: Bool { LibSecret.functions.collectionGetLocked(pointer) }

    var label: String {
        let lib = LibSecret.functions
        guard let label = lib.collectionGetLabel(pointer) else { return "default" }
        defer { lib.free(label) }
        return String(cString: label)
    }
}

/// One item a search returned or a create made, with its own reference.
struct FoundItem {
    private let object: ItemReference
    let attributes: [String: String]

    var pointer: OpaquePointer { object.pointer }

    init(_ object: ItemReference) {
        self.object = object
        let pointer = object.pointer
        let lib = LibSecret.functions
        var attributes: [String: String] = [:]
        if let table = lib.itemGetAttributes(pointer) {
            var iterator = GHashTableIter()
            lib.hashTableIterInit(&iterator, table)
            var key: gpointer?
            var value: gpointer?
            while lib.hashTableIterNext(&iterator, &key, &value) {
                if let key, let value {
                    attributes[String(cString: key.assumingMemoryBound(to: CChar.self))] =
                        String(cString: value.assumingMemoryBound(to: CChar.self))
                }
            }
            lib.hashTableUnref(table)
        }
        self.attributes = attributes
    }

    var label: String {
        let lib = LibSecret.functions
        guard let label = lib.itemGetLabel(pointer) else { return "" }
        defer { lib.free(label) }
        return String(cString: label)
    }

    var isLocked: Bool { LibSecret.functions.itemGetLocked(pointer) }

    var objectPath: String {
        // The item is a GDBusProxy.
        guard let path = LibSecret.functions.dbusProxyGetObjectPath(pointer) else { return "" }
        return String(cString: path)
    }

    /// Created and modified, in whole seconds, as the provider keeps them.
    var times: (created: Int64, modified: Int64) {
        let lib = LibSecret.functions
        return (Int64(lib.itemGetCreated(pointer)), Int64(lib.itemGetModified(pointer)))
    }

    /// The secret, or nil when it was not loaded (the item is locked).
    var secret: Secret? {
        let lib = LibSecret.functions
        guard let value = lib.itemGetSecret(pointer) else { return nil }
        defer { lib.valueUnref(value) }
        var length: gsize = 0
        let bytes = lib.valueGet(value, &length)
        return Secret(bytes: Array(UnsafeRawBufferPointer(start: bytes, count: Int(length))))
    }
}
