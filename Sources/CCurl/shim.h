#ifndef PORTAL_TOKEN_CCURL_SHIM_H
#define PORTAL_TOKEN_CCURL_SHIM_H

#include <curl/curl.h>

/*
 * curl_easy_setopt and curl_easy_getinfo are C variadic functions, which Swift cannot call.
 * These typed wrappers, one per argument kind libcurl documents (long, pointer, curl_off_t,
 * callback), are the only C in portal-token's libcurl adapter. Each passes its argument
 * through unchanged, with the exact type libcurl reads for that option.
 */

static inline CURLcode portal_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode portal_curl_setopt_pointer(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode portal_curl_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode portal_curl_setopt_write_callback(CURL *handle, CURLoption option,
                                                         curl_write_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

static inline CURLcode portal_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode portal_curl_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode portal_curl_getinfo_string(CURL *handle, CURLINFO info, char **value) {
    return curl_easy_getinfo(handle, info, value);
}

#endif
