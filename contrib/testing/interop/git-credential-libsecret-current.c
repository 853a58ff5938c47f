/*
 * git's libsecret credential helper as git 2.43 and later behave, built from the helper source
 * Debian 12 ships (git 2.39). contrib/test.sh builds it to check that git's current helper and
 * portal-token read each other's items. The helper's source itself is included, not copied; the
 * differences of the current helper are added around it:
 *
 * - items are stored under the schema name org.git.Password, and searches leave the schema name
 *   out (SECRET_SCHEMA_DONT_MATCH_NAME), so items written under either schema are found;
 * - the secret holds the password on its first line, then a password_expiry_utc=… line and an
 *   oauth_refresh_token=… line when the credential has them; reading takes the first line as
 *   the password, prints those two attributes after it, and ignores every other line;
 * - an erase that carries a password removes nothing when the stored password (the first line
 *   of the first match) differs from it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <glib.h>
#include <libsecret/secret.h>

static const SecretSchema current_git_schema = {
	"org.git.Password",
	SECRET_SCHEMA_DONT_MATCH_NAME,
	{
		{ "user", SECRET_SCHEMA_ATTRIBUTE_STRING },
		{ "object", SECRET_SCHEMA_ATTRIBUTE_STRING },
		{ "protocol", SECRET_SCHEMA_ATTRIBUTE_STRING },
		{ "port", SECRET_SCHEMA_ATTRIBUTE_INTEGER },
		{ "server", SECRET_SCHEMA_ATTRIBUTE_STRING },
		{ NULL, 0 },
	}
};

/* What the request on stdin carried that the 2.39 reader does not keep. */
static gchar *request_password, *request_expiry, *request_refresh_token;
/* The extra attributes of the item a get found, printed after username and password. */
static gchar *found_expiry, *found_refresh_token, *found_password;

/* Keeps the value of `line` in *slot when the line is `key=value` (newline excluded). */
static void take_value(const char *line, const char *key, gchar **slot)
{
	size_t key_length = strlen(key);
	if (strncmp(line, key, key_length) != 0 || line[key_length] != '=')
		return;
	g_free(*slot);
	*slot = g_strndup(line + key_length + 1, strcspn(line + key_length + 1, "\n"));
}

static char *read_request_line(char *buffer, int size, FILE *stream)
{
	char *line = fgets(buffer, size, stream);
	if (line) {
		take_value(line, "password", &request_password);
		take_value(line, "password_expiry_utc", &request_expiry);
		take_value(line, "oauth_refresh_token", &request_refresh_token);
	}
	return line;
}

static void print_found_extras(void)
{
	if (found_expiry)
		printf("password_expiry_utc=%s\n", found_expiry);
	if (found_refresh_token)
		printf("oauth_refresh_token=%s\n", found_refresh_token);
}

/* A get reads the password from the first line and the extra attributes from the others. */
static const gchar *stored_password_text(SecretValue *value)
{
	const gchar *text = secret_value_get_text(value);
	gchar **lines;
	if (!text)
		return NULL;
	lines = g_strsplit(text, "\n", -1);
	for (guint i = 1; lines[i]; i++) {
		take_value(lines[i], "password_expiry_utc", &found_expiry);
		take_value(lines[i], "oauth_refresh_token", &found_refresh_token);
	}
	g_free(found_password);
	found_password = g_strdup(lines[0]);
	g_strfreev(lines);
	static gboolean printing;
	if ((found_expiry || found_refresh_token) && !printing)
		printing = atexit(print_found_extras) == 0;
	return found_password;
}

/* A store packs the extra attributes of the request into the secret, after the password. */
static gboolean store_packed(const SecretSchema *schema, GHashTable *attributes, const gchar *collection,
			     const gchar *label, const gchar *password, GCancellable *cancellable, GError **error)
{
	gchar *packed = g_strconcat(password,
				    request_expiry ? "\npassword_expiry_utc=" : "", request_expiry ? request_expiry : "",
				    request_refresh_token ? "\noauth_refresh_token=" : "",
				    request_refresh_token ? request_refresh_token : "", NULL);
	gboolean stored = secret_password_storev_sync(schema, attributes, collection, label, packed, cancellable, error);
	g_free(packed);
	return stored;
}

/* An erase with a password leaves the slot alone when the first match holds another one. */
static gboolean clear_if_password_matches(const SecretSchema *schema, GHashTable *attributes,
					  GCancellable *cancellable, GError **error)
{
	if (request_password) {
		gboolean differs = FALSE;
		SecretService *service = secret_service_get_sync(0, NULL, error);
		GList *items;
		if (!service)
			return FALSE;
		items = secret_service_search_sync(service, schema, attributes,
						   SECRET_SEARCH_LOAD_SECRETS | SECRET_SEARCH_UNLOCK, NULL, error);
		if (items) {
			SecretValue *value = secret_item_get_secret(items->data);
			const gchar *text = value ? secret_value_get_text(value) : NULL;
			if (text) {
				size_t length = strcspn(text, "\n");
				differs = strlen(request_password) != length || strncmp(text, request_password, length) != 0;
			}
			if (value)
				secret_value_unref(value);
			g_list_free_full(items, g_object_unref);
		}
		g_object_unref(service);
		if (error && *error)
			return FALSE;
		if (differs)
			return TRUE;
	}
	return secret_password_clearv_sync(schema, attributes, cancellable, error);
}

#undef SECRET_SCHEMA_COMPAT_NETWORK
#define SECRET_SCHEMA_COMPAT_NETWORK (&current_git_schema)
#define fgets read_request_line
#define secret_value_get_text stored_password_text
#define secret_password_storev_sync store_packed
#define secret_password_clearv_sync clear_if_password_matches

#include GIT_CREDENTIAL_LIBSECRET_SOURCE
