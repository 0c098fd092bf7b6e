#ifndef ENCFS_CMICROHTTPD_SHIM_H
#define ENCFS_CMICROHTTPD_SHIM_H

// libmicrohttpd for encfs-serve (Sources/EncFSServe/HTTPServer.swift only).
// microhttpd.h wants these types declared before it is included.
#include <sys/types.h>
#include <sys/socket.h>
#include <stdint.h>
#include <stdarg.h>
#include <string.h>
#include <microhttpd.h>

// Percent-decoding is encfs-serve's own (RequestTarget.swift decodes once
// and refuses %00); libmicrohttpd's default would decode the URL into a C
// string first, where %00 ends it. This callback leaves it as sent.
static inline size_t cmhd_unescape_nothing(void *cls, struct MHD_Connection *connection, char *text) {
    (void)cls;
    (void)connection;
    return strlen(text);
}

// MHD_start_daemon and MHD_get_*_info are variadic, which Swift cannot
// call: one helper each for the uses encfs-serve has.
//
// Starts a daemon on `listen_fd` (bound and listening already) with
// internal threads: `threads` event loops (epoll where available), so a
// slow client holds a connection slot, never a thread. The limits:
// connections at once, seconds a connection may stay idle, memory per
// connection (request line and headers must fit in it, else 431/414).
static inline struct MHD_Daemon *cmhd_start(int listen_fd, unsigned int threads, unsigned int connection_limit,
                                            unsigned int timeout_seconds, size_t memory_limit,
                                            MHD_AccessHandlerCallback handler, void *handler_cls,
                                            MHD_RequestCompletedCallback completed, void *completed_cls,
                                            MHD_NotifyConnectionCallback notify, void *notify_cls) {
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ITC;
    return MHD_start_daemon(flags, 0, NULL, NULL, handler, handler_cls,
                            MHD_OPTION_LISTEN_SOCKET, (MHD_socket)listen_fd,
                            MHD_OPTION_THREAD_POOL_SIZE, threads,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, timeout_seconds,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
                            MHD_OPTION_UNESCAPE_CALLBACK, cmhd_unescape_nothing, NULL,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            MHD_OPTION_NOTIFY_CONNECTION, notify, notify_cls,
                            MHD_OPTION_END);
}

// The connection's socket, for SO_PEERCRED; -1 when unknown.
static inline int cmhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? (int)info->connect_fd : -1;
}

// The context the connection notification stored for `connection`
// (encfs-serve's per-connection limits); NULL when none.
static inline void *cmhd_connection_context(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

// Connections open now (requests in flight or idle keep-alive ones).
static inline unsigned int cmhd_current_connections(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return info ? info->num_connections : 0;
}

#endif
