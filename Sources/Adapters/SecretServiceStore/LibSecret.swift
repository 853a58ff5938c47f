import Basics
import CLibSecret
import Glibc
import PortalTokenCore

/// libsecret, and through it GLib and GIO, loaded with dlopen the first time the Secret Service
/// is used (see CLibSecret's shim.h for why it is not linked). Every function the stores use is
/// resolved once; if the library or any function is missing, `loaded` is nil and every store
/// operation throws `.unavailable`, which `auto` takes as a reason to use the file.
enum LibSecret {
    /// The soname of Debian's libsecret-1-0; it brings GLib and GIO in as its dependencies.
    static let soname = "libsecret-1.so.0"

    static let loaded: Functions? = Functions.load()

    /// The resolved functions. Used only once `SecretServiceConnection.connect` has loaded them
    /// through `load()`: every service, collection, item, list and schema comes after it.
    static var functions: Functions { loaded! }

    /// The resolved functions, or the error every store operation gives when libsecret cannot
    /// be loaded.
    static func load() throws(StoreError) -> Functions {
        guard let loaded else {
            throw StoreError(
                .unavailable, "libsecret (\(soname)) could not be loaded",
                hint: "install Debian's libsecret-1-0, or use --backend file")
        }
        return loaded
    }

    /// Addresses of functions in a library that is never unloaded: safe to share between threads
    /// (the cancellation timer cancels from a thread of its own).
    struct Functions: @unchecked Sendable {
        // GLib
        private let hashTableNewFullFunction, hashTableInsertFunction, hashTableUnrefFunction: UnsafeMutableRawPointer
        private let hashTableIterInitFunction, hashTableIterNextFunction: UnsafeMutableRawPointer
        private let strHashFunction, strEqualFunction, strdupFunction, freeFunction: UnsafeMutableRawPointer
        private let listAppendFunction, listFreeFunction, listFreeFullFunction: UnsafeMutableRawPointer
        private let logSetWriterFuncFunction, errorFreeFunction, errorMatchesFunction: UnsafeMutableRawPointer
        // GObject
        private let objectUnrefFunction, objectRefFunction: UnsafeMutableRawPointer
        // GIO
        private let ioErrorQuarkFunction, dbusErrorGetRemoteErrorFunction: UnsafeMutableRawPointer
        private let cancellableNewFunction, cancellableCancelFunction, busGetSyncFunction: UnsafeMutableRawPointer
        private let dbusProxyGetConnectionFunction, dbusProxyGetObjectPathFunction: UnsafeMutableRawPointer
        private let dbusConnectionCallSyncFunction, variantUnrefFunction: UnsafeMutableRawPointer
        // libsecret
        private let serviceGetSyncFunction, serviceDisconnectFunction, serviceSearchSyncFunction,
            serviceUnlockSyncFunction: UnsafeMutableRawPointer
        private let collectionForAliasSyncFunction, collectionGetLockedFunction,
            collectionGetLabelFunction: UnsafeMutableRawPointer
        private let schemaNewvFunction, itemCreateSyncFunction, itemDeleteSyncFunction: UnsafeMutableRawPointer
        private let itemLoadSecretSyncFunction: UnsafeMutableRawPointer
        private let itemGetAttributesFunction, itemGetLockedFunction, itemGetModifiedFunction: UnsafeMutableRawPointer
        private let itemGetCreatedFunction, itemGetSecretFunction, itemGetLabelFunction: UnsafeMutableRawPointer
        private let valueNewFunction, valueGetFunction, valueUnrefFunction: UnsafeMutableRawPointer

        /// Opens libsecret and resolves every function, GLib's and GIO's through libsecret's
        /// handle (which searches its dependencies too), then keeps GLib's own logging off
        /// stderr before anything can log.
        static func load() -> Functions? {
            guard let library = DynamicLibrary(soname) else { return nil }
            guard let functions = try? Functions(library: library) else { return nil }
            functions.logSetWriterFunc(silentLogWriter)
            return functions
        }

        private init(library: DynamicLibrary) throws(DynamicLibrary.Missing) {
            func resolve(_ name: String) throws(DynamicLibrary.Missing) -> UnsafeMutableRawPointer {
                try library.function(name)
            }
            hashTableNewFullFunction = try resolve("g_hash_table_new_full")
            hashTableInsertFunction = try resolve("g_hash_table_insert")
            hashTableUnrefFunction = try resolve("g_hash_table_unref")
            hashTableIterInitFunction = try resolve("g_hash_table_iter_init")
            hashTableIterNextFunction = try resolve("g_hash_table_iter_next")
            strHashFunction = try resolve("g_str_hash")
            strEqualFunction = try resolve("g_str_equal")
            strdupFunction = try resolve("g_strdup")
            freeFunction = try resolve("g_free")
            listAppendFunction = try resolve("g_list_append")
            listFreeFunction = try resolve("g_list_free")
            listFreeFullFunction = try resolve("g_list_free_full")
            logSetWriterFuncFunction = try resolve("g_log_set_writer_func")
            errorFreeFunction = try resolve("g_error_free")
            errorMatchesFunction = try resolve("g_error_matches")
            objectUnrefFunction = try resolve("g_object_unref")
            objectRefFunction = try resolve("g_object_ref")
            ioErrorQuarkFunction = try resolve("g_io_error_quark")
            dbusErrorGetRemoteErrorFunction = try resolve("g_dbus_error_get_remote_error")
            cancellableNewFunction = try resolve("g_cancellable_new")
            cancellableCancelFunction = try resolve("g_cancellable_cancel")
            busGetSyncFunction = try resolve("g_bus_get_sync")
            dbusProxyGetConnectionFunction = try resolve("g_dbus_proxy_get_connection")
            dbusProxyGetObjectPathFunction = try resolve("g_dbus_proxy_get_object_path")
            dbusConnectionCallSyncFunction = try resolve("g_dbus_connection_call_sync")
            variantUnrefFunction = try resolve("g_variant_unref")
            serviceGetSyncFunction = try resolve("secret_service_get_sync")
            serviceDisconnectFunction = try resolve("secret_service_disconnect")
            serviceSearchSyncFunction = try resolve("secret_service_search_sync")
            serviceUnlockSyncFunction = try resolve("secret_service_unlock_sync")
            collectionForAliasSyncFunction = try resolve("secret_collection_for_alias_sync")
            collectionGetLockedFunction = try resolve("secret_collection_get_locked")
            collectionGetLabelFunction = try resolve("secret_collection_get_label")
            schemaNewvFunction = try resolve("secret_schema_newv")
            itemCreateSyncFunction = try resolve("secret_item_create_sync")
            itemDeleteSyncFunction = try resolve("secret_item_delete_sync")
            itemLoadSecretSyncFunction = try resolve("secret_item_load_secret_sync")
            itemGetAttributesFunction = try resolve("secret_item_get_attributes")
            itemGetLockedFunction = try resolve("secret_item_get_locked")
            itemGetModifiedFunction = try resolve("secret_item_get_modified")
            itemGetCreatedFunction = try resolve("secret_item_get_created")
            itemGetSecretFunction = try resolve("secret_item_get_secret")
            itemGetLabelFunction = try resolve("secret_item_get_label")
            valueNewFunction = try resolve("secret_value_new")
            valueGetFunction = try resolve("secret_value_get")
            valueUnrefFunction = try resolve("secret_value_unref")
        }

        // MARK: GLib

        /// A hash table with string keys (g_str_hash, g_str_equal) that frees its keys with
        /// g_free, and its values too when `freeingValues`.
        func hashTableNewWithStringKeys(freeingValues: Bool) -> OpaquePointer? {
            portal_g_hash_table_new_full(
                hashTableNewFullFunction, strHashFunction, strEqualFunction, freeFunction,
                freeingValues ? freeFunction : nil)
        }

        func hashTableInsert(_ table: OpaquePointer, _ key: UnsafeMutableRawPointer?, _ value: UnsafeMutableRawPointer?)
        {
            _ = portal_g_hash_table_insert(hashTableInsertFunction, table, key, value)
        }

        func hashTableUnref(_ table: OpaquePointer) { portal_g_hash_table_unref(hashTableUnrefFunction, table) }

        func hashTableIterInit(_ iterator: UnsafeMutablePointer<GHashTableIter>, _ table: OpaquePointer) {
            portal_g_hash_table_iter_init(hashTableIterInitFunction, iterator, table)
        }

        func hashTableIterNext(
            _ iterator: UnsafeMutablePointer<GHashTableIter>, _ key: UnsafeMutablePointer<gpointer?>,
            _ value: UnsafeMutablePointer<gpointer?>
        ) -> Bool {
            portal_g_hash_table_iter_next(hashTableIterNextFunction, iterator, key, value) != 0
        }

        func strdup(_ text: String) -> UnsafeMutablePointer<gchar>? { portal_g_strdup(strdupFunction, text) }
        func free(_ memory: UnsafeMutableRawPointer?) { portal_g_free(freeFunction, memory) }

        func listAppend(_ list: UnsafeMutablePointer<GList>?, _ data: UnsafeMutableRawPointer?) -> UnsafeMutablePointer<
            GList
        >? {
            portal_g_list_append(listAppendFunction, list, data)
        }

        func listFree(_ list: UnsafeMutablePointer<GList>?) { portal_g_list_free(listFreeFunction, list) }

        /// Frees a list of GObjects and drops the list's reference to each.
        func listFreeUnreferencingObjects(_ list: UnsafeMutablePointer<GList>?) {
            portal_g_list_free_full(listFreeFullFunction, list, objectUnrefFunction)
        }

        func logSetWriterFunc(_ writer: GLogWriterFunc) {
            portal_g_log_set_writer_func(logSetWriterFuncFunction, writer, nil, nil)
        }

        func errorFree(_ error: UnsafeMutablePointer<GError>) { portal_g_error_free(errorFreeFunction, error) }

        func errorMatches(_ error: UnsafeMutablePointer<GError>, _ domain: GQuark, _ code: gint) -> Bool {
            portal_g_error_matches(errorMatchesFunction, error, domain, code) != 0
        }

        // MARK: GObject

        func objectUnref(_ object: OpaquePointer) {
            portal_g_object_unref(objectUnrefFunction, UnsafeMutableRawPointer(object))
        }

        func objectRef(_ object: OpaquePointer) {
            _ = portal_g_object_ref(objectRefFunction, UnsafeMutableRawPointer(object))
        }

        // MARK: GIO

        /// Whether the error is GIO's "cancelled": the timer cancelled the call at its bound.
        func isCancellation(_ error: UnsafeMutablePointer<GError>) -> Bool {
            errorMatches(error, portal_g_io_error_quark(ioErrorQuarkFunction), gint(G_IO_ERROR_CANCELLED.rawValue))
        }

        func dbusErrorGetRemoteError(_ error: UnsafeMutablePointer<GError>) -> UnsafeMutablePointer<gchar>? {
            portal_g_dbus_error_get_remote_error(dbusErrorGetRemoteErrorFunction, error)
        }

        func cancellableNew() -> OpaquePointer? {
            portal_g_cancellable_new(cancellableNewFunction)
        }

        func cancellableCancel(_ cancellable: OpaquePointer) {
            portal_g_cancellable_cancel(cancellableCancelFunction, cancellable)
        }

        func busGetSync(
            _ type: GBusType, _ cancellable: OpaquePointer,
            _ error: UnsafeMutablePointer<UnsafeMutablePointer<GError>?>
        ) -> OpaquePointer? {
            portal_g_bus_get_sync(busGetSyncFunction, type, cancellable, error)
        }

        func dbusProxyGetConnection(_ proxy: OpaquePointer) -> OpaquePointer? {
            portal_g_dbus_proxy_get_connection(dbusProxyGetConnectionFunction, proxy)
        }

        func dbusProxyGetObjectPath(_ proxy: OpaquePointer) -> UnsafePointer<gchar>? {
            portal_g_dbus_proxy_get_object_path(dbusProxyGetObjectPathFunction, proxy)
        }

        /// A method call without arguments whose reply is not checked against a type.
        func dbusConnectionCallSync(
            _ connection: OpaquePointer, busName: String, objectPath: String, interfaceName: String, methodName: String,
            flags: GDBusCallFlags, timeoutMilliseconds: gint, _ cancellable: OpaquePointer,
            _ error: UnsafeMutablePointer<UnsafeMutablePointer<GError>?>
        ) -> OpaquePointer? {
            portal_g_dbus_connection_call_sync(
                dbusConnectionCallSyncFunction, connection, busName, objectPath, interfaceName,
                methodName, nil, nil, flags, timeoutMilliseconds, cancellable, error)
        }

        func variantUnref(_ value: OpaquePointer) { portal_g_variant_unref(variantUnrefFunction, value) }

        // MARK: libsecret

        func serviceGetSync(
            _ flags: SecretServiceFlags, _ cancellable: OpaquePointer,
            _ error: UnsafeMutablePointer<UnsafeMutablePointer<GError>?>
        ) -> OpaquePointer? {
            portal_secret_service_get_sync(serviceGetSyncFunction, flags, cancellable, error)
        }

        /// Drops libsecret's shared service object, and with it the session it opened: the next
        /// `serviceGetSync` connects anew and opens a new session when one is needed.
        func serviceDisconnect() { portal_secret_service_disconnect(serviceDisconnectFunction) }

        /// A search by attributes alone, of any schema.
        func serviceSearchSync(
            _ service: OpaquePointer, _ attributes: OpaquePointer,
            _ flags: SecretSearchFlags, _ cancellable: OpaquePointer,
            _ error: UnsafeMutablePointer<UnsafeMutablePointer<GError>?>
        ) -> UnsafeMutablePointer<GList>? {
            portal_secret_service_search_sync(
                serviceSearchSyncFunction, service, nil, attributes, flags, cancellable, error)
        }

        /// Unlocks the objects; how many were unlocked is returned, not which.
        func serviceUnlockSync(
            _ service: OpaquePointer, _ objects: UnsafeMutablePointer<GList>?,
            _ cancellable: OpaquePointer,
            _ error: UnsafeMutablePointer<UnsafeMutablePointer<GError>?>
        ) -> gint {
            portal_secret_service_unlock_sync(serviceUnlockSyncFunction, service, objects, cancellable, nil, error)
        }

        func collectionForAliasSync(
            _ service: OpaquePointer, _ alias: String,
            _ flags: SecretCollectionFlags, _ cancellable: OpaquePointer,
            _ error: UnsafeMutablePointer<UnsafeMutablePointer<GError>?>
        ) -> OpaquePointer? {
            portal_secret_collection_for_alias_sync(
                collectionForAliasSyncFunction, service, alias, flags, cancellable, error)
        }

        func collectionGetLocked(_ collection: OpaquePointer) -> Bool {
            portal_secret_collection_get_locked(collectionGetLockedFunction, collection) != 0
        }

        func collectionGetLabel(_ collection: OpaquePointer) -> UnsafeMutablePointer<gchar>? {
            portal_secret_collection_get_label(collectionGetLabelFunction, collection)
        }

        func schemaNewv(_ name: String, _ flags: SecretSchemaFlags, _ types: OpaquePointer) -> OpaquePointer? {
            portal_secret_schema_newv(schemaNewvFunction, name, flags, types)
        }

        func itemCreateSync(
            _ collection: OpaquePointer, _ schema: OpaquePointer,
            _ attributes: OpaquePointer, _ label: String, _ value: OpaquePointer, _ flags: SecretItemCreateFlags,
            _ cancellable: OpaquePointer,
            _ error: UnsafeMutablePointer<UnsafeMutablePointer<GError>?>
        ) -> OpaquePointer? {
            portal_secret_item_create_sync(
                itemCreateSyncFunction, collection, schema, attributes, label, value, flags,
                cancellable, error)
        }

        func itemDeleteSync(
            _ item: OpaquePointer, _ cancellable: OpaquePointer,
            _ error: UnsafeMutablePointer<UnsafeMutablePointer<GError>?>
        ) -> Bool {
            portal_secret_item_delete_sync(itemDeleteSyncFunction, item, cancellable, error) != 0
        }

        func itemLoadSecretSync(
            _ item: OpaquePointer, _ cancellable: OpaquePointer,
            _ error: UnsafeMutablePointer<UnsafeMutablePointer<GError>?>
        ) -> Bool {
            portal_secret_item_load_secret_sync(itemLoadSecretSyncFunction, item, cancellable, error) != 0
        }

        func itemGetAttributes(_ item: OpaquePointer) -> OpaquePointer? {
            portal_secret_item_get_attributes(itemGetAttributesFunction, item)
        }

        func itemGetLocked(_ item: OpaquePointer) -> Bool {
            portal_secret_item_get_locked(itemGetLockedFunction, item) != 0
        }

        func itemGetModified(_ item: OpaquePointer) -> UInt {
            UInt(portal_secret_item_get_modified(itemGetModifiedFunction, item))
        }

        func itemGetCreated(_ item: OpaquePointer) -> UInt {
            UInt(portal_secret_item_get_created(itemGetCreatedFunction, item))
        }

        func itemGetLabel(_ item: OpaquePointer) -> UnsafeMutablePointer<gchar>? {
            portal_secret_item_get_label(itemGetLabelFunction, item)
        }

        func itemGetSecret(_ item: OpaquePointer) -> OpaquePointer? {
            portal_secret_item_get_secret(itemGetSecretFunction, item)
        }

        func valueNew(_ bytes: UnsafePointer<gchar>, _ length: Int, _ contentType: String) -> OpaquePointer? {
            portal_secret_value_new(valueNewFunction, bytes, gssize(length), contentType)
        }

        func valueGet(_ value: OpaquePointer, _ length: UnsafeMutablePointer<gsize>) -> UnsafePointer<gchar>? {
            portal_secret_value_get(valueGetFunction, value, length)
        }

        func valueUnref(_ value: OpaquePointer) {
            portal_secret_value_unref(valueUnrefFunction, UnsafeMutableRawPointer(value))
        }
    }
}
