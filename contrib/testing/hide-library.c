/*
 * Test aid: makes dlopen fail, as on a machine without the library, for every library whose
 * file name is listed in PORTAL_TOKEN_TEST_HIDE_LIBRARIES (colon-separated sonames). The
 * fallback when libsecret is not installed is tested end to end with it; libraries the program
 * is linked against are not affected.
 *
 *   cc -shared -fPIC -O2 -o hide-library.so hide-library.c -ldl
 *   LD_PRELOAD=./hide-library.so PORTAL_TOKEN_TEST_HIDE_LIBRARIES=libsecret-1.so.0 portal-token get
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

static int hidden(const char *file) {
	const char *list = getenv("PORTAL_TOKEN_TEST_HIDE_LIBRARIES");
	if (!file || !list) return 0;
	const char *slash = strrchr(file, '/');
	const char *name = slash ? slash + 1 : file;
	size_t length = strlen(name);
	for (const char *entry = list; *entry;) {
		const char *end = strchr(entry, ':');
		size_t entry_length = end ? (size_t)(end - entry) : strlen(entry);
		if (entry_length == length && strncmp(entry, name, length) == 0) return 1;
		if (!end) break;
		entry = end + 1;
	}
	return 0;
}

void *dlopen(const char *file, int mode) {
	static void *(*real)(const char *, int);
	if (!real) real = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
	if (hidden(file)) return NULL;
	return real(file, mode);
}
