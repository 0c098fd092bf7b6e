import EncFSCore
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A bundle on an HTTP server, read with one range request per read over a
/// small pool of kept-alive connections.
///
/// Opening makes one request for the first ``headRange`` bytes: its
/// `Content-Range` gives the object's size and its `ETag` is pinned; those
/// bytes are kept, so reading the header costs nothing more. Every later
/// request sends `If-Match` with the pinned ETag; a 412, 404, another
/// size or another ETag in a response (from a server that ignores
/// If-Match) means the object was replaced, and from then on every read fails
/// with ``RemoteError/replaced`` (the cache above keeps serving what it
/// holds). Transient failures are retried with exponential backoff and
/// full jitter until the read's deadline (``RemoteRetryPolicy``).
///
/// With `--mirror` addresses (``RemoteOptions/mirrors``) each read goes to
/// the first source that is not set aside (``RemoteOrigin``), and so does
/// the opening request: when the bundle's own address does not answer it,
/// the first mirror that does pins the bundle, and the own address is set
/// aside and checked like a mirror when it comes back. A mirror is
/// checked before its first use to serve the same bundle: the same size,
/// the same first ``headRange`` bytes (the header: bundle id, key slots,
/// header MAC) and the same last 16 bytes (the sealed index's GCM tag,
/// which any other index would change); ETags are not compared across
/// servers (each computes its own). A source that fails is set aside with
/// a backoff and the next one serves; each source but the last gets half
/// the time left and one attempt, so that the others can still answer
/// before the read's deadline.
package final class HTTPByteSource: ByteSource {
    package let size: UInt64
    package let identity: ByteSourceIdentity
    package let displayName: [UInt8]
    /// The pinned ETag of the source that answered the opening request
    /// (the bundle's own address unless it was down); nil when the server
    /// sends none (the size is then all that is pinned).
    package let etag: [UInt8]?
    /// Bytes asked for by the first request.
    package static let headRange = 64 << 10
    /// Bytes at the end of the object a mirror must share (the sealed
    /// index's tag).
    package static let tailLength = 16

    /// The first bytes of the object, from the opening request.
    let head: [UInt8]
    /// The last ``tailLength`` bytes, fetched at opening when there are
    /// mirrors to check against them; empty otherwise.
    let tail: [UInt8]
    /// The bundle's own address, then each `--mirror`, in order.
    let origins: [RemoteOrigin]
    let policy: RemoteRetryPolicy
    /// Where set-aside sources are probed (``scheduleProbe(_:)``).
    let probes = DispatchQueue(label: "encfs.remote.probe", attributes: .concurrent)

    /// What the opening request pinned, for a second process to open the
    /// same object without asking again (the mount command's daemon).
    package struct Pinned: Sendable, Equatable {
        package var size: UInt64
        package var etag: [UInt8]?
        package var head: [UInt8]
        /// The last bytes (when there are mirrors).
        package var tail: [UInt8]
        /// Which source answered the opening request (0: the bundle's own
        /// address, n: the n-th `--mirror`); `etag` is that source's.
        package var source: Int
        package init(size: UInt64, etag: [UInt8]?, head: [UInt8], tail: [UInt8] = [], source: Int = 0) {
            self.size = size
            self.etag = etag
            self.head = head
            self.tail = tail
            self.source = source
        }
    }

    /// What this source pinned when it was opened.
    package var pinned: Pinned { Pinned(size: size, etag: etag, head: head, tail: tail, source: answered) }

    /// Which source answered the opening request (``Pinned/source``).
    private let answered: Int

    /// Takes over an object another process opened: no request is made;
    /// the first request will send `If-Match` with the pinned ETag.
    ///
    /// - Throws: `RemoteError.setup` for a head longer than the object;
    ///   `.invalidURL` for a mirror; `.credentials`.
    package init(location: RemoteLocation, options: RemoteOptions, pinned: Pinned) throws(RemoteError) {
        guard UInt64(pinned.head.count) <= pinned.size, pinned.head.count <= Self.headRange,
              pinned.tail.count <= min(Self.tailLength, Int(clamping: pinned.size)),
              pinned.source >= 0, pinned.source <= options.mirrors.count else {
            throw .setup("inconsistent hand-over")
        }
        let options = try Self.withCredentials(options, for: location)
        displayName = location.displayName
        policy = RemoteRetryPolicy(timeoutSeconds: options.netTimeout, retries: options.retries)
        size = pinned.size
        etag = pinned.etag
        head = pinned.head
        tail = pinned.tail
        identity = ByteSourceIdentity(bytes: Array("\(size)/".utf8) + (pinned.etag ?? []))
        answered = pinned.source
        origins = try Self.origins(location, options, answered: pinned.source, etag: pinned.etag, connection: nil)
        if answered != 0 {
            // The command found it down: it waits out a backoff here too.
            origins[0].failed(.gaveUp(last: "no answer when the bundle was opened"), now: DispatchTime.now().uptimeNanoseconds)
            scheduleProbe(origins[0])
        }
    }

    /// Opens the object at `location` with one range request (two with
    /// mirrors: the last bytes too).
    ///
    /// - Throws: `RemoteError`: ``RemoteError/rangesNotSupported`` for a
    ///   200, ``RemoteError/notThisBundle(_:)`` for a 416 or no total size,
    ///   ``RemoteError/forbidden`` for a 403, ``RemoteError/gaveUp(last:)``
    ///   when the server does not answer within the deadline.
    package init(location: RemoteLocation, options: RemoteOptions) throws(RemoteError) {
        let options = try Self.withCredentials(options, for: location)
        displayName = location.displayName
        policy = RemoteRetryPolicy(timeoutSeconds: options.netTimeout, retries: options.retries)
        var candidates = [(location, options)]
        for address in options.mirrors {
            let mirror = try RemoteLocation(address, s3: options.s3)
            candidates.append((mirror, try Self.withCredentials(options, for: mirror)))
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.headRange, alignment: 16)
        defer { buffer.deallocate() }
        let opening = try Self.open(candidates, into: buffer, policy: policy)
        let response = opening.response
        let size = response.totalSize ?? 0
        self.size = size
        etag = response.etag
        head = Array(buffer.prefix(response.bodyLength))
        identity = ByteSourceIdentity(bytes: Array("\(size)/".utf8) + (response.etag ?? []))
        answered = opening.answered
        // The opening connection stays open for the next request; the own
        // address's sends If-Match from now on like every other.
        if answered == 0 { guard (try? opening.connection.requireMatch(etag)) != nil else { throw .setup("libcurl refused an option") } }
        origins = try Self.origins(location, options, answered: answered, etag: response.etag, connection: opening.connection)
        let now = DispatchTime.now().uptimeNanoseconds
        for (position, error) in opening.failures.enumerated() { origins[position].failed(error, now: now) }
        if origins.count > 1, size > UInt64(head.count) {
            let count = min(Self.tailLength, Int(size - UInt64(head.count)))
            let last = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 16)
            defer { last.deallocate() }
            try origins[answered].fetch(offset: size - UInt64(count), count: count, size: size, into: last, until: policy.deadline(),
                                        policy: policy)
            tail = Array(last)
        } else {
            tail = []
        }
        for origin in origins { scheduleProbe(origin) }
    }

    /// The opening request to each of `candidates` (the own address, then
    /// each mirror) in turn until one answers; each but the last gets half
    /// the time left and one attempt (as in ``fetchFromMirrors``).
    ///
    /// - Returns: which one answered, its connection and response, and the
    ///   failures of those before it, in order.
    /// - Throws: the own address's error when none answers.
    private static func open(_ candidates: [(RemoteLocation, RemoteOptions)], into buffer: UnsafeMutableRawBufferPointer,
                             policy: RemoteRetryPolicy) throws(RemoteError)
        -> (answered: Int, connection: HTTPConnection, response: HTTPConnection.Response, failures: [RemoteError]) {
        let deadline = policy.deadline()
        var failures: [RemoteError] = []
        for (position, (location, options)) in candidates.enumerated() {
            let othersLeft = position < candidates.count - 1
            do {
                let connection = try HTTPConnection(location: location, options: options, ifMatch: nil)
                let credentials = location.signingRegion == nil ? nil : options.s3.credentials
                let response = try openingRequest(connection, credentials: credentials, into: buffer,
                                                  policy: othersLeft ? RemoteRetryPolicy(timeoutSeconds: policy.timeoutSeconds, retries: 0) : policy,
                                                  until: othersLeft ? share(of: deadline, timeoutSeconds: policy.timeoutSeconds) : deadline)
                return (position, connection, response, failures)
            } catch {
                guard othersLeft else { throw failures.first ?? error }
                failures.append(error)
            }
        }
        preconditionFailure("internal error: no source to open")
    }

    /// One source's opening request: the first ``headRange`` bytes into
    /// `buffer`, with the size in the response.
    private static func openingRequest(_ connection: HTTPConnection, credentials: AWSCredentialSource?,
                                       into buffer: UnsafeMutableRawBufferPointer, policy: RemoteRetryPolicy,
                                       until deadline: DispatchTime) throws(RemoteError) -> HTTPConnection.Response {
        var renewed = false
        return try policy.run(until: deadline) { (timeout) throws(RemoteError) -> RemoteRetryPolicy.Outcome<HTTPConnection.Response> in
            let response = connection.get(offset: 0, count: buffer.count, into: buffer, timeoutMilliseconds: timeout)
            if response.certificateRefused { throw .tls(response.curlDetail.isEmpty ? response.curlMessage : response.curlDetail) }
            if let transient = Self.transientFailure(response) { return .retry(transient, after: response.retryAfter) }
            switch response.status {
            case 206: break
            case 200: throw .rangesNotSupported
            case 416: throw .notThisBundle("the server refused the first range (416)")
            case 403:
                if try Self.retryWithNewCredentials(response, credentials, renewed: &renewed) { return .retry("credentials rotated", after: 0) }
                throw .forbidden
            default: throw .status(response.status)
            }
            guard let total = response.totalSize, response.rangeStart == 0,
                  response.bodyLength == min(UInt64(buffer.count), total) else {
                return .retry("a short or malformed first range", after: nil)
            }
            return .done(response)
        }
    }

    /// The time a source that is not the last may take of a request due by
    /// `deadline`: half of what is left, at least a second.
    private static func share(of deadline: DispatchTime, timeoutSeconds: Int) -> DispatchTime {
        let now = DispatchTime.now()
        guard deadline != .distantFuture else { return now + .seconds(max(1, timeoutSeconds / 2)) }
        let left = deadline.uptimeNanoseconds > now.uptimeNanoseconds ? deadline.uptimeNanoseconds - now.uptimeNanoseconds : 0
        return min(deadline, DispatchTime(uptimeNanoseconds: now.uptimeNanoseconds + max(1_000_000_000, left / 2)))
    }

    /// The sources in order, the one that answered the opening request
    /// (`answered`) healthy with `etag` pinned and `connection` kept. The
    /// own address sends `If-Match` when it answered; otherwise it is
    /// checked like a mirror before its first use.
    private static func origins(_ location: RemoteLocation, _ options: RemoteOptions, answered: Int, etag: [UInt8]?,
                                connection: HTTPConnection?) throws(RemoteError) -> [RemoteOrigin] {
        let hasAlternatives = !options.mirrors.isEmpty
        var out = [answered == 0
            ? RemoteOrigin(location: location, options: options, state: .healthy, etag: etag, sendsIfMatch: true,
                           connection: connection, hasAlternatives: hasAlternatives)
            : RemoteOrigin(location: location, options: options, state: .unverified, etag: nil, sendsIfMatch: false,
                           hasAlternatives: true)]
        for (position, address) in options.mirrors.enumerated() {
            let mirror = try RemoteLocation(address, s3: options.s3)
            let options = try withCredentials(options, for: mirror)
            let opened = position + 1 == answered
            out.append(RemoteOrigin(location: mirror, options: options, state: opened ? .healthy : .unverified,
                                    etag: opened ? etag : nil, sendsIfMatch: false,
                                    connection: opened ? connection : nil, hasAlternatives: true))
        }
        return out
    }

    /// The deadline of a read that starts now (`--net-timeout`).
    package func deadline() -> DispatchTime { policy.deadline() }

    /// Whether the object was found replaced since it was opened (at
    /// every source).
    package var replaced: Bool { origins.allSatisfy { $0.health.withLock { $0.state } == .refused } }

    package func read(into buffer: UnsafeMutableRawBufferPointer, atOffset offset: UInt64) throws -> Int {
        guard offset < size, buffer.count > 0 else { return 0 }
        let count = Int(min(UInt64(buffer.count), size - offset))
        if offset + UInt64(count) <= UInt64(head.count) {
            head.withUnsafeBytes {
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[Int(offset)..<(Int(offset) + count)]))
            }
            return count
        }
        try fetch(offset: offset, count: count, into: buffer)
        return count
    }

    /// Fetches exactly `count` bytes at `offset` (within ``size``) with
    /// retries until the deadline, from the first source that answers.
    ///
    /// - Throws: `RemoteError`.
    ///
    /// - Parameter deadline: when the read that needs them gives up; by
    ///   default `--net-timeout` from now.
    ///
    /// - Parameter priority: `.background` for bytes no read waits for
    ///   (they yield the connections to reads: ``ConnectionSlots``).
    package func fetch(offset: UInt64, count: Int, into buffer: UnsafeMutableRawBufferPointer,
                      deadline: DispatchTime? = nil, priority: ConnectionSlots.Priority = .read) throws(RemoteError) {
        let deadline = deadline ?? policy.deadline()
        guard origins.count > 1 else {
            let own = origins[0]
            do {
                try own.fetch(offset: offset, count: count, size: size, into: buffer, until: deadline, policy: policy,
                              priority: priority)
            } catch {
                if case .replaced = error { own.failed(error, now: DispatchTime.now().uptimeNanoseconds) }
                throw error
            }
            own.succeeded(bytes: count)
            return
        }
        try fetchFromMirrors(offset: offset, count: count, into: buffer, deadline: deadline, priority: priority)
    }

    /// ``fetch(offset:count:into:deadline:)`` over several sources: a
    /// first pass over those not set aside, in order; then, while time is
    /// left, every source not refused, soonest backoff end first.
    private func fetchFromMirrors(offset: UInt64, count: Int, into buffer: UnsafeMutableRawBufferPointer,
                                  deadline: DispatchTime, priority: ConnectionSlots.Priority) throws(RemoteError) {
        var last = RemoteError.gaveUp(last: "no source answered")
        /// One attempt at `origin`: true when it delivered.
        /// `since`: ``RemoteOrigin/setAsideCount`` when it was chosen.
        func attempt(_ origin: RemoteOrigin, since: Int, othersLeft: Bool) throws(RemoteError) -> Bool {
            let now = DispatchTime.now()
            guard deadline == .distantFuture || now.uptimeNanoseconds + 1_000_000 < deadline.uptimeNanoseconds else { throw last }
            let until = othersLeft ? Self.share(of: deadline, timeoutSeconds: options.netTimeout) : deadline
            do {
                try verify(origin, until: until)
                // Not sent: set aside since it was chosen, its outage counted.
                guard try origin.fetch(offset: offset, count: count, size: size, into: buffer, until: until,
                                       policy: othersLeft ? RemoteRetryPolicy(timeoutSeconds: policy.timeoutSeconds, retries: 0) : policy,
                                       priority: priority, since: since) else { return false }
                origin.succeeded(bytes: count)
                return true
            } catch {
                origin.failed(error, now: DispatchTime.now().uptimeNanoseconds, since: since)
                scheduleProbe(origin)
                last = error
                return false
            }
        }
        var pass = 0
        while true {
            let now = DispatchTime.now().uptimeNanoseconds
            var tried = false
            if pass == 0 {
                // The usual case, each source in order, without building a
                // list per fetch.
                for (position, origin) in origins.enumerated() {
                    guard let since = origin.usableSince(now: now, ignoringBackoff: false) else { continue }
                    tried = true
                    let othersLeft = origins[(position + 1)...].contains { $0.usable(now: now, ignoringBackoff: false) }
                    if try attempt(origin, since: since, othersLeft: othersLeft) { return }
                }
            } else {
                let order = origins.filter { $0.usable(now: now, ignoringBackoff: true) }
                    .sorted { $0.health.withLock { $0.until } < $1.health.withLock { $0.until } }
                for (position, origin) in order.enumerated() {
                    tried = true
                    if try attempt(origin, since: origin.setAsideCount, othersLeft: position < order.count - 1) { return }
                }
            }
            if !tried {
                if origins.allSatisfy({ $0.health.withLock { $0.state } == .refused }) { throw .replaced }
                pass += 1
                continue
            }
            pass += 1
            guard deadline == .distantFuture || DispatchTime.now().uptimeNanoseconds + 100_000_000 < deadline.uptimeNanoseconds else {
                throw last
            }
            usleep(UInt32.random(in: 20_000...100_000))
        }
    }

    var options: RemoteOptions { origins[0].options }

    /// Checks, before its first use, that a source other than the one
    /// that opened the bundle serves it: the same size, first bytes and
    /// last bytes.
    ///
    /// - Throws: ``RemoteError/notThisBundle(_:)`` when it serves another.
    func verify(_ origin: RemoteOrigin, until deadline: DispatchTime) throws(RemoteError) {
        let (state, verified) = origin.health.withLock { ($0.state, $0.verified) }
        guard state != .refused else { throw .notThisBundle("a mirror serves another bundle") }
        guard !verified else { return }
        let single = RemoteRetryPolicy(timeoutSeconds: policy.timeoutSeconds, retries: 0)
        for (offset, expected) in [(UInt64(0), head), (size - UInt64(tail.count), tail)] where !expected.isEmpty {
            let got = UnsafeMutableRawBufferPointer.allocate(byteCount: expected.count, alignment: 16)
            defer { got.deallocate() }
            do {
                try origin.fetch(offset: offset, count: expected.count, size: size, into: got, until: deadline, policy: single)
            } catch .replaced {
                throw .notThisBundle("a mirror serves an object of another size")
            }
            guard expected.elementsEqual(got) else {
                throw .notThisBundle(offset == 0 ? "a mirror serves another bundle header" : "a mirror serves another index")
            }
        }
        origin.health.withLock { health in
            health.verified = true
            if health.state == .unverified { health.state = .healthy }
        }
    }

    /// Each source's state, bytes and errors, for `encfs-ctl MNT status`.
    package var sourceStatus: [(address: [UInt8], state: String, bytes: UInt64, errors: Int, lastError: String?)] {
        origins.map { origin in
            origin.health.withLock { ($0.state.rawValue, $0.bytes, $0.errors, $0.lastError) }
        }.enumerated().map { (index, health) in
            (origins[index].location.displayName, health.0, health.1, health.2, health.3)
        }
    }

    /// `options` with the credentials of an `s3://` address found (by
    /// ``AWSCredentialChain``, from the environment) when none are given.
    ///
    /// - Throws: `RemoteError.credentials` when there are none.
    static func withCredentials(_ options: RemoteOptions, for location: RemoteLocation) throws(RemoteError) -> RemoteOptions {
        guard location.signingRegion != nil, options.s3.credentials == nil else { return options }
        var options = options
        options.s3.credentials = try AWSCredentialChain.credentials(.current(), givenFile: nil)
        return options
    }

    /// What a 403 to a signed request means: true when newer credentials
    /// were found (the file changed since the request was signed, or now)
    /// and the request is worth one more try with them; nothing to do for
    /// an unsigned one (false: the caller throws ``RemoteError/forbidden``).
    ///
    /// - Throws: ``RemoteError/credentialsRefused(code:)`` when the
    ///   credentials were refused and no newer ones are there, or were
    ///   already tried once for this read.
    static func retryWithNewCredentials(_ response: HTTPConnection.Response, _ credentials: AWSCredentialSource?,
                                        renewed: inout Bool) throws(RemoteError) -> Bool {
        guard let credentials else { return false }
        if !renewed, credentials.reloadAfterRefusal(seen: response.credentialsGeneration) {
            renewed = true
            return true
        }
        throw .credentialsRefused(code: response.errorCode)
    }

    /// Whether two ETags name the same entity: equal once a weak marker
    /// (`W/`) is dropped (RFC 9110's weak comparison; a proxy that
    /// compresses may turn a strong tag weak without changing the object).
    static func sameEntity(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        func opaque(_ tag: [UInt8]) -> ArraySlice<UInt8> { tag.starts(with: Array("W/".utf8)) ? tag.dropFirst(2) : tag[...] }
        return opaque(a) == opaque(b)
    }

    /// Why `response` is worth another attempt, or nil: no answer
    /// (connect error, timeout, stall, reset), 5xx, 429, 408, or a body
    /// cut short by the connection.
    static func transientFailure(_ response: HTTPConnection.Response) -> String? {
        if response.curlCode != 0 && !response.overflowed {
            return response.status == 0 ? response.curlMessage : "\(response.curlMessage) after status \(response.status)"
        }
        switch response.status {
        case 500...599: return "status \(response.status)"
        case 429: return "status 429"
        case 408: return "status 408"
        default: return nil
        }
    }
}
