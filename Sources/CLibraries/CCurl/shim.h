#ifndef PORTAL_TOKEN_CCURL_SHIM_H
#define PORTAL_TOKEN_CCURL_SHIM_H

#include <curl/curl.h>

/*
 * libcurl is loaded with dlopen the first time a request is made, not linked: linking it puts
 * libcurl and the forty-odd libraries it needs (OpenSSL, nghttp2, libssh2, LDAP, Kerberos, …)
 * into every invocation, including the credential-helper `get` that git runs on every fetch and
 * that never touches the network. The Swift side resolves each function with dlsym and calls it
 * through these wrappers, which take the resolved address as `fn`.
 *
 * curl_easy_setopt and curl_easy_getinfo are C variadic functions, which Swift cannot call: the
 * typed wrappers below, one per argument kind libcurl documents (long, pointer, curl_off_t,
 * callback), call them with the exact type libcurl reads for each option. Calling through a
 * pointer of the variadic type keeps the C calling convention right.
 */

typedef CURLcode (*portal_curl_setopt_fn)(CURL *, CURLoption, ...);
typedef CURLcode (*portal_curl_getinfo_fn)(CURL *, CURLINFO, ...);

static inline CURLcode portal_curl_global_init(void *fn, long flags) {
    return ((CURLcode (*)(long))fn)(flags);
}

static inline CURL *portal_curl_easy_init(void *fn) {
    return ((CURL *(*)(void))fn)();
}

static inline void portal_curl_easy_cleanup(void *fn, CURL *handle) {
    ((void (*)(CURL *))fn)(handle);
}

static inline void portal_curl_easy_reset(void *fn, CURL *handle) {
    ((void (*)(CURL *))fn)(handle);
}

static inline CURLcode portal_curl_easy_perform(void *fn, CURL *handle) {
    return ((CURLcode (*)(CURL *))fn)(handle);
}

static inline const char *portal_curl_easy_strerror(void *fn, CURLcode code) {
    return ((const char *(*)(CURLcode))fn)(code);
}

static inline struct curl_slist *portal_curl_slist_append(void *fn, struct curl_slist *list, const char *text) {
    return ((struct curl_slist *(*)(struct curl_slist *, const char *))fn)(list, text);
}

static inline void portal_curl_slist_free_all(void *fn, struct curl_slist *list) {
    ((void (*)(struct curl_slist *))fn)(list);
}

static inline CURLcode portal_curl_setopt_long(void *fn, CURL *handle, CURLoption option, long value) {
    return ((portal_curl_setopt_fn)fn)(handle, option, value);
}

static inline CURLcode portal_curl_setopt_pointer(void *fn, CURL *handle, CURLoption option, const void *value) {
    return ((portal_curl_setopt_fn)fn)(handle, option, value);
}

static inline CURLcode portal_curl_setopt_off_t(void *fn, CURL *handle, CURLoption option, curl_off_t value) {
    return ((portal_curl_setopt_fn)fn)(handle, option, value);
}

static inline CURLcode portal_curl_setopt_write_callback(void *fn, CURL *handle, CURLoption option,
                                                         curl_write_callback callback) {
    return ((portal_curl_setopt_fn)fn)(handle, option, callback);
}

static inline CURLcode portal_curl_setopt_prereq_callback(void *fn, CURL *handle, curl_prereq_callback callback) {
    return ((portal_curl_setopt_fn)fn)(handle, CURLOPT_PREREQFUNCTION, callback);
}

static inline CURLcode portal_curl_getinfo_long(void *fn, CURL *handle, CURLINFO info, long *value) {
    return ((portal_curl_getinfo_fn)fn)(handle, info, value);
}

static inline CURLcode portal_curl_getinfo_off_t(void *fn, CURL *handle, CURLINFO info, curl_off_t *value) {
    return ((portal_curl_getinfo_fn)fn)(handle, info, value);
}

static inline CURLcode portal_curl_setopt_sockopt_callback(void *fn, CURL *handle, curl_sockopt_callback callback) {
    return ((portal_curl_setopt_fn)fn)(handle, CURLOPT_SOCKOPTFUNCTION, callback);
}

static inline CURLcode portal_curl_getinfo_string(void *fn, CURL *handle, CURLINFO info, char **value) {
    return ((portal_curl_getinfo_fn)fn)(handle, info, value);
}

#endif
