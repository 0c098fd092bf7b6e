#ifndef ENCFS_CCURL_SHIM_H
#define ENCFS_CCURL_SHIM_H

#include <curl/curl.h>
#include <string.h>

// curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot
// call: one typed helper per argument type.
static inline CURLcode ccurl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode ccurl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode ccurl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode ccurl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode ccurl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode ccurl_getinfo_offset(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

// The transfer's sinks, in C so that no Swift closure crosses into libcurl:
// the body goes into the caller's buffer (a body longer than the buffer
// stops the transfer: never more than was asked for is accepted), the
// response headers into a fixed block the caller parses afterwards.
struct ccurl_sink {
    unsigned char *body;
    size_t body_capacity;
    size_t body_length;
    int body_overflow;
    char *headers;
    size_t headers_capacity;
    size_t headers_length;
};

static inline size_t ccurl_write_body(char *data, size_t size, size_t count, void *userdata) {
    struct ccurl_sink *sink = (struct ccurl_sink *)userdata;
    size_t n = size * count;
    if (n > sink->body_capacity - sink->body_length) {
        sink->body_overflow = 1;
        return 0;
    }
    memcpy(sink->body + sink->body_length, data, n);
    sink->body_length += n;
    return n;
}

static inline size_t ccurl_write_header(char *data, size_t size, size_t count, void *userdata) {
    struct ccurl_sink *sink = (struct ccurl_sink *)userdata;
    size_t n = size * count;
    // A new status line (after a redirect or 100-continue) starts over.
    if (n >= 5 && memcmp(data, "HTTP/", 5) == 0) sink->headers_length = 0;
    size_t room = sink->headers_capacity - sink->headers_length;
    size_t keep = n < room ? n : room;
    memcpy(sink->headers + sink->headers_length, data, keep);
    sink->headers_length += keep;
    return n;
}

static inline CURLcode ccurl_set_sink(CURL *handle, struct ccurl_sink *sink) {
    CURLcode rc = curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, ccurl_write_body);
    if (rc == CURLE_OK) rc = curl_easy_setopt(handle, CURLOPT_WRITEDATA, (void *)sink);
    if (rc == CURLE_OK) rc = curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, ccurl_write_header);
    if (rc == CURLE_OK) rc = curl_easy_setopt(handle, CURLOPT_HEADERDATA, (void *)sink);
    return rc;
}

#endif
