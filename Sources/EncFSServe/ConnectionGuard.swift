import EncFSCore
import EncFSService
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The per-connection limits libmicrohttpd does not have, kept for
/// ``HTTPEndpoint`` (which reaches this through its connection
/// notifications and never lets libmicrohttpd types in here):
///
/// - a request rate (`--max-request-rate`): requests a connection may
///   start per second of the monotonic clock; the one over it is answered
///   429 and the connection closed;
/// - a header deadline (`--header-timeout`): a connection waiting for a
///   request (since it opened, or since its last response ended) is shut
///   down once it has waited that long without a complete request header.
///   libmicrohttpd's own timeout (`--timeout`) counts idle time only, which
///   a slowloris client resets with every byte it trickles; this counts
///   from the start of the wait, whatever arrives. An idle keep-alive
///   connection is therefore closed after the shorter of the two.
///
/// A shutdown (`shutdown(2)`, never `close`) makes libmicrohttpd see the
/// connection end and close it itself; it is done holding the mutex that
/// the close notification takes before libmicrohttpd closes the
/// descriptor, so a descriptor number already reused is never touched.
final class ConnectionGuard: Sendable {
    /// One connection, made when libmicrohttpd opens it.
    ///
    /// `@unchecked Sendable`: `windowStart` and `windowCount` are touched
    /// only by the connection's own libmicrohttpd thread; `waitingSince`
    /// is atomic (the reaper reads it).
    final class Connection: @unchecked Sendable {
        let fd: Int32
        /// Monotonic seconds when it began to wait for a request header;
        /// -1 while a request is being answered.
        let waitingSince: Atomic<Int>
        fileprivate var windowStart = 0
        fileprivate var windowCount = 0

        init(fd: Int32, now: Int) {
            self.fd = fd
            waitingSince = Atomic(now)
        }
    }

    /// Requests a connection may start per second; 0: no limit.
    let requestsPerSecond: Int
    /// Seconds a connection may wait for a complete request header.
    let headerSeconds: Int
    private let open = Mutex<[ObjectIdentifier: Connection]>([:])
    private let stopping = Atomic<Bool>(false)
    /// The reaper thread; written by start and stop, both on the main
    /// thread.
    nonisolated(unsafe) private var thread: pthread_t?

    init(requestsPerSecond: Int, headerSeconds: Int) {
        self.requestsPerSecond = requestsPerSecond
        self.headerSeconds = headerSeconds
    }

    /// A connection opened on `fd`.
    func opened(fd: Int32) -> Connection {
        let connection = Connection(fd: fd, now: ActivityClock.now())
        open.withLock { $0[ObjectIdentifier(connection)] = connection }
        return connection
    }

    /// The connection is closing: called before libmicrohttpd closes its
    /// descriptor.
    func closed(_ connection: Connection) {
        _ = open.withLock { $0.removeValue(forKey: ObjectIdentifier(connection)) }
    }

    /// A request's header is in: its wait ends. Returns false when it is
    /// one more than the connection's rate allows this second.
    func requestStarted(_ connection: Connection) -> Bool {
        connection.waitingSince.store(-1, ordering: .relaxed)
        guard requestsPerSecond > 0 else { return true }
        let now = ActivityClock.now()
        if now != connection.windowStart {
            connection.windowStart = now
            connection.windowCount = 0
        }
        connection.windowCount += 1
        return connection.windowCount <= requestsPerSecond
    }

    /// A response has ended: the wait for the next header starts.
    func requestDone(_ connection: Connection) {
        connection.waitingSince.store(ActivityClock.now(), ordering: .relaxed)
    }

    /// Shuts down every connection that has waited too long for a header.
    func reap() {
        let now = ActivityClock.now()
        open.withLock { connections in
            for connection in connections.values {
                let since = connection.waitingSince.load(ordering: .relaxed)
                if since >= 0, now - since >= headerSeconds {
                    _ = shutdown(connection.fd, Int32(SHUT_RDWR))
                }
            }
        }
    }

    /// Starts the reaper thread (every 250 ms), every signal blocked
    /// (``ServiceThread``: they belong to the main thread's `sigwait`).
    ///
    /// - Throws: `BundleError.io` when no thread can be made.
    func start() throws {
        thread = try ServiceThread.start(named: "encfs-reaper", operation: "start connection reaper thread") { [self] in
            while !stopping.load(ordering: .relaxed) {
                reap()
                usleep(250_000)
            }
        }
    }

    /// Ends the reaper thread.
    func stop() {
        stopping.store(true, ordering: .relaxed)
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }
}
