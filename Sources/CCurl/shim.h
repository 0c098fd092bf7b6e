#ifndef ENCFS_CCURL_SHIM_H
#define ENCFS_CCURL_SHIM_H

// libcurl is loaded with dlopen when a remote bundle is opened, not linked:
// linked, it and its dependencies (TLS, Kerberos, LDAP, IDN…) added about
// 4 MiB to the resident memory of every mount daemon, remote or not. Only
// the types and constants come from this header.
#include <curl/curl.h>
#include <malloc.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

// curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot
// call: one typed helper per argument type, calling the loaded function
// (`fn`, from dlsym) through its variadic prototype.
typedef CURLcode (*ccurl_variadic_fn)(CURL *, int, ...);

static inline CURLcode ccurl_setopt_long(void *fn, CURL *handle, CURLoption option, long value) {
    return ((ccurl_variadic_fn)fn)(handle, (int)option, value);
}
static inline CURLcode ccurl_setopt_string(void *fn, CURL *handle, CURLoption option, const char *value) {
    return ((ccurl_variadic_fn)fn)(handle, (int)option, value);
}
static inline CURLcode ccurl_setopt_pointer(void *fn, CURL *handle, CURLoption option, void *value) {
    return ((ccurl_variadic_fn)fn)(handle, (int)option, value);
}
static inline CURLcode ccurl_getinfo_long(void *fn, CURL *handle, CURLINFO info, long *value) {
    return ((ccurl_variadic_fn)fn)(handle, (int)info, value);
}

// The transfer's sinks, in C so that no Swift closure crosses into libcurl:
// the body goes into the caller's buffer (a body longer than the buffer
// stops the transfer: never more than was asked for is accepted), the
// response headers into a block the caller parses afterwards, and
// libcurl's own text for a failure (CURLOPT_ERRORBUFFER: "SSL certificate
// problem: …" says more than the error code's text).
struct ccurl_sink {
    char error[CURL_ERROR_SIZE];
    unsigned char *body;
    size_t body_capacity;
    size_t body_length;
    int body_overflow;
    char *headers;
    size_t headers_capacity;
    size_t headers_length;
    /* Set (to nonzero, by another thread) when the transfer's source was
       set aside: the transfer in flight ends at the next progress call
       rather than waiting out its stall (NULL: never). */
    const volatile int *abandon;
    /* The sockets libcurl opened for this handle and has not closed yet
       (-1: none), under socket_lock, so that another thread can cut them
       (ccurl_sink_cut) without ever touching a descriptor number the
       process reused: a socket is closed, and its slot cleared, under the
       same lock. Two slots: a connect may try two addresses at once. */
    pthread_mutex_t socket_lock;
    int sockets[2];
};

// The sink's socket lock and slots (before ccurl_set_sink); ccurl_sink_destroy
// after the handle was cleaned up (which closes its sockets through
// ccurl_close_socket).
static inline void ccurl_sink_init(struct ccurl_sink *sink) {
    pthread_mutex_init(&sink->socket_lock, NULL);
    sink->sockets[0] = -1;
    sink->sockets[1] = -1;
}
static inline void ccurl_sink_destroy(struct ccurl_sink *sink) {
    pthread_mutex_destroy(&sink->socket_lock);
}

// CURLOPT_OPENSOCKETFUNCTION: the socket libcurl would open (close-on-exec),
// recorded in a free slot (none free: not recorded, and then not cut).
static inline curl_socket_t ccurl_open_socket(void *userdata, curlsocktype purpose, struct curl_sockaddr *address) {
    (void)purpose;
    struct ccurl_sink *sink = (struct ccurl_sink *)userdata;
    int fd = socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
    if (fd < 0) return CURL_SOCKET_BAD;
    pthread_mutex_lock(&sink->socket_lock);
    for (int i = 0; i < 2; i++) {
        if (sink->sockets[i] < 0) {
            sink->sockets[i] = fd;
            break;
        }
    }
    pthread_mutex_unlock(&sink->socket_lock);
    return fd;
}

// CURLOPT_CLOSESOCKETFUNCTION: closes the socket and clears its slot, both
// under the lock a cut takes.
static inline int ccurl_close_socket(void *userdata, curl_socket_t fd) {
    struct ccurl_sink *sink = (struct ccurl_sink *)userdata;
    pthread_mutex_lock(&sink->socket_lock);
    for (int i = 0; i < 2; i++) {
        if (sink->sockets[i] == fd) sink->sockets[i] = -1;
    }
    int rc = close(fd);
    pthread_mutex_unlock(&sink->socket_lock);
    return rc;
}

// Ends the handle's transfer in flight at once, from any thread: shutdown
// wakes libcurl's poll with an end of stream (or fails its connect), so the
// transfer fails now instead of at libcurl's next progress call, about a
// second later while no data flows. The socket stays open for libcurl to
// close; a kept-alive connection is found dead and replaced on next use.
static inline void ccurl_sink_cut(struct ccurl_sink *sink) {
    pthread_mutex_lock(&sink->socket_lock);
    for (int i = 0; i < 2; i++) {
        if (sink->sockets[i] >= 0) shutdown(sink->sockets[i], SHUT_RDWR);
    }
    pthread_mutex_unlock(&sink->socket_lock);
}

static inline int ccurl_progress(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    (void)dltotal; (void)dlnow; (void)ultotal; (void)ulnow;
    const struct ccurl_sink *sink = (const struct ccurl_sink *)userdata;
    return sink->abandon != NULL && *sink->abandon != 0;
}

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

static inline CURLcode ccurl_set_sink(void *setopt, CURL *handle, struct ccurl_sink *sink) {
    ccurl_variadic_fn fn = (ccurl_variadic_fn)setopt;
    CURLcode rc = fn(handle, (int)CURLOPT_WRITEFUNCTION, ccurl_write_body);
    if (rc == CURLE_OK) rc = fn(handle, (int)CURLOPT_WRITEDATA, (void *)sink);
    if (rc == CURLE_OK) rc = fn(handle, (int)CURLOPT_HEADERFUNCTION, ccurl_write_header);
    if (rc == CURLE_OK) rc = fn(handle, (int)CURLOPT_HEADERDATA, (void *)sink);
    if (rc == CURLE_OK) rc = fn(handle, (int)CURLOPT_ERRORBUFFER, sink->error);
    if (rc == CURLE_OK) rc = fn(handle, (int)CURLOPT_OPENSOCKETFUNCTION, ccurl_open_socket);
    if (rc == CURLE_OK) rc = fn(handle, (int)CURLOPT_OPENSOCKETDATA, (void *)sink);
    if (rc == CURLE_OK) rc = fn(handle, (int)CURLOPT_CLOSESOCKETFUNCTION, ccurl_close_socket);
    if (rc == CURLE_OK) rc = fn(handle, (int)CURLOPT_CLOSESOCKETDATA, (void *)sink);
    if (rc == CURLE_OK && sink->abandon != NULL) {
        rc = fn(handle, (int)CURLOPT_XFERINFOFUNCTION, ccurl_progress);
        if (rc == CURLE_OK) rc = fn(handle, (int)CURLOPT_XFERINFODATA, (void *)sink);
        if (rc == CURLE_OK) rc = fn(handle, (int)CURLOPT_NOPROGRESS, 0L);
    }
    return rc;
}

// The failure text of the last transfer ("" when none).
static inline const char *ccurl_sink_error(const struct ccurl_sink *sink) {
    return sink->error;
}

// libcurl copies what it sends (the request line and every header line,
// Authorization and x-amz-security-token among them) into buffers of its
// own (the request's dynbuf; over TLS also the handle's upload buffer) and
// frees them without wiping. curl_global_init_mem gives it this allocator,
// which wipes every block it frees or moves (realloc), so that no freed
// libcurl buffer keeps a past request's signature or session token.
// Blocks come from malloc: malloc_usable_size is their whole extent.
static inline void ccurl_wiping_free(void *block) {
    if (block == NULL) return;
    explicit_bzero(block, malloc_usable_size(block));
    free(block);
}
static inline void *ccurl_wiping_malloc(size_t size) { return malloc(size); }
static inline void *ccurl_wiping_calloc(size_t count, size_t size) { return calloc(count, size); }
static inline void *ccurl_wiping_realloc(void *block, size_t size) {
    if (block == NULL) return malloc(size);
    if (size == 0) {
        ccurl_wiping_free(block);
        return NULL;
    }
    size_t usable = malloc_usable_size(block);
    if (size <= usable) return block;
    void *moved = malloc(size);
    if (moved == NULL) return NULL;
    memcpy(moved, block, usable);
    ccurl_wiping_free(block);
    return moved;
}
static inline char *ccurl_wiping_strdup(const char *text) {
    size_t length = strlen(text) + 1;
    char *copy = malloc(length);
    if (copy != NULL) memcpy(copy, text, length);
    return copy;
}

typedef CURLcode (*ccurl_global_init_mem_fn)(long, curl_malloc_callback, curl_free_callback, curl_realloc_callback,
                                             curl_strdup_callback, curl_calloc_callback);

// curl_global_init_mem (`fn`, from dlsym) with the wiping allocator.
static inline CURLcode ccurl_global_init_wiping(void *fn, long flags) {
    return ((ccurl_global_init_mem_fn)fn)(flags, ccurl_wiping_malloc, ccurl_wiping_free, ccurl_wiping_realloc,
                                          ccurl_wiping_strdup, ccurl_wiping_calloc);
}

// Wipes every line of a header list (libcurl's copies, made by
// curl_slist_append) before curl_slist_free_all frees it: the lines hold
// secrets (--header-file values, a request's signature and session token).
static inline void ccurl_slist_wipe(struct curl_slist *list) {
    for (; list != NULL; list = list->next) {
        if (list->data != NULL) explicit_bzero(list->data, strlen(list->data));
    }
}

#endif
