import EncFSCore
import CryptCore
import CFuse
import CUring
import Synchronization
#if canImport(Glibc)
import Glibc
import EncFSService
#endif

/// The transport of one mount: libfuse's /dev/fuse loop alone (classic),
/// or per-CPU FUSE rings beside it (uring).
///
/// libfuse 3.14 cannot speak FUSE over io_uring, but lets a session read
/// and write /dev/fuse through custom functions (`fuse_session_custom_io`,
/// installed on the fd `fuse_session_mount` opened). Those functions are
/// the whole integration:
/// - the read hook sees FUSE_INIT and notes whether the kernel offers
///   FUSE_OVER_IO_URING;
/// - the write hook adds that flag to libfuse's INIT reply (after opening
///   one ring per possible CPU, so that a ring that cannot be made means
///   classic, never a mount waiting for queues that will not come), then
///   starts the queue threads (``RingQueue``, two per queue);
/// - a reply written while a queue thread serves a ring request goes into
///   that request's entry instead of /dev/fuse.
/// Every request therefore runs the same libfuse dispatch and the same
/// operations on either transport. What still comes through /dev/fuse
/// (INIT, FORGET, INTERRUPT, requests sent before the rings were ready) is
/// served by the classic loop with fewer threads, and notifications (cache
/// invalidation at lock) are written there as before.
final class FUSETransport: @unchecked Sendable {
    // @unchecked: `session`, `fuseFD` and `poller` are set right after
    // mount, before the loop runs the hooks; the rest is behind atomics and a mutex.
    private let logger: MountLogger
    private var session: OpaquePointer?
    // Raw Int32: the FUSE descriptor is libfuse's (its session closes it),
    // and both are handed to libfuse hooks and the ring by number (C ABI).
    private var fuseFD: Int32 = -1
    private let stopFD: Int32
    /// Whether INIT should ask for the rings (uring chosen and available).
    private let wantsRings = Atomic<Bool>(false)
    /// The INIT request's unique while its reply is pending, else 0.
    private let initUnique = Atomic<UInt64>(0)
    /// Set once the queue threads run with registered entries.
    private let ringsServe = Atomic<Bool>(false)
    /// Set once a queue reported a failure (logged once).
    private let failureLogged = Atomic<Bool>(false)
    private let queues = Mutex<[RingQueue]>([])
    /// The ring entry the calling queue thread is answering, if any.
    private let entryKey: pthread_key_t
    /// The length of the request the calling classic worker read last,
    /// wiped from its buffer before it reads the next (``readRequest``).
    private let servedKey: pthread_key_t

    /// Entries per queue. A server answers one request at a time; more
    /// entries let the kernel hand the next one with the commit of the
    /// last instead of queueing it, and read-ahead sends several at once.
    static let entriesPerQueue = 4
    /// Classic loop threads while the rings serve: INIT, FORGET,
    /// INTERRUPT and anything sent before the rings were ready. (Should the
    /// kernel refuse the rings after INIT, these two serve everything.)
    static let classicThreadsBesideRings = 2

    init(logger: MountLogger) {
        self.logger = logger
        stopFD = curing_eventfd()
        var key = pthread_key_t()
        guard pthread_key_create(&key, nil) == 0 else {
            preconditionFailure("internal error: pthread_key_create failed")
        }
        entryKey = key
        guard pthread_key_create(&key, nil) == 0 else {
            preconditionFailure("internal error: pthread_key_create failed")
        }
        servedKey = key
    }

    deinit {
        stop()
        if stopFD >= 0 { close(stopFD) }
        pthread_key_delete(entryKey)
        pthread_key_delete(servedKey)
    }

    /// `uring` or `classic`: what serves now (encfs-ctl status).
    var name: String { ringsServe.load(ordering: .relaxed) ? TransportChoice.uring.rawValue : TransportChoice.classic.rawValue }

    /// The classic loop's polling reader (`--poll-us`), nil when off.
    private(set) var poller: RequestPoller?

    /// `--poll-us` for the rings' servers, 0 when they never poll.
    private var ringPollMicroseconds = 0

    /// Requests found by polling since mount: by the classic loop's
    /// poller and by the rings' servers.
    var polledRequests: Int {
        (poller?.polledRequests.load(ordering: .relaxed) ?? 0) + queues.withLock { $0.reduce(0) { $0 + $1.polledRequests } }
    }

    /// Ring servers answering requests now, all queues together: a lone
    /// reader's request is taken while no other is being served (polling
    /// starts), and one that finds another served means concurrency
    /// (polling stops).
    let ringServersBusy = Atomic<Int>(0)

    /// Requests the rings served since mount.
    var ringRequests: Int { queues.withLock { $0.reduce(0) { $0 + $1.served } } }

    /// Whether the classic loop should run with few threads.
    var expectsRings: Bool { wantsRings.load(ordering: .relaxed) }

    /// Decides the transport before mounting: probes FUSE over io_uring
    /// when it was asked for and logs the outcome.
    ///
    /// The default is classic: on the 2-CPU machines measured, sequential
    /// reads over the rings did not reach the classic loop's
    /// (docs/PERFORMANCE.md, "Transports").
    ///
    /// - Parameter request: `--transport`, or the default.
    /// - Throws: `MountError.transportUnavailable` when uring was required
    ///   and is not available.
    /// - Parameter classicReason: why this mount needs the classic loop
    ///   (``MountSession/classicReason(autoUnmount:waitsOnNetwork:)``), or
    ///   nil; uring required with one is refused (the command line
    ///   refuses it first, as a usage error).
    func choose(_ request: TransportRequest, classicReason: String? = nil) throws {
        guard request == .required(.uring) else { return }
        if let classicReason { throw MountError.transportUnavailable(reason: classicReason) }
        switch UringAvailability.probe() {
        case .available(let enabled):
            if enabled {
                logger.log("info", "turned on \(UringAvailability.parameterPath) for FUSE over io_uring (it was off)")
            }
            wantsRings.store(true, ordering: .relaxed)
        case .unavailable(let reason):
            throw MountError.transportUnavailable(reason: reason)
        }
    }

    /// Routes the session's /dev/fuse traffic through the hooks once
    /// mounted (`fuse_session_mount` opened the fd): the rings' when they
    /// are wanted (whose helpers then poll when `ringPollMicroseconds` is
    /// not 0), else the classic loop's, through the poller when
    /// `pollMicroseconds` is not 0. Every read hook wipes the request its
    /// worker served last (``readRequest(_:_:_:_:)``).
    ///
    /// - Parameters:
    ///   - pollMicroseconds: `--poll-us`, 0 when off (always off for a
    ///     remote bundle: see ``RequestPoller``).
    ///   - ringPollMicroseconds: the rings' window: `--poll-us` when given,
    ///     else 0 (docs/PERFORMANCE.md, "Polling for the next request").
    /// - Throws: `BundleError.io` when libfuse refuses the hooks.
    func install(on session: OpaquePointer, pollMicroseconds: Int = 0, ringPollMicroseconds: Int = 0) throws {
        guard wantsRings.load(ordering: .relaxed) else {
            return try installClassic(on: session, pollMicroseconds: pollMicroseconds)
        }
        self.session = session
        self.ringPollMicroseconds = ringPollMicroseconds
        fuseFD = fuse_session_fd(session)
        var io = fuse_custom_io(writev: { fd, iov, count, userdata in
            FUSETransport.of(userdata)?.route(fd: fd, iov, Int(count)) ?? writev(fd, iov, count)
        }, read: { fd, buffer, length, userdata in
            guard let transport = FUSETransport.of(userdata) else { return read(fd, buffer, length) }
            let n = transport.readRequest(fd, buffer, length) { read($0, $1, $2) }
            if n > 0, let buffer { transport.observe(UnsafeRawBufferPointer(start: buffer, count: n)) }
            return n
        }, splice_receive: nil, splice_send: nil)
        let rc = fuse_session_custom_io(session, &io, fuseFD)
        guard rc == 0 else {
            throw BundleError.io(errno: -rc, operation: "install the io_uring transport", path: [])
        }
    }

    /// The classic loop's hooks: reads through the poller when it polls
    /// (`microseconds` not 0), else plain, wiping the last request first;
    /// writes unchanged.
    private func installClassic(on session: OpaquePointer, pollMicroseconds: Int) throws {
        if pollMicroseconds > 0 { poller = RequestPoller(session: session, microseconds: pollMicroseconds) }
        var io = fuse_custom_io(writev: { fd, iov, count, _ in writev(fd, iov, count) }, read: { fd, buffer, length, userdata in
            guard let transport = FUSETransport.of(userdata) else { return read(fd, buffer, length) }
            guard let poller = transport.poller else { return transport.readRequest(fd, buffer, length) { read($0, $1, $2) } }
            return transport.readRequest(fd, buffer, length) { poller.read($0, $1, $2) }
        }, splice_receive: nil, splice_send: nil)
        let rc = fuse_session_custom_io(session, &io, fuse_session_fd(session))
        guard rc == 0 else {
            poller = nil
            throw BundleError.io(errno: -rc, operation: "install the classic loop's reader", path: [])
        }
    }

    /// A classic worker's read of the next request into `buffer` (libfuse's
    /// buffer of that worker, the same at every call): first wipes the
    /// request it read there last, which libfuse has finished with by now.
    ///
    /// Requests carry names (a lookup's, found or not), and a name left in
    /// a buffer outlives a lock. Wiped here, on the worker's own thread,
    /// rather than at lock: a worker waits in `read(2)` on that buffer,
    /// which the kernel may fill at any moment. The cost is a wipe of the
    /// request's own length (80 bytes for a read).
    private func readRequest(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ length: Int,
                             _ read: (Int32, UnsafeMutableRawPointer?, Int) -> Int) -> Int {
        let last = Int(bitPattern: pthread_getspecific(servedKey))
        if last > 0, let buffer { SecureBytes.wipe(UnsafeMutableRawBufferPointer(start: buffer, count: min(last, length))) }
        let n = read(fd, buffer, length)
        let code = errno
        pthread_setspecific(servedKey, UnsafeRawPointer(bitPattern: max(n, 0)))
        errno = code
        return n
    }

    private static func of(_ userdata: UnsafeMutableRawPointer?) -> FUSETransport? {
        guard let userdata else { return nil }
        return Unmanaged<MountContext>.fromOpaque(userdata).takeUnretainedValue().transport
    }

    /// Stops the queue threads and waits for them (after the classic loop
    /// ended); closing their rings releases the kernel's hold on them.
    func stop() {
        let running = queues.withLock { queues -> [RingQueue] in
            let all = queues
            queues = []
            return all
        }
        guard !running.isEmpty else { return }
        var one: UInt64 = 1
        _ = write(stopFD, &one, MemoryLayout<UInt64>.size)
        withExtendedLifetime(running) {
            for server in running.flatMap(\.servers) { server.join() }
        }
        ringsServe.store(false, ordering: .relaxed)
    }

    /// Has every ring thread wipe what read replies left in its entries,
    /// waiting at most 2 s (a thread finishes the request it is serving
    /// first). Called at lock, after the reader is gone: the classic
    /// path's reply buffers are wiped with the worker scratch.
    func wipeRingBuffers() {
        let all = queues.withLock { $0 }.flatMap(\.servers)
        let asked = all.map { ($0, $0.requestWipe()) }
        _ = Self.poll(seconds: 2) { asked.allSatisfy { $0.0.wipeFinished($0.1) } }
    }

    /// Polls `condition` every millisecond until it holds or `seconds` pass.
    private static func poll(seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while !condition() {
            guard ContinuousClock.now < deadline else { return false }
            usleep(1000)
        }
        return true
    }

    // MARK: - The hooks

    /// Read hook: notes the FUSE_INIT request and what it offers.
    private func observe(_ request: UnsafeRawBufferPointer) {
        let inHeader = MemoryLayout<fuse_in_header>.size
        // fuse_init_in: major, minor, max_readahead, flags, flags2 (7.36+).
        guard wantsRings.load(ordering: .relaxed), request.count >= inHeader + 20,
              request.loadUnaligned(fromByteOffset: 4, as: UInt32.self) == FUSE_INIT.rawValue else { return }
        let unique = request.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
        let flags = request.loadUnaligned(fromByteOffset: inHeader + 12, as: UInt32.self)
        let flags2 = request.loadUnaligned(fromByteOffset: inHeader + 16, as: UInt32.self)
        guard flags & CURING_FUSE_INIT_EXT != 0, flags2 & CURING_FUSE_OVER_IO_URING_FLAGS2 != 0 else {
            wantsRings.store(false, ordering: .relaxed)
            logger.log("info", "serving through /dev/fuse (classic): the kernel did not offer FUSE over io_uring at INIT")
            return
        }
        initUnique.store(unique, ordering: .relaxed)
    }

    /// Write hook: a ring request's reply goes to its entry, the INIT
    /// reply gets the ring flag, the rest goes to /dev/fuse.
    private func route(fd: Int32, _ iov: UnsafeMutablePointer<iovec>?, _ count: Int) -> Int {
        guard let iov, count >= 1, iov[0].iov_len >= MemoryLayout<fuse_out_header>.size, let head = iov[0].iov_base else {
            return writev(fd, iov, Int32(count))
        }
        let unique = head.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
        if unique != 0, let raw = pthread_getspecific(entryKey) {
            let entry = Unmanaged<RingEntry>.fromOpaque(raw).takeUnretainedValue()
            if entry.headers.pointee.ring_ent_in_out.commit_id == unique { return put(iov, count, into: entry) }
        }
        if unique != 0, unique == initUnique.load(ordering: .relaxed) {
            initUnique.store(0, ordering: .relaxed)
            return sendInitReply(fd: fd, iov, count)
        }
        return writev(fd, iov, Int32(count))
    }

    /// Copies a reply into `entry`: the out header to its header buffer,
    /// the rest to its payload, skipping what is already there (a read
    /// decrypted into the payload, see ``payload(forReplyOf:)``).
    private func put(_ iov: UnsafeMutablePointer<iovec>, _ count: Int, into entry: RingEntry) -> Int {
        let headerSize = MemoryLayout<fuse_out_header>.size
        guard let head = iov[0].iov_base, let payload = entry.payload.baseAddress else { errno = EINVAL; return -1 }
        UnsafeMutableRawPointer(entry.headers).copyMemory(from: head, byteCount: headerSize)
        var offset = 0
        for i in 1..<max(1, count) {
            let length = iov[i].iov_len
            guard length > 0, let base = iov[i].iov_base else { continue }
            guard length <= entry.payload.count - offset else { errno = EOVERFLOW; return -1 }
            if base != payload + offset { (payload + offset).copyMemory(from: base, byteCount: length) }
            offset += length
        }
        entry.headers.pointee.ring_ent_in_out.payload_sz = UInt32(offset)
        entry.replied = true
        return headerSize + offset
    }

    /// Sends the INIT reply with FUSE_OVER_IO_URING once the rings are
    /// open, then starts their threads (the kernel accepts registrations
    /// only after the reply). Without rings, the reply goes out unchanged.
    private func sendInitReply(fd: Int32, _ iov: UnsafeMutablePointer<iovec>, _ count: Int) -> Int {
        // fuse_init_out: flags at 12, max_write at 20, max_pages at 28,
        // flags2 at 32.
        guard count == 2, iov[1].iov_len >= 36, iov[1].iov_len <= 256, let original = iov[1].iov_base else {
            return writev(fd, iov, Int32(count))
        }
        var reply = [UInt8](repeating: 0, count: iov[1].iov_len)
        reply.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(start: original, count: iov[1].iov_len)) }
        let flags = reply.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 12, as: UInt32.self) }
        let maxWrite = reply.withUnsafeBytes { Int($0.loadUnaligned(fromByteOffset: 20, as: UInt32.self)) }
        let maxPages = reply.withUnsafeBytes { Int($0.loadUnaligned(fromByteOffset: 28, as: UInt16.self)) }
        // The kernel's largest request or reply (dev_uring.c): max_write,
        // max_pages pages (32 when the reply does not set FUSE_MAX_PAGES),
        // at least 8 KiB. A payload buffer smaller than that is refused.
        let pages = flags & CURING_FUSE_MAX_PAGES != 0 ? max(1, maxPages) : 32
        let payloadBytes = max(8192, maxWrite, pages * Int(getpagesize()))
        do {
            try openQueues(payloadBytes: payloadBytes)
        } catch {
            wantsRings.store(false, ordering: .relaxed)
            logger.log("info", "serving through /dev/fuse (classic): \(error.message)")
            return writev(fd, iov, Int32(count))
        }
        reply.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: flags | CURING_FUSE_INIT_EXT, toByteOffset: 12, as: UInt32.self)
            let flags2 = raw.loadUnaligned(fromByteOffset: 32, as: UInt32.self)
            raw.storeBytes(of: flags2 | CURING_FUSE_OVER_IO_URING_FLAGS2, toByteOffset: 32, as: UInt32.self)
        }
        let sent = reply.withUnsafeMutableBytes { raw -> Int in
            var parts = [iov[0], iovec(iov_base: raw.baseAddress, iov_len: raw.count)]
            return writev(fd, &parts, 2)
        }
        guard sent >= 0 else {
            let code = errno
            queues.withLock { $0 = [] }
            errno = code
            return sent
        }
        startQueues()
        return sent
    }

    /// Opens one queue per possible CPU (the kernel makes one per
    /// possible CPU and waits for all of them before using any), each
    /// with two rings.
    private func openQueues(payloadBytes: Int) throws(RingSetupError) {
        var opened: [RingQueue] = []
        for qid in 0..<Self.possibleCPUs() {
            opened.append(try RingQueue(qid: qid, depth: Self.entriesPerQueue, payloadBytes: payloadBytes,
                                        pollMicroseconds: ringPollMicroseconds))
        }
        queues.withLock { $0 = opened }
    }

    private func startQueues() {
        guard let session else { return }
        let all = queues.withLock { $0 }
        var started = 0
        for queue in all {
            for server in queue.servers {
                let work = RingWork(server: server, queue: queue, transport: self, session: session, fuseFD: fuseFD, stopFD: stopFD)
                if server.start(work) { started += 1 }
            }
        }
        ringsServe.store(started == 2 * all.count, ordering: .relaxed)
        logger.log("info", "serving through FUSE over io_uring: \(all.count) queues of \(Self.entriesPerQueue) entries, "
                   + "each served by a pinned thread and a helper")
    }

    /// A queue thread's failure: the kernel falls back to /dev/fuse for
    /// the whole connection when a registration fails.
    func queueFailed(qid: Int, reason: String) {
        ringsServe.store(false, ordering: .relaxed)
        guard !failureLogged.exchange(true, ordering: .relaxed) else { return }
        logger.log("warning", "io_uring queue \(qid): \(reason); serving through /dev/fuse (classic)")
    }

    // MARK: - Serving

    /// Runs `body` (libfuse dispatching a ring request) with `entry` as
    /// the place its reply goes.
    func serving(_ entry: RingEntry, _ body: () -> Void) {
        pthread_setspecific(entryKey, Unmanaged.passUnretained(entry).toOpaque())
        body()
        pthread_setspecific(entryKey, nil)
    }

    /// The payload of the ring entry this thread is answering, when a
    /// read reply of `size` bytes fits: decrypting there makes the reply
    /// copy-free (the write hook sees it already in place).
    func payload(forReplyOf size: Int) -> UnsafeMutableRawBufferPointer? {
        guard let raw = pthread_getspecific(entryKey) else { return nil }
        let entry = Unmanaged<RingEntry>.fromOpaque(raw).takeUnretainedValue()
        guard size <= min(entry.payload.count, MountContext.maximumRead) else { return nil }
        return UnsafeMutableRawBufferPointer(rebasing: entry.payload[0..<size])
    }

    /// The number of queues the kernel makes: its possible CPUs, read
    /// from /sys/devices/system/cpu/possible ("0-1", "0-3,6"), highest + 1.
    static func possibleCPUs() -> Int {
        let fallback = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_CONF))))
        guard let file = try? FileDescriptor.open(Array("/sys/devices/system/cpu/possible".utf8), flags: O_RDONLY) else {
            return fallback
        }
        var bytes = [UInt8](repeating: 0, count: 256)
        guard let n = try? bytes.withUnsafeMutableBytes({ try file.read(into: $0) }), n > 0 else { return fallback }
        let text = String(decoding: bytes[0..<n], as: UTF8.self).trimmingSuffix()
        let highest = text.split(separator: ",").compactMap { $0.split(separator: "-").last.flatMap { Int($0) } }.max()
        return highest.map { $0 + 1 } ?? fallback
    }
}

private extension String {
    /// Without the trailing newline and spaces.
    func trimmingSuffix() -> String {
        var s = Substring(self)
        while let last = s.last, last == "\n" || last == " " { s = s.dropLast() }
        return String(s)
    }
}
