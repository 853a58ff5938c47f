#ifndef PORTAL_TOKEN_CLIBSECRET_SHIM_H
#define PORTAL_TOKEN_CLIBSECRET_SHIM_H

#include <stddef.h>
#include <stdint.h>

/*
 * libsecret is loaded with dlopen the first time the Secret Service is used, not linked: linking
 * it puts libsecret, GIO, GObject, GLib and the libraries they need (libgcrypt, libmount,
 * libselinux, libpcre2, libffi, …) into every invocation, including those that never reach the
 * keyring: the encrypted-file backend, `--version`, and `get` or `api` answered from the session
 * cache in the kernel keyring. The Swift side resolves each function with dlsym on libsecret's
 * handle (which also finds GLib's and GIO's, its dependencies) and calls it through these
 * wrappers, which take the resolved address as `fn`.
 *
 * Functions that GLib receives as pointers (g_str_hash, g_free, g_object_unref, …) are passed as
 * resolved addresses too, and given their GLib type here.
 *
 * Nor are libsecret's headers included: they need GLib's, whose glibconfig.h lives in a directory
 * of its own per architecture that only pkg-config knows (and whose flags carry -pthread, which
 * SwiftPM refuses with a warning on every build). What the wrappers use of the libraries' ABI is
 * declared below instead, as GLib 2 and libsecret 0.x declare it and keep it: the basic types,
 * the three structures read or allocated on this side (GList, GError, GHashTableIter), the log
 * writer's signature, and the enumerations' values. Everything else is an incomplete type,
 * handled only through pointers. SecretServiceStoreTests compiles these declarations beside the
 * installed headers and compares every size, offset and value.
 */

/* GLib: basic types (glib/gtypes.h, glibconfig.h) */

typedef char gchar;
typedef int gint;
typedef unsigned int guint;
typedef gint gboolean;
typedef uint32_t guint32;
typedef uint64_t guint64;
typedef size_t gsize;
typedef ptrdiff_t gssize;
typedef void *gpointer;
typedef const void *gconstpointer;
typedef guint32 GQuark;

typedef guint (*GHashFunc)(gconstpointer key);
typedef gboolean (*GEqualFunc)(gconstpointer a, gconstpointer b);
typedef void (*GDestroyNotify)(gpointer data);

/* GLib: structures (glib/glist.h, glib/gerror.h, glib/ghash.h) */

typedef struct _GList GList;
struct _GList {
    gpointer data;
    GList *next;
    GList *prev;
};

typedef struct _GError {
    GQuark domain;
    gint code;
    gchar *message;
} GError;

typedef struct _GHashTable GHashTable;

typedef struct _GHashTableIter {
    gpointer dummy1;
    gpointer dummy2;
    gpointer dummy3;
    int dummy4;
    gboolean dummy5;
    gpointer dummy6;
} GHashTableIter;

/* GLib: structured logging (glib/gmessages.h); GLogLevelFlags is an int-sized enumeration. */

typedef gint GLogLevelFlags;

typedef enum { G_LOG_WRITER_HANDLED = 1, G_LOG_WRITER_UNHANDLED = 0 } GLogWriterOutput;

typedef struct _GLogField {
    const gchar *key;
    gconstpointer value;
    gssize length;
} GLogField;

typedef GLogWriterOutput (*GLogWriterFunc)(GLogLevelFlags log_level, const GLogField *fields, gsize n_fields,
                                           gpointer user_data);

/* GIO (gio/giotypes.h, gio/gioenums.h) and GVariant */

typedef struct _GCancellable GCancellable;
typedef struct _GDBusConnection GDBusConnection;
typedef struct _GDBusProxy GDBusProxy;
typedef struct _GVariant GVariant;
typedef struct _GVariantType GVariantType;

typedef enum { G_IO_ERROR_CANCELLED = 19 } GIOErrorEnum;

typedef enum {
    G_BUS_TYPE_STARTER = -1,
    G_BUS_TYPE_NONE = 0,
    G_BUS_TYPE_SYSTEM = 1,
    G_BUS_TYPE_SESSION = 2
} GBusType;

typedef enum {
    G_DBUS_CALL_FLAGS_NONE = 0,
    G_DBUS_CALL_FLAGS_NO_AUTO_START = 1 << 0,
    G_DBUS_CALL_FLAGS_ALLOW_INTERACTIVE_AUTHORIZATION = 1 << 1
} GDBusCallFlags;

/* libsecret (libsecret/secret-*.h) */

typedef struct _SecretService SecretService;
typedef struct _SecretCollection SecretCollection;
typedef struct _SecretItem SecretItem;
typedef struct _SecretValue SecretValue;
typedef struct _SecretSchema SecretSchema;

typedef enum {
    SECRET_SERVICE_NONE = 0,
    SECRET_SERVICE_OPEN_SESSION = 1 << 1,
    SECRET_SERVICE_LOAD_COLLECTIONS = 1 << 2
} SecretServiceFlags;

typedef enum {
    SECRET_SEARCH_NONE = 0,
    SECRET_SEARCH_ALL = 1 << 1,
    SECRET_SEARCH_UNLOCK = 1 << 2,
    SECRET_SEARCH_LOAD_SECRETS = 1 << 3
} SecretSearchFlags;

typedef enum { SECRET_COLLECTION_NONE = 0, SECRET_COLLECTION_LOAD_ITEMS = 1 << 1 } SecretCollectionFlags;

typedef enum { SECRET_ITEM_CREATE_NONE = 0, SECRET_ITEM_CREATE_REPLACE = 1 << 1 } SecretItemCreateFlags;

typedef enum { SECRET_SCHEMA_NONE = 0, SECRET_SCHEMA_DONT_MATCH_NAME = 1 << 1 } SecretSchemaFlags;

typedef enum {
    SECRET_SCHEMA_ATTRIBUTE_STRING = 0,
    SECRET_SCHEMA_ATTRIBUTE_INTEGER = 1,
    SECRET_SCHEMA_ATTRIBUTE_BOOLEAN = 2
} SecretSchemaAttributeType;

/* GLib */

static inline GHashTable *portal_g_hash_table_new_full(void *fn, void *hash_func, void *key_equal_func,
                                                       void *key_destroy_func, void *value_destroy_func) {
    return ((GHashTable *(*)(GHashFunc, GEqualFunc, GDestroyNotify, GDestroyNotify))fn)(
        (GHashFunc)hash_func, (GEqualFunc)key_equal_func, (GDestroyNotify)key_destroy_func,
        (GDestroyNotify)value_destroy_func);
}

static inline gboolean portal_g_hash_table_insert(void *fn, GHashTable *table, gpointer key, gpointer value) {
    return ((gboolean (*)(GHashTable *, gpointer, gpointer))fn)(table, key, value);
}

static inline void portal_g_hash_table_unref(void *fn, GHashTable *table) {
    ((void (*)(GHashTable *))fn)(table);
}

static inline void portal_g_hash_table_iter_init(void *fn, GHashTableIter *iter, GHashTable *table) {
    ((void (*)(GHashTableIter *, GHashTable *))fn)(iter, table);
}

static inline gboolean portal_g_hash_table_iter_next(void *fn, GHashTableIter *iter, gpointer *key, gpointer *value) {
    return ((gboolean (*)(GHashTableIter *, gpointer *, gpointer *))fn)(iter, key, value);
}

static inline gchar *portal_g_strdup(void *fn, const gchar *text) {
    return ((gchar *(*)(const gchar *))fn)(text);
}

static inline void portal_g_free(void *fn, gpointer memory) {
    ((void (*)(gpointer))fn)(memory);
}

static inline GList *portal_g_list_append(void *fn, GList *list, gpointer data) {
    return ((GList *(*)(GList *, gpointer))fn)(list, data);
}

static inline void portal_g_list_free(void *fn, GList *list) {
    ((void (*)(GList *))fn)(list);
}

static inline void portal_g_list_free_full(void *fn, GList *list, void *free_func) {
    ((void (*)(GList *, GDestroyNotify))fn)(list, (GDestroyNotify)free_func);
}

static inline void portal_g_log_set_writer_func(void *fn, GLogWriterFunc writer, gpointer user_data,
                                                GDestroyNotify user_data_free) {
    ((void (*)(GLogWriterFunc, gpointer, GDestroyNotify))fn)(writer, user_data, user_data_free);
}

static inline void portal_g_error_free(void *fn, GError *error) {
    ((void (*)(GError *))fn)(error);
}

static inline gboolean portal_g_error_matches(void *fn, const GError *error, GQuark domain, gint code) {
    return ((gboolean (*)(const GError *, GQuark, gint))fn)(error, domain, code);
}

/* GObject */

static inline void portal_g_object_unref(void *fn, gpointer object) {
    ((void (*)(gpointer))fn)(object);
}

static inline gpointer portal_g_object_ref(void *fn, gpointer object) {
    return ((gpointer (*)(gpointer))fn)(object);
}

/* GIO */

static inline GQuark portal_g_io_error_quark(void *fn) {
    return ((GQuark (*)(void))fn)();
}

static inline gchar *portal_g_dbus_error_get_remote_error(void *fn, const GError *error) {
    return ((gchar *(*)(const GError *))fn)(error);
}

static inline GCancellable *portal_g_cancellable_new(void *fn) {
    return ((GCancellable *(*)(void))fn)();
}

static inline void portal_g_cancellable_cancel(void *fn, GCancellable *cancellable) {
    ((void (*)(GCancellable *))fn)(cancellable);
}

static inline GDBusConnection *portal_g_bus_get_sync(void *fn, GBusType bus_type, GCancellable *cancellable,
                                                     GError **error) {
    return ((GDBusConnection *(*)(GBusType, GCancellable *, GError **))fn)(bus_type, cancellable, error);
}

static inline GDBusConnection *portal_g_dbus_proxy_get_connection(void *fn, GDBusProxy *proxy) {
    return ((GDBusConnection *(*)(GDBusProxy *))fn)(proxy);
}

static inline const gchar *portal_g_dbus_proxy_get_object_path(void *fn, GDBusProxy *proxy) {
    return ((const gchar *(*)(GDBusProxy *))fn)(proxy);
}

static inline GVariant *portal_g_dbus_connection_call_sync(void *fn, GDBusConnection *connection, const gchar *bus_name,
                                                           const gchar *object_path, const gchar *interface_name,
                                                           const gchar *method_name, GVariant *parameters,
                                                           const GVariantType *reply_type, GDBusCallFlags flags,
                                                           gint timeout_msec, GCancellable *cancellable,
                                                           GError **error) {
    return ((GVariant *(*)(GDBusConnection *, const gchar *, const gchar *, const gchar *, const gchar *, GVariant *,
                           const GVariantType *, GDBusCallFlags, gint, GCancellable *, GError **))fn)(
        connection, bus_name, object_path, interface_name, method_name, parameters, reply_type, flags, timeout_msec,
        cancellable, error);
}

static inline void portal_g_variant_unref(void *fn, GVariant *value) {
    ((void (*)(GVariant *))fn)(value);
}

/* libsecret */

static inline SecretService *portal_secret_service_get_sync(void *fn, SecretServiceFlags flags,
                                                            GCancellable *cancellable, GError **error) {
    return ((SecretService *(*)(SecretServiceFlags, GCancellable *, GError **))fn)(flags, cancellable, error);
}

static inline void portal_secret_service_disconnect(void *fn) {
    ((void (*)(void))fn)();
}

static inline GList *portal_secret_service_search_sync(void *fn, SecretService *service, const SecretSchema *schema,
                                                       GHashTable *attributes, SecretSearchFlags flags,
                                                       GCancellable *cancellable, GError **error) {
    return ((GList *(*)(SecretService *, const SecretSchema *, GHashTable *, SecretSearchFlags, GCancellable *,
                        GError **))fn)(service, schema, attributes, flags, cancellable, error);
}

static inline gint portal_secret_service_unlock_sync(void *fn, SecretService *service, GList *objects,
                                                     GCancellable *cancellable, GList **unlocked, GError **error) {
    return ((gint (*)(SecretService *, GList *, GCancellable *, GList **, GError **))fn)(
        service, objects, cancellable, unlocked, error);
}

static inline SecretCollection *portal_secret_collection_for_alias_sync(void *fn, SecretService *service,
                                                                        const gchar *alias,
                                                                        SecretCollectionFlags flags,
                                                                        GCancellable *cancellable, GError **error) {
    return ((SecretCollection *(*)(SecretService *, const gchar *, SecretCollectionFlags, GCancellable *,
                                   GError **))fn)(service, alias, flags, cancellable, error);
}

static inline gboolean portal_secret_collection_get_locked(void *fn, SecretCollection *collection) {
    return ((gboolean (*)(SecretCollection *))fn)(collection);
}

static inline gchar *portal_secret_collection_get_label(void *fn, SecretCollection *collection) {
    return ((gchar *(*)(SecretCollection *))fn)(collection);
}

static inline SecretSchema *portal_secret_schema_newv(void *fn, const gchar *name, SecretSchemaFlags flags,
                                                      GHashTable *attribute_names_and_types) {
    return ((SecretSchema *(*)(const gchar *, SecretSchemaFlags, GHashTable *))fn)(name, flags,
                                                                                     attribute_names_and_types);
}

static inline SecretItem *portal_secret_item_create_sync(void *fn, SecretCollection *collection,
                                                         const SecretSchema *schema, GHashTable *attributes,
                                                         const gchar *label, SecretValue *value,
                                                         SecretItemCreateFlags flags, GCancellable *cancellable,
                                                         GError **error) {
    return ((SecretItem *(*)(SecretCollection *, const SecretSchema *, GHashTable *, const gchar *, SecretValue *,
                             SecretItemCreateFlags, GCancellable *, GError **))fn)(
        collection, schema, attributes, label, value, flags, cancellable, error);
}

static inline gboolean portal_secret_item_delete_sync(void *fn, SecretItem *item, GCancellable *cancellable,
                                                      GError **error) {
    return ((gboolean (*)(SecretItem *, GCancellable *, GError **))fn)(item, cancellable, error);
}

static inline gboolean portal_secret_item_load_secret_sync(void *fn, SecretItem *item, GCancellable *cancellable,
                                                           GError **error) {
    return ((gboolean (*)(SecretItem *, GCancellable *, GError **))fn)(item, cancellable, error);
}

static inline GHashTable *portal_secret_item_get_attributes(void *fn, SecretItem *item) {
    return ((GHashTable *(*)(SecretItem *))fn)(item);
}

static inline gboolean portal_secret_item_get_locked(void *fn, SecretItem *item) {
    return ((gboolean (*)(SecretItem *))fn)(item);
}

static inline gchar *portal_secret_item_get_label(void *fn, SecretItem *item) {
    return ((gchar *(*)(SecretItem *))fn)(item);
}

static inline guint64 portal_secret_item_get_modified(void *fn, SecretItem *item) {
    return ((guint64 (*)(SecretItem *))fn)(item);
}

static inline guint64 portal_secret_item_get_created(void *fn, SecretItem *item) {
    return ((guint64 (*)(SecretItem *))fn)(item);
}

static inline SecretValue *portal_secret_item_get_secret(void *fn, SecretItem *item) {
    return ((SecretValue *(*)(SecretItem *))fn)(item);
}

static inline SecretValue *portal_secret_value_new(void *fn, const gchar *secret, gssize length,
                                                   const gchar *content_type) {
    return ((SecretValue *(*)(const gchar *, gssize, const gchar *))fn)(secret, length, content_type);
}

static inline const gchar *portal_secret_value_get(void *fn, SecretValue *value, gsize *length) {
    return ((const gchar *(*)(SecretValue *, gsize *))fn)(value, length);
}

static inline void portal_secret_value_unref(void *fn, gpointer value) {
    ((void (*)(gpointer))fn)(value);
}

#endif
