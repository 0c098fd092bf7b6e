/// The server's limits against clients that hold resources: what
/// libmicrohttpd enforces for encfs-serve (`--max-connections`,
/// `--timeout`).
struct ServeLimits: Sendable {
    /// Event-loop threads per listener.
    var threads: UInt32 = 2
    /// Connections at once per listener; more are refused at accept.
    var connections: UInt32 = 256
    /// Seconds a connection may be idle (a slowloris client sending a
    /// header a byte at a time is cut off when it stops for this long, and
    /// holds only a slot, never a thread, meanwhile).
    var timeoutSeconds: UInt32 = 30
    /// Memory per connection: the request line and headers must fit.
    /// libmicrohttpd clears all of it after each request of a keep-alive
    /// connection, so its size is paid per request; bodies are sent from
    /// blocks of their own (``HTTPEndpoint/blockSize``, ``BodyBuffers``).
    var memoryPerConnection = 32 * 1024
}
