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
package final class HTTPByteSource: ByteSource {
    package let size: UInt64
    package let identity: ByteSourceIdentity
    package let displayName: [UInt8]
    /// The pinned ETag; nil when the server sends none (the size is then
    /// all that is pinned).
    package let etag: [UInt8]?
    /// Bytes asked for by the first request.
    package static let headRange = 64 << 10

    private let location: RemoteLocation
    private let options: RemoteOptions
    /// The first bytes of the object, from the opening request.
    private let head: [UInt8]
    /// Idle connections; at most `options.connections` exist.
    private let idle: Mutex<[HTTPConnection]>
    /// Counts free connection slots.
    private let slots: DispatchSemaphore
    private let wasReplaced = Atomic<Bool>(false)
    private let policy: RemoteRetryPolicy

    /// What the opening request pinned, for a second process to open the
    /// same object without asking again (the mount command's daemon).
    package struct Pinned: Sendable, Equatable {
        package var size: UInt64
        package var etag: [UInt8]?
        package var head: [UInt8]
        package init(size: UInt64, etag: [UInt8]?, head: [UInt8]) {
            self.size = size
            self.etag = etag
            self.head = head
        }
    }

    /// What this source pinned when it was opened.
    package var pinned: Pinned { Pinned(size: size, etag: etag, head: head) }

    /// Takes over an object another process opened: no request is made;
    /// the first request will send `If-Match` with the pinned ETag.
    ///
    /// - Throws: `RemoteError.setup` for a head longer than the object.
    package init(location: RemoteLocation, options: RemoteOptions, pinned: Pinned) throws(RemoteError) {
        guard UInt64(pinned.head.count) <= pinned.size, pinned.head.count <= Self.headRange else {
            throw .setup("inconsistent hand-over")
        }
        self.location = location
        self.options = try Self.withCredentials(options, for: location)
        displayName = location.displayName
        policy = RemoteRetryPolicy(timeoutSeconds: options.netTimeout, retries: options.retries)
        size = pinned.size
        etag = pinned.etag
        head = pinned.head
        identity = ByteSourceIdentity(bytes: Array("\(size)/".utf8) + (pinned.etag ?? []))
        idle = Mutex([])
        slots = DispatchSemaphore(value: max(1, options.connections))
    }

    /// Opens the object at `location` with one range request.
    ///
    /// - Throws: `RemoteError`: ``RemoteError/rangesNotSupported`` for a
    ///   200, ``RemoteError/notThisBundle(_:)`` for a 416 or no total size,
    ///   ``RemoteError/forbidden`` for a 403, ``RemoteError/gaveUp(last:)``
    ///   when the server does not answer within the deadline.
    package init(location: RemoteLocation, options: RemoteOptions) throws(RemoteError) {
        self.location = location
        let options = try Self.withCredentials(options, for: location)
        self.options = options
        displayName = location.displayName
        policy = RemoteRetryPolicy(timeoutSeconds: options.netTimeout, retries: options.retries)
        let first = try HTTPConnection(location: location, options: options, ifMatch: nil)
        let credentials = location.signingRegion == nil ? nil : options.s3.credentials
        var renewed = false
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.headRange, alignment: 16)
        defer { buffer.deallocate() }
        let response = try policy.run { (timeout) throws(RemoteError) -> RemoteRetryPolicy.Outcome<HTTPConnection.Response> in
            let response = first.get(offset: 0, count: buffer.count, into: buffer, timeoutMilliseconds: timeout)
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
        size = response.totalSize ?? 0
        etag = response.etag
        head = Array(buffer.prefix(response.bodyLength))
        identity = ByteSourceIdentity(bytes: Array("\(size)/".utf8) + (response.etag ?? []))
        // The opening connection stays open for the next request, which
        // sends If-Match from now on like every other.
        guard (try? first.requireMatch(etag)) != nil else { throw .setup("libcurl refused an option") }
        idle = Mutex([first])
        slots = DispatchSemaphore(value: max(1, options.connections))
    }

    /// The deadline of a read that starts now (`--net-timeout`).
    package func deadline() -> DispatchTime { policy.deadline() }

    /// Whether the object was found replaced since it was opened.
    package var replaced: Bool { wasReplaced.load(ordering: .relaxed) }

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
    /// retries until the deadline.
    ///
    /// - Throws: `RemoteError`.
    ///
    /// - Parameter deadline: when the read that needs them gives up; by
    ///   default `--net-timeout` from now.
    package func fetch(offset: UInt64, count: Int, into buffer: UnsafeMutableRawBufferPointer,
                      deadline: DispatchTime? = nil) throws(RemoteError) {
        let deadline = deadline ?? policy.deadline()
        let credentials = location.signingRegion == nil ? nil : options.s3.credentials
        var renewed = false
        try policy.run(until: deadline) { (timeout) throws(RemoteError) -> RemoteRetryPolicy.Outcome<Void> in
            guard !replaced else { throw .replaced }
            let connection = try borrowConnection(until: deadline)
            defer { giveBack(connection) }
            let response = connection.get(offset: offset, count: count, into: buffer, timeoutMilliseconds: timeout)
            if response.certificateRefused { throw .tls(response.curlDetail.isEmpty ? response.curlMessage : response.curlDetail) }
            if let transient = Self.transientFailure(response) { return .retry(transient, after: response.retryAfter) }
            switch response.status {
            case 206: break
            case 200: throw .rangesNotSupported
            case 412, 404, 416:
                wasReplaced.store(true, ordering: .relaxed)
                throw .replaced
            case 403:
                if try Self.retryWithNewCredentials(response, credentials, renewed: &renewed) { return .retry("credentials rotated", after: 0) }
                throw .forbidden
            default: throw .status(response.status)
            }
            if let total = response.totalSize, total != size {
                wasReplaced.store(true, ordering: .relaxed)
                throw .replaced
            }
            // A server (or a cache on the way) that ignores If-Match still
            // names what it sent: another object's bytes are never used.
            if let pinned = etag, let sent = response.etag, !Self.sameEntity(pinned, sent) {
                wasReplaced.store(true, ordering: .relaxed)
                throw .replaced
            }
            guard response.rangeStart == offset, response.bodyLength == count else {
                return .retry("a short body", after: nil)
            }
            return .done(())
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

    /// A connection for one request: an idle one, or a new one while
    /// fewer than `connections` exist; waits for one until `deadline`.
    private func borrowConnection(until deadline: DispatchTime) throws(RemoteError) -> HTTPConnection {
        guard slots.wait(timeout: deadline) == .success else { throw .gaveUp(last: "no free connection") }
        if let connection = idle.withLock({ $0.popLast() }) { return connection }
        do {
            return try HTTPConnection(location: location, options: options, ifMatch: etag)
        } catch {
            slots.signal()
            throw error
        }
    }

    private func giveBack(_ connection: HTTPConnection) {
        idle.withLock { $0.append(connection) }
        slots.signal()
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
