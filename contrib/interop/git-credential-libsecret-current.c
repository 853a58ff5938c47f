/*
 * git's libsecret credential helper as Debian 12 ships its source (git 2.39), built the way
 * git 2.45 and later store and look up items: under the schema name org.git.Password, with the
 * schema name left out of searches (SECRET_SCHEMA_DONT_MATCH_NAME), so that items written under
 * either schema are found. contrib/test.sh builds it to check that git's current helper and
 * portal-token read each other's items. The helper's source itself is included, not copied.
 */
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

#undef SECRET_SCHEMA_COMPAT_NETWORK
#define SECRET_SCHEMA_COMPAT_NETWORK (&current_git_schema)

#include GIT_CREDENTIAL_LIBSECRET_SOURCE
