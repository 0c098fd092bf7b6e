import CryptCore
import CFuse
import CUring
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One FUSE ring queue and the thread that serves it: the kernel sends it
/// the requests issued on CPU `qid`, so the thread is pinned there (a
/// request is then served on the CPU that issued it: no cross-CPU wake-up,
/// the dearest part of a small read on these machines). Several requests
/// completed in one wait are shared with a helper thread (``RingHelper``).
///
/// The thread registers its entries, then loops: wait for completions;
/// each completed entry holds a request, which is rebuilt as the classic
/// request buffer (in header, the opcode's argument, the payload) and
/// given to `fuse_session_process_buf`, so every operation takes the same
/// path as on /dev/fuse (access policy, lock, errors); the reply hook
/// (``FUSETransport``) puts the reply in the entry, and a
/// COMMIT_AND_FETCH hands it back with the next fetch in one submission.
/// A read is decrypted straight into the entry's payload buffer.
///
/// It stops when every entry is gone (the kernel ends them with ENOTCONN
/// at unmount) or when the stop eventfd becomes readable.
final class RingQueue: @unchecked Sendable {
    // @unchecked: the ring, entries and request buffer belong to the
    // queue's thread from start() on; others read only `served`.
    let qid: Int
    private var ring = curing_ring()
    private let entries: [RingEntry]
    /// One rebuilt request at a time: header, argument and payload.
    private let request: UnsafeMutableRawBufferPointer
    /// Requests this queue served (``FUSETransport/ringRequests``).
    let served = Atomic<Int>(0)
    private var thread: pthread_t?
    /// Readable when a lock asks the thread to wipe its entries' replies.
    private let wipeFD: Int32
    /// Wipes asked for (``requestWipe()``) and wipes done by the thread.
    private let wipesRequested = Atomic<Int>(0)
    private let wipesDone = Atomic<Int>(0)
    /// Set when the thread has ended.
    private let finished = Atomic<Bool>(false)

    /// The user data of the stop eventfd's poll (entries use 0 …).
    private static let stopToken = UInt64.max
    /// The user data of the wipe eventfd's poll.
    private static let wipeToken = UInt64.max - 1

    /// Opens the ring and maps the entries' buffers; no thread yet.
    ///
    /// - Throws: `RingSetupError` when io_uring or memory refuses.
    init(qid: Int, depth: Int, payloadBytes: Int) throws(RingSetupError) {
        self.qid = qid
        var made: [RingEntry] = []
        for index in 0..<depth {
            guard let entry = RingEntry(index: index, payloadBytes: payloadBytes) else { throw RingSetupError.noMemory }
            made.append(entry)
        }
        entries = made
        request = .allocate(byteCount: payloadBytes + MemoryLayout<curing_req_header>.size, alignment: 4096)
        wipeFD = curing_eventfd()
        // One SQE per entry, the stop poll and the wipe poll.
        let rc = wipeFD < 0 ? -errno : curing_ring_open(&ring, UInt32(depth + 2))
        guard rc == 0 else {
            request.deallocate()
            if wipeFD >= 0 { close(wipeFD) }
            throw RingSetupError.ioUring(errno: -rc)
        }
    }

    deinit {
        curing_ring_close(&ring)
        close(wipeFD)
        SecureBytes.wipe(request)
        request.deallocate()
    }

    /// Starts the queue's thread.
    ///
    /// - Parameters:
    ///   - transport: where replies are routed and failures logged.
    ///   - session: the libfuse session the requests go to.
    ///   - fuseFD: /dev/fuse of the mount.
    ///   - stopFD: an eventfd that, once readable, ends the thread.
    func start(transport: FUSETransport, session: OpaquePointer, fuseFD: Int32, stopFD: Int32) -> Bool {
        let work = RingWork(queue: self, transport: transport, session: session, fuseFD: fuseFD, stopFD: stopFD)
        var created = pthread_t()
        let rc = pthread_create(&created, nil, { raw in
            guard let raw else { return nil }
            let work = Unmanaged<RingWork>.fromOpaque(raw).takeRetainedValue()
            work.queue.serve(work)
            return nil
        }, Unmanaged.passRetained(work).toOpaque())
        guard rc == 0 else {
            Unmanaged.passUnretained(work).release()
            return false
        }
        thread = created
        return true
    }

    /// Asks the thread to wipe what read replies left in its entries (at
    /// lock); ``wipeFinished(_:)`` says when it has.
    ///
    /// - Returns: the request's number, for ``wipeFinished(_:)``.
    func requestWipe() -> Int {
        let number = wipesRequested.add(1, ordering: .acquiringAndReleasing).newValue
        var one: UInt64 = 1
        _ = write(wipeFD, &one, MemoryLayout<UInt64>.size)
        return number
    }

    /// Whether wipe request `number` is done (or the thread has ended).
    func wipeFinished(_ number: Int) -> Bool {
        wipesDone.load(ordering: .acquiring) >= number || finished.load(ordering: .acquiring)
    }

    /// Blocks every signal in the calling thread.
    static func blockSignals() {
        var all = sigset_t()
        sigfillset(&all)
        pthread_sigmask(SIG_BLOCK, &all, nil)
    }

    /// Entry `index` (for the helper thread, which serves entries the
    /// queue's thread gave it).
    func entry(_ index: Int) -> RingEntry { entries[index] }

    /// Waits for the thread to end.
    func join() {
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    /// The thread's body: pin, register, serve until the entries are gone
    /// or stop is asked.
    private func serve(_ work: RingWork) {
        defer { finished.store(true, ordering: .releasing) }
        // ps -L and /proc/PID/task show which threads are the rings'.
        _ = cfuse_set_process_name("encfs-ring")
        // Signals (SIGTERM ending the mount) belong to libfuse's main
        // thread, which waits for them; libfuse blocks them in its workers
        // the same way.
        Self.blockSignals()
        if curing_cpu_allowed(Int32(qid)) == 1 { _ = curing_pin_to_cpu(Int32(qid)) }
        let enabled = curing_ring_enable(&ring)
        guard enabled == 0 else {
            work.transport.queueFailed(qid: qid, reason: "cannot enable the ring: \(String(cString: strerror(-enabled)))")
            return
        }
        for entry in entries {
            guard let sqe = curing_get_sqe(&ring) else { break }
            curing_prep_fuse_cmd(sqe, work.fuseFD, CURING_CMD_REGISTER, UInt16(qid), 0, entry.vectors, UInt64(entry.index))
        }
        if let sqe = curing_get_sqe(&ring) { curing_prep_poll_readable(sqe, work.stopFD, Self.stopToken) }
        armWipePoll()
        var alive = entries.count
        var registered = false
        var stopping = false
        var wipeDue = false
        // The entries that completed in one wait: at most one each.
        let ready = UnsafeMutableBufferPointer<Int>.allocate(capacity: entries.count)
        defer { ready.deallocate() }
        var readyCount = 0
        let helper = RingHelper(queue: self, work: work, requestBytes: request.count)
        defer { helper?.stop() }
        while alive > 0 && !stopping {
            let rc = curing_submit_and_wait(&ring, 1)
            if rc == -EINTR { continue }
            guard rc >= 0 else {
                work.transport.queueFailed(qid: qid, reason: "io_uring_enter: \(String(cString: strerror(-rc)))")
                break
            }
            while let cqe = curing_peek_cqe(&ring) {
                let token = cqe.pointee.user_data
                let result = cqe.pointee.res
                curing_cqe_seen(&ring)
                if token == Self.stopToken { stopping = true; continue }
                if token == Self.wipeToken { wipeDue = true; continue }
                guard token < UInt64(entries.count) else { continue }
                let entry = entries[Int(token)]
                guard result == 0 else {
                    alive -= 1
                    // ENOTCONN / ECANCELED: unmounted; anything else before
                    // a first request: the kernel refused the registration.
                    if !registered && result != -ENOTCONN && result != -ECANCELED {
                        work.transport.queueFailed(qid: qid, reason: "registration refused: \(String(cString: strerror(-result)))")
                    }
                    continue
                }
                registered = true
                ready[readyCount] = entry.index
                readyCount += 1
            }
            answer(UnsafeBufferPointer(rebasing: ready[0..<readyCount]), work, helper: helper)
            readyCount = 0
            if wipeDue {
                wipeDue = false
                wipeReplies()
            }
        }
        // Closing the ring cancels the commands still registered, which
        // lets the kernel release /dev/fuse.
        curing_ring_close(&ring)
    }

    private func armWipePoll() {
        if let sqe = curing_get_sqe(&ring) { curing_prep_poll_readable(sqe, wipeFD, Self.wipeToken) }
    }

    /// Wipes the read replies the entries still hold: submits the pending
    /// commits first (the kernel copies the replies out within that call),
    /// then wipes each entry, sparing the payload of a request the kernel
    /// handed over meanwhile (its completion is waiting). Race-free
    /// because the ring defers task work: the kernel writes into these
    /// buffers only inside this thread's io_uring_enter.
    private func wipeReplies() {
        // Drained before the count is read: a request counted later writes
        // the eventfd again, and the next round covers it.
        var drained: UInt64 = 0
        _ = read(wipeFD, &drained, MemoryLayout<UInt64>.size)
        let number = wipesRequested.load(ordering: .acquiring)
        _ = curing_submit_and_wait(&ring, 0)
        for entry in entries {
            let pending = curing_has_cqe_for(&ring, UInt64(entry.index)) == 1
            entry.wipeReplyPart(from: pending ? Int(entry.headers.pointee.ring_ent_in_out.payload_sz) : 0)
        }
        armWipePoll()
        wipesDone.store(number, ordering: .releasing)
    }

    /// Serves the requests of one wait, then queues their commits (sent
    /// with the next wait). Two or more (read-ahead sends several at
    /// once, all on the reader's CPU): every other one goes to the helper
    /// thread, so that they decrypt on two cores, as on the classic loop.
    private func answer(_ ready: UnsafeBufferPointer<Int>, _ work: RingWork, helper: RingHelper?) {
        if ready.count >= 2, let helper {
            helper.start(ready, every: 2, from: 1)
            for i in stride(from: 0, to: ready.count, by: 2) { serveRequest(in: entries[ready[i]], work, rebuildingIn: request) }
            helper.wait()
        } else {
            for index in ready { serveRequest(in: entries[index], work, rebuildingIn: request) }
        }
        for index in ready { queueCommit(of: entries[index], work) }
    }

    /// Rebuilds the request in `entry` as a classic request buffer in
    /// `buffer` and has libfuse dispatch it; the reply lands in the entry.
    func serveRequest(in entry: RingEntry, _ work: RingWork, rebuildingIn buffer: UnsafeMutableRawBufferPointer) {
        let headers = entry.headers
        let inHeaderSize = MemoryLayout<fuse_in_header>.size
        let payloadSize = Int(headers.pointee.ring_ent_in_out.payload_sz)
        // in_out starts the header buffer. The kernel counts the header,
        // the opcode's argument (copied to op_in) and the payload in `len`.
        let total = Int(UnsafeRawPointer(headers).loadUnaligned(as: fuse_in_header.self).len)
        let argumentSize = total - inHeaderSize - payloadSize
        entry.replied = false
        let opIn = UnsafeRawPointer(headers) + MemoryLayout.size(ofValue: headers.pointee.in_out)
        if argumentSize >= 0, argumentSize <= MemoryLayout.size(ofValue: headers.pointee.op_in),
           payloadSize <= entry.payload.count, total <= buffer.count, let base = buffer.baseAddress,
           let payload = entry.payload.baseAddress {
            base.copyMemory(from: UnsafeRawPointer(headers), byteCount: inHeaderSize)
            (base + inHeaderSize).copyMemory(from: opIn, byteCount: argumentSize)
            (base + inHeaderSize + argumentSize).copyMemory(from: payload, byteCount: payloadSize)
            var request = fuse_buf(size: total, flags: fuse_buf_flags(rawValue: 0), mem: base, fd: -1, pos: 0)
            work.transport.serving(entry) {
                fuse_session_process_buf(work.session, &request)
            }
            served.add(1, ordering: .relaxed)
        }
        if !entry.replied {
            // A request libfuse did not answer (or one too large to
            // rebuild): the kernel still needs the entry back.
            UnsafeMutableRawPointer(headers).storeBytes(
                of: fuse_out_header(len: UInt32(MemoryLayout<fuse_out_header>.size), error: -EIO,
                                    unique: headers.pointee.ring_ent_in_out.commit_id),
                as: fuse_out_header.self)
            headers.pointee.ring_ent_in_out.payload_sz = 0
        }
    }

    /// Queues COMMIT_AND_FETCH for `entry`: its reply goes back and the
    /// entry waits for the next request, in one command.
    private func queueCommit(of entry: RingEntry, _ work: RingWork) {
        guard let sqe = curing_get_sqe(&ring) else {
            preconditionFailure("internal error: ring \(qid) has no free submission slot")
        }
        curing_prep_fuse_cmd(sqe, work.fuseFD, CURING_CMD_COMMIT_AND_FETCH, UInt16(qid),
                             entry.headers.pointee.ring_ent_in_out.commit_id, nil, UInt64(entry.index))
    }
}

/// What a queue's thread needs, handed over through pthread_create.
final class RingWork: @unchecked Sendable {
    let queue: RingQueue
    let transport: FUSETransport
    let session: OpaquePointer
    let fuseFD: Int32
    let stopFD: Int32

    init(queue: RingQueue, transport: FUSETransport, session: OpaquePointer, fuseFD: Int32, stopFD: Int32) {
        self.queue = queue
        self.transport = transport
        self.session = session
        self.fuseFD = fuseFD
        self.stopFD = stopFD
    }
}

/// Why a ring could not be set up.
enum RingSetupError: Error {
    case noMemory
    case ioUring(errno: Int32)

    var message: String {
        switch self {
        case .noMemory: return "cannot map ring buffers"
        case .ioUring(let code): return "io_uring_setup: \(String(cString: strerror(code)))"
        }
    }
}
