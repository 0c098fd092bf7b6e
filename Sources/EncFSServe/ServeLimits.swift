/// The server's limits against clients that hold resources: what
/// libmicrohttpd enforces for encfs-serve (`--max-connections`,
/// `--timeout`) and what ``ConnectionGuard`` adds (`--max-request-rate`,
/// `--header-timeout`).
struct ServeLimits: Sendable {
    /// Event-loop threads per listener.
    var threads: UInt32 = 2
    /// Connections at once per listener; more are refused at accept.
    var connections: UInt32 = 256
    /// Seconds a connection may be idle (a slowloris client sending a
    /// header a byte at a time is cut off when it stops for this long, and
    /// holds only a slot, never a thread, meanwhile).
    var timeoutSeconds: UInt32 = 30
    /// Requests one connection may start per second (`--max-request-rate`;
    /// 0: no limit); the one over is answered 429 and the connection
    /// closed. The default is above what the whole server answers on
    /// loopback (docs/PERFORMANCE.md), so that no well-behaved keep-alive
    /// client (an app loading thousands of small files over one
    /// connection, wrk) is refused; lower it for clients not trusted.
    var requestsPerSecond = 50_000
    /// Seconds a connection may wait for a complete request header, from
    /// when it opened or its last response ended, whatever trickles in
    /// (`--header-timeout`): a slowloris client holds a slot this long.
    var headerSeconds = 10
    /// Memory per connection: the request line and headers must fit.
    /// libmicrohttpd clears all of it after each request of a keep-alive
    /// connection, so its size is paid per request; bodies are sent from
    /// blocks of their own (``HTTPEndpoint/blockSize``, ``BodyBuffers``).
    var memoryPerConnection = 32 * 1024
}
