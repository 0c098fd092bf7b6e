import CryptCore
import CFuse
import CUring
import Synchronization
#if canImport(Glibc)
import Glibc
import EncFSService
#endif

/// One of the two threads of a ring queue (``RingQueue``), with its own
/// io_uring: the pinned server or the helper.
///
/// The thread loops: wait for completions; each completed entry holds a
/// request, which is rebuilt as the classic request buffer (in header, the
/// opcode's argument, the payload) and given to `fuse_session_process_buf`,
/// so every operation takes the same path as on /dev/fuse (access policy,
/// lock, errors); the reply hook (``FUSETransport``) puts the reply in the
/// entry, and a COMMIT_AND_FETCH hands it back and waits for the next
/// request in one command. A read is decrypted straight into the entry's
/// payload buffer. Entries the other server handed over arrive through an
/// eventfd the ring polls.
///
/// With `--poll-us`, while a lone reader's requests come one at a time,
/// the helper serves them and polls for the next one instead of sleeping
/// (``pollBeforeWaiting(_:)``), as the classic loop's poller does on
/// /dev/fuse: from another CPU than the reader's, since a server on the
/// reader's own CPU could only take the CPU the reader needs to send the
/// next request (docs/PERFORMANCE.md, "Polling for the next request").
///
/// It stops when every entry of the queue is gone (the kernel ends them
/// with ENOTCONN at unmount) or when the stop eventfd becomes readable.
final class RingServer: @unchecked Sendable {
    // @unchecked: the ring and request buffer belong to the thread from
    // start() on; others use only the atomics and the eventfds.
    private unowned let queue: RingQueue
    /// ``RingQueue/pinned`` or ``RingQueue/helper``.
    let role: Int
    private var ring = curing_ring()
    /// One rebuilt request at a time: header, argument and payload.
    private let request: UnsafeMutableRawBufferPointer
    /// Requests this server answered (``FUSETransport/ringRequests``).
    let served = Atomic<Int>(0)
    /// Requests this server found by polling, without sleeping (status).
    let polledRequests = Atomic<Int>(0)
    /// Set while the thread polls for its next request: only then does
    /// the pinned server hand it a lone reader's small request (a helper
    /// asleep on a busy CPU may take milliseconds to run).
    private let spinning = Atomic<Bool>(false)
    /// Clear only while the thread waits for work: set before it starts
    /// and after it ends, so nothing is handed to a thread not there.
    private let busy = Atomic<Bool>(true)
    private var thread: pthread_t?
    // The ring's descriptors stay raw Int32 (closed in deinit with the
    // ring): they are the C ABI's, registered with io_uring by number.
    /// Readable when the other server handed entries over (or the queue
    /// ended): wakes the thread from its wait.
    private let inboxFD: Int32
    /// Readable when a lock asks the thread to wipe its entries' replies.
    private let wipeFD: Int32
    /// Wipes asked for (``requestWipe()``) and wipes done by the thread.
    private let wipesRequested = Atomic<Int>(0)
    private let wipesDone = Atomic<Int>(0)
    /// Set when the thread has ended.
    private let finished = Atomic<Bool>(false)

    /// The user data of the polls (entries use 0 …).
    private static let stopToken = UInt64.max
    private static let wipeToken = UInt64.max - 1
    private static let inboxToken = UInt64.max - 2

    /// Opens the ring; no thread yet.
    ///
    /// - Throws: `RingSetupError` when io_uring or memory refuses.
    init(queue: RingQueue, role: Int, payloadBytes: Int) throws(RingSetupError) {
        self.queue = queue
        self.role = role
        request = .allocate(byteCount: payloadBytes + MemoryLayout<curing_req_header>.size, alignment: 4096)
        inboxFD = curing_eventfd()
        wipeFD = curing_eventfd()
        // One SQE per entry (any entry may come to this ring) and the
        // stop, wipe and inbox polls.
        let rc = inboxFD < 0 || wipeFD < 0 ? -errno : curing_ring_open(&ring, UInt32(queue.entries.count + 3))
        guard rc == 0 else {
            request.deallocate()
            if inboxFD >= 0 { close(inboxFD) }
            if wipeFD >= 0 { close(wipeFD) }
            throw RingSetupError.ioUring(errno: -rc)
        }
    }

    deinit {
        curing_ring_close(&ring)
        close(inboxFD)
        close(wipeFD)
        SecureBytes.wipe(request)
        request.deallocate()
    }

    /// Starts the thread.
    func start(_ work: RingWork) -> Bool {
        var created = pthread_t()
        let rc = pthread_create(&created, nil, { raw in
            guard let raw else { return nil }
            let work = Unmanaged<RingWork>.fromOpaque(raw).takeRetainedValue()
            work.server.serve(work)
            return nil
        }, Unmanaged.passRetained(work).toOpaque())
        guard rc == 0 else {
            Unmanaged.passUnretained(work).release()
            return false
        }
        thread = created
        return true
    }

    /// Wakes the thread from its wait (entries handed over, queue ended).
    func wake() {
        var one: UInt64 = 1
        _ = write(inboxFD, &one, MemoryLayout<UInt64>.size)
    }

    /// Whether the thread waits for work.
    var isIdle: Bool { !busy.load(ordering: .relaxed) }

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

    /// Waits for the thread to end.
    func join() {
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    /// The thread's body: set up (``prepare(_:)``), then serve until the
    /// entries are gone or stop is asked: wait, collect what completed
    /// (``collectCompletions(_:ready:count:stopping:wipeDue:)``), answer it
    /// (``answerReady(_:count:found:_:)``), wipe when a lock asked.
    private func serve(_ work: RingWork) {
        defer {
            busy.store(true, ordering: .relaxed)
            finished.store(true, ordering: .releasing)
            // The other server may wait for entries only this one saw end.
            queue.peer(of: role).wake()
        }
        guard prepare(work) else { return }
        var stopping = false
        var wipeDue = false
        // The requests of one wait: at most one per entry.
        let ready = UnsafeMutableBufferPointer<Int>.allocate(capacity: queue.entries.count)
        defer { ready.deallocate() }
        var readyCount = 0
        var answered = 0
        while !queue.allEnded && !stopping {
            let found = answered > 0 && pollBeforeWaiting(work)
            busy.store(false, ordering: .relaxed)
            let rc = curing_submit_and_wait(&ring, 1)
            busy.store(true, ordering: .relaxed)
            // Not a retry of one call: an interrupted wait goes round the
            // serving loop, which checks the queue and the stop first (the
            // call returns -errno, not -1 and errno).
            // EINTR-ok: the serving loop's next turn
            if rc == -EINTR { continue }
            guard rc >= 0 else {
                work.transport.queueFailed(qid: queue.qid, reason: "io_uring_enter: \(String(cString: strerror(-rc)))")
                break
            }
            collectCompletions(work, ready: ready, count: &readyCount, stopping: &stopping, wipeDue: &wipeDue)
            answered = answerReady(ready, count: readyCount, found: found, work)
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

    /// The thread's setup: its name, its signals and its CPU, the ring
    /// enabled, the entries registered (by the pinned server) and the
    /// stop, wipe and inbox polls armed.
    ///
    /// - Returns: false after reporting a ring that cannot be enabled.
    private func prepare(_ work: RingWork) -> Bool {
        let pinned = role == RingQueue.pinned
        // ps -L and /proc/PID/task show which threads are the rings'.
        ProcessHardening.setProcessName(pinned ? "encfs-ring" : "encfs-ringhelp")
        // Signals (SIGTERM ending the mount) belong to libfuse's main
        // thread, which waits for them; libfuse blocks them in its workers
        // the same way.
        Self.blockSignals()
        if pinned {
            if curing_cpu_allowed(Int32(queue.qid)) == 1 { _ = curing_pin_to_cpu(Int32(queue.qid)) }
        } else {
            // Woken by the pinned server, an unpinned helper was placed
            // on the pinned server's CPU (the reader's), where read-ahead
            // then ran on one core while the other idled.
            _ = curing_avoid_cpu(Int32(queue.qid))
        }
        let enabled = curing_ring_enable(&ring)
        guard enabled == 0 else {
            work.transport.queueFailed(qid: queue.qid, reason: "cannot enable the ring: \(String(cString: strerror(-enabled)))")
            return false
        }
        if pinned {
            for entry in queue.entries {
                guard let sqe = curing_get_sqe(&ring) else { break }
                curing_prep_fuse_cmd(sqe, work.fuseFD, CURING_CMD_REGISTER, UInt16(queue.qid), 0, entry.vectors,
                                     UInt64(entry.index))
            }
        }
        if let sqe = curing_get_sqe(&ring) { curing_prep_poll_readable(sqe, work.stopFD, Self.stopToken) }
        armPoll(wipeFD, Self.wipeToken)
        armPoll(inboxFD, Self.inboxToken)
        return true
    }

    /// Reaps every completion the wait brought: requests into `ready`
    /// (from `count` on), entries handed over by the other server, the
    /// stop and the wipe asked for.
    @inline(__always)
    private func collectCompletions(_ work: RingWork, ready: UnsafeMutableBufferPointer<Int>, count readyCount: inout Int,
                                    stopping: inout Bool, wipeDue: inout Bool) {
        while let cqe = curing_peek_cqe(&ring) {
            let token = cqe.pointee.user_data
            let result = cqe.pointee.res
            curing_cqe_seen(&ring)
            switch token {
            case Self.stopToken: stopping = true
            case Self.wipeToken: wipeDue = true
            case Self.inboxToken:
                var drained: UInt64 = 0
                _ = read(inboxFD, &drained, MemoryLayout<UInt64>.size)
                readyCount = queue.collectHanded(for: role, into: ready, from: readyCount)
                armPoll(inboxFD, Self.inboxToken)
            case let index where index < UInt64(queue.entries.count):
                entryCompleted(Int(index), result: result, work, ready: ready, count: &readyCount)
            default: break
            }
        }
    }

    /// An entry's command completed: with 0 it holds a request, added to
    /// `ready`; otherwise the entry has ended (unmounted, or its
    /// registration refused: reported).
    @inline(__always)
    private func entryCompleted(_ index: Int, result: Int32, _ work: RingWork, ready: UnsafeMutableBufferPointer<Int>,
                                count readyCount: inout Int) {
        if result == 0 {
            queue.registered.store(true, ordering: .relaxed)
            if readyCount < ready.count {
                ready[readyCount] = index
                readyCount += 1
            }
        } else {
            // ENOTCONN / ECANCELED: unmounted; anything else
            // before a first request: the registration was
            // refused.
            if !queue.registered.load(ordering: .relaxed) && result != -ENOTCONN && result != -ECANCELED {
                work.transport.queueFailed(qid: queue.qid,
                                           reason: "registration refused: \(String(cString: strerror(-result)))")
            }
            queue.entryEnded()
        }
    }

    /// Answers the `count` requests of one wait (``answer(_:_:)``), noting
    /// for the polling whether the wait was `found` by polling and whether
    /// the request came alone.
    ///
    /// - Returns: how many requests this server answered.
    @inline(__always)
    private func answerReady(_ ready: UnsafeMutableBufferPointer<Int>, count readyCount: Int, found: Bool,
                             _ work: RingWork) -> Int {
        guard readyCount > 0 else { return 0 }
        let others = work.transport.ringServersBusy.add(1, ordering: .relaxed).newValue - 1
        notePolling(found: found, requests: readyCount, alone: readyCount == 1 && others == 0)
        let answered = answer(UnsafeMutableBufferPointer(rebasing: ready[0..<readyCount]), work)
        work.transport.ringServersBusy.subtract(1, ordering: .relaxed)
        return answered
    }

    /// The helper, back from answering while the queue polls: unless a
    /// request is already waiting (which, twice in a row, ends the
    /// polling), submits the commits and looks for the next request in
    /// the ring's shared memory for up to the window (``PollingPolicy``),
    /// yielding the CPU between looks. The wait that follows then returns
    /// at once, or sleeps as before. A window that passes with nothing, or
    /// a back-off, ends the polling: the pinned server then serves again
    /// until a new streak of lone requests.
    ///
    /// - Returns: whether the look found work.
    private func pollBeforeWaiting(_ work: RingWork) -> Bool {
        guard role == RingQueue.helper, let policy = queue.pollingPolicy, queue.polling.load(ordering: .relaxed) else { return false }
        // Another server busy counts as queued: the classic poller sees
        // every CPU's requests on /dev/fuse, a ring only its queue's.
        let queued = curing_work_pending(&ring) == 1 || work.transport.ringServersBusy.load(ordering: .relaxed) > 0
        if policy.noteComeback(foundQueued: queued) || (!queued && !policy.backOffOver()) {
            queue.polling.store(false, ordering: .relaxed)
            return false
        }
        guard !queued else { return false }
        // The reply goes out now, not with the wait.
        _ = curing_submit_and_wait(&ring, 0)
        busy.store(false, ordering: .relaxed)
        spinning.store(true, ordering: .relaxed)
        let found = policy.poll(arrived: { curing_work_pending(&ring) == 1 }, ended: { queue.allEnded })
        spinning.store(false, ordering: .relaxed)
        busy.store(true, ordering: .relaxed)
        if !found { queue.polling.store(false, ordering: .relaxed) }
        return found
    }

    /// After a wait that brought `requests` requests: counts those found
    /// by polling, and starts the queue's polling after a streak of
    /// requests that came `alone` (one, while no other server of any
    /// queue was answering) once no back-off runs.
    private func notePolling(found: Bool, requests: Int, alone: Bool) {
        guard let policy = queue.pollingPolicy else { return }
        if found { polledRequests.add(requests, ordering: .relaxed) }
        guard !queue.polling.load(ordering: .relaxed) else { return }
        let rested = policy.backOffOver()
        if policy.noteTaken(alone: alone), rested {
            queue.helperInvited.store(true, ordering: .relaxed)
            queue.polling.store(true, ordering: .relaxed)
        }
    }

    private func armPoll(_ fd: Int32, _ token: UInt64) {
        if let sqe = curing_get_sqe(&ring) { curing_prep_poll_readable(sqe, fd, token) }
    }

    /// Serves the requests of one wait, each committed as soon as it is
    /// answered (the last with the next wait, the others at once), so a
    /// reader waiting for the first does not wait for the rest. Shares
    /// them first with an idle peer: the pinned server hands over every
    /// other read of two or more when it is large (read-ahead; a small
    /// read is served faster here than another thread wakes up); the
    /// helper serves large reads and hands small requests back to the
    /// pinned server, whose commit brings their entries home: after a
    /// burst, small reads return to the reader's CPU. (A large read the
    /// helper keeps also lets it pull the next queued one with its commit,
    /// so the busier thread takes less.) While a helper polls for a lone
    /// reader, small requests go to it and stay there.
    ///
    /// - Returns: how many requests this server answered.
    private func answer(_ ready: UnsafeMutableBufferPointer<Int>, _ work: RingWork) -> Int {
        var mine = ready.count
        let pinned = role == RingQueue.pinned
        let peer = queue.peer(of: role)
        let lone = queue.polling.load(ordering: .relaxed)
        // A helper asleep on a busy CPU may take milliseconds to run: it
        // gets a small request while it polls, or once when polling starts.
        let toPollingHelper = pinned && lone
            && (peer.spinning.load(ordering: .relaxed) || queue.helperInvited.exchange(false, ordering: .relaxed))
        if ready.count >= (pinned && !toPollingHelper ? 2 : 1), peer.isIdle, !queue.allEnded {
            mine = 0
            for position in 0..<ready.count {
                let index = ready[position]
                let large = queue.entries[index].isRead(ofAtLeast: Self.handOverBytes)
                let handOver = pinned ? (toPollingHelper && !large) || (position % 2 == 1 && large) : !large && !lone
                if handOver {
                    queue.hand(index, from: role)
                } else {
                    ready[mine] = index
                    mine += 1
                }
            }
        }
        for position in 0..<mine {
            let entry = queue.entries[ready[position]]
            serveRequest(in: entry, work)
            queueCommit(of: entry, work)
            if position < mine - 1 { _ = curing_submit_and_wait(&ring, 0) }
        }
        return mine
    }

    /// The smallest read the pinned server hands over: the kernel's
    /// read-ahead sends requests of up to 256 KiB.
    static let handOverBytes = 64 << 10

    /// Wipes the read replies the entries this server owns still hold:
    /// submits the pending commits first (the kernel copies the replies
    /// out within that call), then wipes each, sparing the request of one
    /// the kernel handed over meanwhile (its completion is waiting) or
    /// the other server handed over. Race-free because the ring defers
    /// task work: the kernel writes into these buffers only inside this
    /// thread's io_uring_enter.
    private func wipeReplies() {
        // Drained before the count is read: a request counted later writes
        // the eventfd again, and the next round covers it.
        var drained: UInt64 = 0
        _ = read(wipeFD, &drained, MemoryLayout<UInt64>.size)
        let number = wipesRequested.load(ordering: .acquiring)
        _ = curing_submit_and_wait(&ring, 0)
        queue.wipeReplies(ownedBy: role) { curing_has_cqe_for(&ring, UInt64($0)) == 1 }
        armPoll(wipeFD, Self.wipeToken)
        wipesDone.store(number, ordering: .releasing)
    }

    /// Rebuilds the request in `entry` as a classic request buffer and has
    /// libfuse dispatch it; the reply lands in the entry.
    private func serveRequest(in entry: RingEntry, _ work: RingWork) {
        let buffer = request
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
            // Requests carry names (a lookup's): none may outlive a lock,
            // so the entry's copy goes once rebuilt (a read has none) and
            // the rebuilt one once served.
            SecureBytes.wipe(UnsafeMutableRawBufferPointer(start: payload, count: payloadSize))
            var request = fuse_buf(size: total, flags: fuse_buf_flags(rawValue: 0), mem: base, fd: -1, pos: 0)
            work.transport.serving(entry) {
                fuse_session_process_buf(work.session, &request)
            }
            SecureBytes.wipe(UnsafeMutableRawBufferPointer(start: base, count: total))
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
    /// entry waits for the next request, in one command, on this ring.
    private func queueCommit(of entry: RingEntry, _ work: RingWork) {
        guard let sqe = curing_get_sqe(&ring) else {
            preconditionFailure("internal error: ring \(queue.qid) has no free submission slot")
        }
        queue.own(entry.index, by: role)
        curing_prep_fuse_cmd(sqe, work.fuseFD, CURING_CMD_COMMIT_AND_FETCH, UInt16(queue.qid),
                             entry.headers.pointee.ring_ent_in_out.commit_id, nil, UInt64(entry.index))
    }
}

/// What a server's thread needs, handed over through pthread_create. It
/// keeps the queue alive while the thread runs (the server refers to it
/// unowned).
final class RingWork: @unchecked Sendable {
    let server: RingServer
    private let queue: RingQueue
    let transport: FUSETransport
    let session: OpaquePointer
    // Raw: the libfuse session owns the FUSE descriptor, FUSETransport the
    // stop eventfd; the ring takes both by number (C ABI).
    let fuseFD: Int32
    let stopFD: Int32

    init(server: RingServer, queue: RingQueue, transport: FUSETransport, session: OpaquePointer, fuseFD: Int32, stopFD: Int32) {
        self.server = server
        self.queue = queue
        self.transport = transport
        self.session = session
        self.fuseFD = fuseFD
        self.stopFD = stopFD
    }
}
