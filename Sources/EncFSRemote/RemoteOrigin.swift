import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One address a remote bundle is read from: the bundle's own, or a
/// `--mirror`. It holds its kept-alive connections, the ETag it pinned, and
/// its health: what ``HTTPByteSource`` reads to pick a source, and what
/// `encfs-ctl MNT status` shows.
///
/// `@unchecked Sendable`: everything is behind a `Mutex` but the abandon
/// flag, one aligned word that libcurl's progress callback reads (volatile,
/// in C) while another thread sets or clears it; a stale read costs one
/// progress interval, never a wrong byte.
final class RemoteOrigin: @unchecked Sendable {
    /// What a source is worth now.
    enum State: String, Sendable {
        /// Serving, or not yet failed.
        case healthy
        /// Not yet checked to serve the same bundle (a mirror before its
        /// first use).
        case unverified
        /// Failed (timeout, 5xx, a short body): skipped until its backoff
        /// ends, unless no other source is left.
        case setAside = "set-aside"
        /// Serves another bundle (another size, header or index), or the
        /// object was replaced: never read again.
        case refused
    }

    struct Health: Sendable {
        var state: State
        /// Consecutive failures: the backoff doubles with each.
        var failures = 0
        /// Uptime nanoseconds until which a set-aside source is skipped.
        var until: UInt64 = 0
        var bytes: UInt64 = 0
        var errors = 0
        var lastError: String?
        /// What the source's answers must keep naming (a mirror's first
        /// ETag; the opening request's for the bundle's own address).
        var etag: [UInt8]?
        /// Whether it was found to serve the pinned bundle (size, header,
        /// index tag). Kept apart from `state`: a mirror set aside before
        /// its first check is still unchecked when it comes back.
        var verified: Bool
        /// Whether a background probe is scheduled or running
        /// (``HTTPByteSource/scheduleProbe(_:)``): one at a time. Reads
        /// leave a set-aside source to it (``usable(now:ignoringBackoff:)``).
        var probing = false
    }

    let location: RemoteLocation
    let options: RemoteOptions
    /// The bundle's own address sends `If-Match` with its pinned ETag.
    let sendsIfMatch: Bool
    let health: Mutex<Health>
    private let idle: Mutex<[HTTPConnection]>
    /// The connections lent to a request now: cut when the source is set
    /// aside (``failed(_:now:)``).
    private let lent = Mutex<[HTTPConnection]>([])
    private let slots: ConnectionSlots
    /// Nonzero while the source is set aside (one of several): its
    /// transfers in flight end at once instead of each waiting out its
    /// share of the deadline. Read by libcurl's progress callback.
    private let abandon: UnsafeMutablePointer<Int32>
    /// Whether other sources exist (only then is anything abandoned).
    let hasAlternatives: Bool

    /// Backoff of a failed source: 1 s (or `--net-timeout` when longer),
    /// doubled per failure, at most 60 s.
    static let firstBackoff: UInt64 = 1_000_000_000
    static let longestBackoff: UInt64 = 60_000_000_000

    init(location: RemoteLocation, options: RemoteOptions, state: State, etag: [UInt8]?, sendsIfMatch: Bool,
         connection: HTTPConnection? = nil, hasAlternatives: Bool = false) {
        abandon = .allocate(capacity: 1)
        abandon.initialize(to: 0)
        self.hasAlternatives = hasAlternatives
        self.location = location
        self.options = options
        self.sendsIfMatch = sendsIfMatch
        health = Mutex(Health(state: state, etag: etag, verified: state != .unverified))
        idle = Mutex(connection.map { [$0] } ?? [])
        slots = ConnectionSlots(count: options.connections)
    }

    deinit { abandon.deallocate() }

    /// Whether a read may go here now (refused never; set aside only once
    /// its backoff ended and no probe is due or running, unless
    /// `ignoringBackoff`). The probe, made when the backoff ends, brings
    /// the source back: a read that tried it meanwhile waited out its
    /// share of the deadline on a source still stalled, once per backoff.
    func usable(now: UInt64, ignoringBackoff: Bool) -> Bool {
        health.withLock { health in
            switch health.state {
            case .refused: return false
            case .setAside: return ignoringBackoff || (now >= health.until && !health.probing)
            case .healthy, .unverified: return true
            }
        }
    }

    func succeeded(bytes: Int) {
        health.withLock { health in
            health.bytes += UInt64(bytes)
            health.failures = 0
            if health.state == .setAside || health.state == .unverified { health.state = .healthy }
            abandon.pointee = 0
        }
    }

    /// Records `error`: a different bundle refuses the source for good;
    /// anything else sets it aside with a backoff.
    func failed(_ error: RemoteError, now: UInt64) {
        health.withLock { health in
            // Another read found it first: one error, its reason kept.
            guard health.state != .refused else { return }
            health.errors += 1
            health.lastError = error.description
            switch error {
            case .replaced, .notThisBundle:
                health.state = .refused
            default:
                health.failures += 1
                health.state = .setAside
                // A stalled source costs a read half its deadline: it is
                // not tried again sooner than one --net-timeout.
                let first = max(Self.firstBackoff, UInt64(options.netTimeout) * 1_000_000_000)
                let backoff = min(Self.longestBackoff, first << UInt64(min(health.failures - 1, 6)))
                health.until = now + backoff
            }
            if hasAlternatives { abandon.pointee = 1 }
        }
        // Every transfer still running here ends now, not at libcurl's next
        // progress call: until then each held a read-ahead thread (a
        // libdispatch worker) the mirror's requests waited for.
        guard hasAlternatives else { return }
        for connection in lent.withLock({ $0 }) { connection.cut() }
    }

    /// Fetches exactly `count` bytes at `offset` of an object of `size`
    /// bytes from this source, with `policy`'s retries until `deadline`.
    ///
    /// - Throws: `RemoteError`; ``RemoteError/replaced`` when the source
    ///   answers for another object (412, 404, 416, another size or ETag).
    ///
    /// - Parameter priority: whether a read waits for the bytes
    ///   (``ConnectionSlots``).
    func fetch(offset: UInt64, count: Int, size: UInt64, into buffer: UnsafeMutableRawBufferPointer, until deadline: DispatchTime,
               policy: RemoteRetryPolicy, priority: ConnectionSlots.Priority = .read) throws(RemoteError) {
        let credentials = location.signingRegion == nil ? nil : options.s3.credentials
        var renewed = false
        abandon.pointee = 0
        try policy.run(until: deadline) { (timeout) throws(RemoteError) -> RemoteRetryPolicy.Outcome<Void> in
            guard health.withLock({ $0.state }) != .refused else { throw .replaced }
            let connection = try borrowConnection(priority, until: deadline)
            defer { giveBack(connection) }
            let response = connection.get(offset: offset, count: count, into: buffer, timeoutMilliseconds: timeout)
            if response.certificateRefused { throw .tls(response.curlDetail.isEmpty ? response.curlMessage : response.curlDetail) }
            if let transient = HTTPByteSource.transientFailure(response) { return .retry(transient, after: response.retryAfter) }
            switch response.status {
            case 206: break
            case 200: throw .rangesNotSupported
            case 412, 404, 416: throw .replaced
            case 403:
                if try HTTPByteSource.retryWithNewCredentials(response, credentials, renewed: &renewed) {
                    return .retry("credentials rotated", after: 0)
                }
                throw .forbidden
            default: throw .status(response.status)
            }
            if let total = response.totalSize, total != size { throw .replaced }
            // A server (or a cache on the way) that ignores If-Match still
            // names what it sent: another object's bytes are never used.
            let pinned = health.withLock { health -> [UInt8]? in
                if health.etag == nil, !sendsIfMatch { health.etag = response.etag }
                return health.etag
            }
            if let pinned, let sent = response.etag, !HTTPByteSource.sameEntity(pinned, sent) { throw .replaced }
            guard response.rangeStart == offset, response.bodyLength == count else {
                return .retry("a short body", after: nil)
            }
            return .done(())
        }
    }

    /// A connection for one request: an idle one, or a new one while
    /// fewer than `connections` exist; waits for one until `deadline`.
    private func borrowConnection(_ priority: ConnectionSlots.Priority, until deadline: DispatchTime) throws(RemoteError) -> HTTPConnection {
        guard slots.acquire(priority, until: deadline) else { throw .gaveUp(last: "no free connection") }
        if let connection = idle.withLock({ $0.popLast() }) {
            lent.withLock { $0.append(connection) }
            return connection
        }
        do {
            let etag = sendsIfMatch ? health.withLock { $0.etag } : nil
            let connection = try HTTPConnection(location: location, options: options, ifMatch: etag,
                                                abandon: hasAlternatives ? UnsafePointer(abandon) : nil)
            lent.withLock { $0.append(connection) }
            return connection
        } catch {
            slots.release()
            throw error
        }
    }

    private func giveBack(_ connection: HTTPConnection) {
        lent.withLock { lent in lent.removeAll { $0 === connection } }
        idle.withLock { $0.append(connection) }
        slots.release()
    }
}
