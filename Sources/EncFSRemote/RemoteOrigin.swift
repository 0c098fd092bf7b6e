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
        /// How many times it was set aside: a request that began before the
        /// last time is part of that outage (``failed(_:now:since:)``).
        var setAsides = 0
    }

    let location: RemoteLocation
    let options: RemoteOptions
    /// The bundle's own address sends `If-Match` with its pinned ETag.
    let sendsIfMatch: Bool
    let health: Mutex<Health>
    private let idle: Mutex<[HTTPConnection]>
    /// Every connection made, idle or lent (at most `--connections`, kept
    /// for the life of the source): all are cut when the source is set
    /// aside (``failed(_:now:since:)``). Registered once, when made, so
    /// that lending one costs no bookkeeping.
    private let made: Mutex<[HTTPConnection]>
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
        made = Mutex(connection.map { [$0] } ?? [])
        slots = ConnectionSlots(count: options.connections)
    }

    deinit { abandon.deallocate() }

    /// Whether a read may go here now (refused never; set aside only once
    /// its backoff ended and no probe is due or running, unless
    /// `ignoringBackoff`). The probe, made when the backoff ends, brings
    /// the source back: a read that tried it meanwhile waited out its
    /// share of the deadline on a source still stalled, once per backoff.
    func usable(now: UInt64, ignoringBackoff: Bool) -> Bool { usableSince(now: now, ignoringBackoff: ignoringBackoff) != nil }

    /// ``usable(now:ignoringBackoff:)``, with ``setAsideCount`` read
    /// under the same lock: what a request chosen now passes as its
    /// `since`, so that a set-aside between the choice and the request is
    /// seen (``fetch(offset:count:size:into:until:policy:priority:since:)``).
    func usableSince(now: UInt64, ignoringBackoff: Bool) -> Int? {
        health.withLock { health in
            switch health.state {
            case .refused: return nil
            case .setAside: return ignoringBackoff || (now >= health.until && !health.probing) ? health.setAsides : nil
            case .healthy, .unverified: return health.setAsides
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

    /// How many times the source was set aside so far: what a request
    /// notes before it starts (``fetch(offset:count:size:into:until:policy:priority:since:)``).
    var setAsideCount: Int { health.withLock { $0.setAsides } }

    /// Records `error`: a different bundle refuses the source for good;
    /// anything else sets it aside with a backoff.
    ///
    /// - Parameter since: ``setAsideCount`` when the failed request
    ///   began; nil: a request of its own (a probe). A request that was
    ///   already running when another one's failure set the source aside
    ///   fails with the same outage: counted as an error, but the backoff
    ///   is not doubled again. Three transfers stalled together used to
    ///   set a 4 s backoff to 16 s, and the source's probe came that late.
    func failed(_ error: RemoteError, now: UInt64, since: Int? = nil) {
        let newOutage = health.withLock { health -> Bool in
            // Another read found it first: one error, its reason kept.
            guard health.state != .refused else { return true }
            health.errors += 1
            health.lastError = error.description
            switch error {
            case .replaced, .notThisBundle:
                health.state = .refused
            default:
                if let since, since != health.setAsides, health.state == .setAside { return false }
                health.failures += 1
                health.setAsides += 1
                health.state = .setAside
                // A stalled source costs a read half its deadline: it is
                // not tried again sooner than one --net-timeout.
                let first = max(Self.firstBackoff, UInt64(options.netTimeout) * 1_000_000_000)
                let backoff = min(Self.longestBackoff, first << UInt64(min(health.failures - 1, 6)))
                health.until = now + backoff
            }
            if hasAlternatives { abandon.pointee = 1 }
            return true
        }
        // Every transfer still running here ends now, not at libcurl's next
        // progress call: until then each held a read-ahead thread (a
        // libdispatch worker) the mirror's requests waited for. Idle
        // connections go too: they lead to the same stalled server. (A
        // failure of the outage already handled cuts nothing: a probe may
        // be running by then.)
        guard hasAlternatives, newOutage else { return }
        for connection in made.withLock({ $0 }) { connection.cut() }
    }

    /// Fetches exactly `count` bytes at `offset` of an object of `size`
    /// bytes from this source, with `policy`'s retries until `deadline`.
    ///
    /// - Throws: `RemoteError`; ``RemoteError/replaced`` when the source
    ///   answers for another object (412, 404, 416, another size or ETag).
    ///
    /// - Parameters:
    ///   - priority: whether a read waits for the bytes (``ConnectionSlots``).
    ///   - since: ``setAsideCount`` when the caller chose this source; nil:
    ///     a probe, made while it is set aside.
    /// - Returns: false, with nothing sent and no error, when the source
    ///   was set aside since the caller chose it (another request failed
    ///   meanwhile, also while this one waited for a connection): the
    ///   request would stall as the others did; the caller asks the next
    ///   source.
    @discardableResult
    func fetch(offset: UInt64, count: Int, size: UInt64, into buffer: UnsafeMutableRawBufferPointer, until deadline: DispatchTime,
               policy: RemoteRetryPolicy, priority: ConnectionSlots.Priority = .read, since: Int? = nil) throws(RemoteError) -> Bool {
        let credentials = location.signingRegion == nil ? nil : options.s3.credentials
        var renewed = false
        // Transfers here may run again (a probe, a read with no other
        // source left) unless the source was set aside since it was chosen.
        guard health.withLock({ health -> Bool in
            if setAsideSince(since, health) { return false }
            abandon.pointee = 0
            return true
        }) else { return false }
        return try policy.run(until: deadline) { (timeout) throws(RemoteError) -> RemoteRetryPolicy.Outcome<Bool> in
            guard health.withLock({ $0.state }) != .refused else { throw .replaced }
            let connection = try borrowConnection(priority, until: deadline)
            defer { giveBack(connection) }
            if health.withLock({ setAsideSince(since, $0) }) { return .done(false) }
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
            return .done(true)
        }
    }

    /// Whether the source was set aside since a request that noted
    /// `since` (nil: a probe, never) chose it.
    private func setAsideSince(_ since: Int?, _ health: Health) -> Bool {
        guard let since, hasAlternatives else { return false }
        return health.setAsides != since && health.state == .setAside
    }

    /// A connection for one request: an idle one, or a new one while
    /// fewer than `connections` exist; waits for one until `deadline`.
    private func borrowConnection(_ priority: ConnectionSlots.Priority, until deadline: DispatchTime) throws(RemoteError) -> HTTPConnection {
        guard slots.acquire(priority, until: deadline) else { throw .gaveUp(last: "no free connection") }
        if let connection = idle.withLock({ $0.popLast() }) { return connection }
        do {
            let etag = sendsIfMatch ? health.withLock { $0.etag } : nil
            let connection = try HTTPConnection(location: location, options: options, ifMatch: etag,
                                                abandon: hasAlternatives ? UnsafePointer(abandon) : nil)
            made.withLock { $0.append(connection) }
            return connection
        } catch {
            slots.release()
            throw error
        }
    }

    private func giveBack(_ connection: HTTPConnection) {
        idle.withLock { $0.append(connection) }
        slots.release()
    }
}
