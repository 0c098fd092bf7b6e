import CMicroHTTPD
import CProcess
import EncFSCore
import EncFSService
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One listener served by one libmicrohttpd daemon: the only code that
/// speaks libmicrohttpd. It hands each request to ``RequestHandler`` and
/// sends the ``Reply``; a file body goes out through ``BodyStream``.
///
/// What libmicrohttpd does here: HTTP/1.0 and 1.1 parsing, keep-alive,
/// the connection limit, idle timeouts, the per-connection memory pool
/// that bounds request headers (431/414 beyond it), `Content-Length`,
/// `Date`, HEAD without a body, and event loops on a few threads so that
/// a slow client holds a connection slot, never a thread.
/// What it does not (a request rate, a deadline for a whole header) is
/// ``ConnectionGuard``'s, reached through its connection notification.
final class HTTPEndpoint: @unchecked Sendable {
    /// Bytes libmicrohttpd asks a ``BodyStream`` for at a time: the send
    /// block it allocates with each streamed response (one read-ahead
    /// slot, so each block is one copy out of one slot).
    static let blockSize = ReadAhead.slotBytes

    let listener: Listener
    /// The reader while unlocked (``ServeControl``).
    let bundle: LockableBundle
    /// Whether a lock wipes bodies being sent (all but `unless-open`).
    let wipesBodiesAtLock: Bool
    let handler: RequestHandler
    let log: ServeLog
    /// The `--allow-*` rules for a unix socket's peers; nil when none.
    let admission: CallerAdmission?
    let requestsServed: Atomic<Int>
    /// The request rate and header deadline per connection.
    let connections: ConnectionGuard
    /// Decrypts large bodies ahead of the sender (shared by the server's
    /// endpoints).
    let readAhead: ReadAhead?
    /// Buffers for whole small bodies (shared likewise).
    let bodies: BodyBuffers
    /// Set once by ``start(_:)``, read by ``stop(deadline:)``: both on the
    /// main thread.
    private var daemon: OpaquePointer?

    init(listener: Listener, bundle: LockableBundle, wipesBodiesAtLock: Bool, handler: RequestHandler, log: ServeLog,
         admission: CallerAdmission?, connections: ConnectionGuard, readAhead: ReadAhead?, bodies: BodyBuffers) {
        self.listener = listener
        self.readAhead = readAhead
        self.bodies = bodies
        self.connections = connections
        self.bundle = bundle
        self.wipesBodiesAtLock = wipesBodiesAtLock
        self.handler = handler
        self.log = log
        self.admission = admission
        requestsServed = Atomic(0)
    }

    /// Starts serving the listener.
    ///
    /// - Throws: `BundleError.io` when libmicrohttpd cannot start.
    func start(_ limits: ServeLimits) throws {
        let me = Unmanaged.passUnretained(self).toOpaque()
        daemon = cmhd_start(listener.fd, limits.threads, limits.connections, limits.timeoutSeconds,
                            limits.memoryPerConnection, accessThunk, me, completedThunk, me, notifyThunk, me)
        guard daemon != nil else {
            throw BundleError.io(errno: errno == 0 ? EINVAL : errno, operation: "start HTTP server on", path: Array(listener.display.utf8))
        }
    }

    /// Stops taking connections, lets the ones open finish until
    /// `deadline`, then stops.
    func stop(deadline: ContinuousClock.Instant) {
        guard let daemon else { return }
        _ = MHD_quiesce_daemon(daemon)
        while cmhd_current_connections(daemon) > 0, ContinuousClock.now < deadline {
            usleep(20_000)
        }
        MHD_stop_daemon(daemon)
        self.daemon = nil
    }

    /// One request: checks the peer (unix sockets with rules), asks the
    /// handler, queues the reply.
    ///
    /// libmicrohttpd calls this once the headers are in, then again for
    /// each piece of a request body and once after the body. A reply
    /// queued at the first call makes it close the connection (it cannot
    /// tell where the next request starts), so GET and HEAD are answered
    /// at the last call, keeping the connection alive; any other method is
    /// answered 405 at once, its body never read, and the connection ends.
    fileprivate func answer(_ connection: OpaquePointer, url: UnsafePointer<CChar>, method: UnsafePointer<CChar>,
                            uploadSize: UnsafeMutablePointer<Int>?, state: UnsafeMutablePointer<UnsafeMutableRawPointer?>) -> MHD_Result {
        // The first call of each request: the rate of its connection.
        if state.pointee == nil, let context = cmhd_connection_context(connection),
           !connections.requestStarted(Unmanaged<ConnectionGuard.Connection>.fromOpaque(context).takeUnretainedValue()) {
            return queue(Reply(429, headers: [("Connection", "close")]), on: connection, reader: nil)
        }
        // Compared as C strings: nothing allocated on the first call.
        let readsOnly = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0
        if state.pointee == nil, readsOnly {
            state.pointee = UnsafeMutableRawPointer(bitPattern: 1)
            return .YES
        }
        if let uploadSize, uploadSize.pointee != 0 {
            uploadSize.pointee = 0
            return .YES
        }
        guard peerAdmitted(connection) else { return queue(Reply(403), on: connection, reader: nil) }
        // The gate is held until the reply is queued: a lock waits for it,
        // and a body registered by then is wiped by the lock.
        return bundle.withGate { reader in
            if reader != nil { bundle.activity.touch() }
            // withCString: a short Swift string passed to C as an argument
            // is copied to the heap first, on every request.
            let reply = handler.reply(reader: reader, method: bytes(method), target: bytes(url), hosts: listener.hosts) { name in
                name.withCString { MHD_lookup_connection_value(connection, .HEADER_KIND, $0) }.map { bytes($0) }
            }
            return queue(reply, on: connection, reader: reader)
        }
    }

    /// Whether the peer passes the access rules: `SO_PEERCRED` of the
    /// connection's socket, through the policy the mount uses.
    private func peerAdmitted(_ connection: OpaquePointer) -> Bool {
        guard let admission else { return true }
        var pid: pid_t = 0
        var uid: uid_t = 0
        var gid: gid_t = 0
        let fd = cmhd_connection_fd(connection)
        guard fd >= 0, cprocess_peer_credentials(fd, &pid, &uid, &gid) == 0 else { return false }
        return admission.admits(uid: uid, gid: gid, pid: pid)
    }

    /// Turns `reply` into a libmicrohttpd response and queues it; a file
    /// body reads from `reader`.
    private func queue(_ reply: Reply, on connection: OpaquePointer, reader: BundleReader?) -> MHD_Result {
        let response: OpaquePointer?
        switch reply.body {
        case .empty:
            response = MHD_create_response_from_buffer(0, nil, .RESPMEM_PERSISTENT)
        case .bytes(let page):
            response = page.withUnsafeBytes {
                MHD_create_response_from_buffer($0.count, UnsafeMutableRawPointer(mutating: $0.baseAddress), .RESPMEM_MUST_COPY)
            }
        case .file(let entry, let start, let length) where length <= UInt64(BodyBuffers.bodyBytes):
            // Whole, before the headers: sent with them in one call.
            guard let reader else { return queue(Reply(500), on: connection, reader: nil) }
            let (base, body) = bodies.take()
            guard BodyBuffers.fill(body, base: base, reader: reader, entry: entry, start: start, length: Int(length), log: log) else {
                BodyBuffers.giveBack(base)
                return queue(Reply(500), on: connection, reader: nil)
            }
            response = MHD_create_response_from_buffer_with_free_callback_cls(Int(length), body.baseAddress, bufferReleaseThunk,
                                                                              base)
            if response == nil { BodyBuffers.giveBack(base) }
        case .file(let entry, let start, let length):
            guard let reader, let key = try? reader.fileKey(for: entry) else { return queue(Reply(500), on: connection, reader: nil) }
            let stream = BodyStream(bundle: bundle, reader: reader, entry: entry, key: key, start: start, length: length, log: log,
                                    readAhead: readAhead)
            if wipesBodiesAtLock { bundle.register(stream) }
            response = MHD_create_response_from_callback(length, Self.blockSize, bodyThunk,
                                                         Unmanaged.passRetained(stream).toOpaque(), releaseThunk)
        }
        guard let response else { return .NO }
        defer { MHD_destroy_response(response) }
        for (name, value) in reply.headers {
            _ = name.withCString { name in value.withCString { MHD_add_response_header(response, name, $0) } }
        }
        return MHD_queue_response(connection, reply.status, response)
    }
}

/// The bytes of a C string.
private func bytes(_ text: UnsafePointer<CChar>) -> [UInt8] {
    Array(UnsafeRawBufferPointer(start: text, count: strlen(text)))
}

/// libmicrohttpd's request callback: recovers the endpoint, answers.
private let accessThunk: MHD_AccessHandlerCallback = { cls, connection, url, method, _, _, uploadSize, state in
    guard let cls, let connection, let url, let method, let state else { return .NO }
    let endpoint = Unmanaged<HTTPEndpoint>.fromOpaque(cls).takeUnretainedValue()
    return endpoint.answer(connection, url: url, method: method, uploadSize: uploadSize, state: state)
}

/// Counts requests answered (`encfs-ctl status`, the tests); the
/// connection's wait for its next header starts.
private let completedThunk: MHD_RequestCompletedCallback = { cls, connection, _, _ in
    guard let cls else { return }
    let endpoint = Unmanaged<HTTPEndpoint>.fromOpaque(cls).takeUnretainedValue()
    endpoint.requestsServed.add(1, ordering: .relaxed)
    if let connection, let context = cmhd_connection_context(connection) {
        endpoint.connections.requestDone(Unmanaged<ConnectionGuard.Connection>.fromOpaque(context).takeUnretainedValue())
    }
}

/// A connection opens (its ``ConnectionGuard/Connection`` is kept as its
/// socket context) or closes (before libmicrohttpd closes its socket).
private let notifyThunk: MHD_NotifyConnectionCallback = { cls, connection, context, code in
    guard let cls, let connection, let context else { return }
    let endpoint = Unmanaged<HTTPEndpoint>.fromOpaque(cls).takeUnretainedValue()
    // MHD_CONNECTION_NOTIFY_STARTED (0; the C enum is not imported by name).
    if code.rawValue == 0 {
        let made = endpoint.connections.opened(fd: cmhd_connection_fd(connection))
        context.pointee = Unmanaged.passRetained(made).toOpaque()
    } else if let kept = context.pointee {
        endpoint.connections.closed(Unmanaged<ConnectionGuard.Connection>.fromOpaque(kept).takeRetainedValue())
        context.pointee = nil
    }
}

/// libmicrohttpd's body callback: fills its buffer from the stream.
private let bodyThunk: MHD_ContentReaderCallback = { cls, position, buffer, max in
    guard let cls, let buffer else { return -2 }
    let stream = Unmanaged<BodyStream>.fromOpaque(cls).takeUnretainedValue()
    return stream.fill(from: position, into: UnsafeMutableRawBufferPointer(start: buffer, count: max))
}

/// Ends a body's stream (unregistered from the lock, its read-ahead
/// slots wiped and back to the pool) and releases it when its response
/// is done.
private let releaseThunk: MHD_ContentReaderFreeCallback = { cls in
    guard let cls else { return }
    Unmanaged<BodyStream>.fromOpaque(cls).takeUnretainedValue().finish()
    Unmanaged<BodyStream>.fromOpaque(cls).release()
}

/// Returns a small body's buffer when its response is done.
private let bufferReleaseThunk: MHD_ContentReaderFreeCallback = { cls in
    guard let cls else { return }
    BodyBuffers.giveBack(cls)
}
