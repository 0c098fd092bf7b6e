import CFuse
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// How the classic transport's workers read /dev/fuse when `--poll-us` is
/// on: while requests come one at a time, one worker polls for the next
/// request for a short window instead of sleeping in the kernel.
///
/// Why: with one reader waiting on each reply (a 1-job random read), a
/// worker that sleeps on /dev/fuse is woken for every request, and on the
/// virtual machines measured the wake-up of an idle CPU and the switch
/// back in were the daemon's largest cost, larger than decrypting
/// (docs/PERFORMANCE.md, "Polling for the next request").
///
/// It runs inside libfuse's own workers, as the session's read hook
/// (`fuse_session_custom_io`), so libfuse's loop keeps everything else:
/// signals, unmount (ENODEV), INTERRUPT and FORGET, its thread pool and
/// each thread's scratch. Two modes:
/// - **shared** (the start): every worker blocks in `read(2)`, as in
///   libfuse's loop without the hook;
/// - **polling**: one worker at a time, the leader, reads; the others wait
///   on a semaphore in user space, so that a queued request wakes no one.
///   The leader polls (`poll` with a zero timeout, yielding the CPU
///   between tries) for up to the window after its last request, then
///   blocks in `read(2)`; it polls only while its last request came within
///   the window, so an idle mount sleeps and a sparse one does not spin,
///   and not at all for ``PollingPolicy/requestsBackingOff`` requests once another task
///   wanted its CPU while it polled (a busy machine).
///
/// When polling starts and stops, the window and the back-off follow
/// ``PollingPolicy`` (the rings' servers follow it too): polling starts
/// after a streak of requests each taken while no other was being served,
/// and stops (the waiting workers woken to read again) when the leader
/// comes back from serving to find requests queued: concurrent readers
/// and read-ahead are served by every worker, as without polling. Requests that queue behind a slow one while polling
/// wait for it (twice at most, then every worker reads again); remote
/// bundles, whose reads wait on a network, are never polled.
package final class RequestPoller: @unchecked Sendable {
    // @unchecked: everything mutable is an atomic or the semaphore.
    private let session: OpaquePointer
    /// The window, when to start and stop, the back-off.
    private let policy: PollingPolicy
    /// Workers waiting in user space while polling.
    private let followers: UnsafeMutablePointer<sem_t>
    /// Set by any thread for the thread's current request: cleared when
    /// the thread comes back to read (``inFlight`` counts these).
    private let holdingKey: pthread_key_t
    private let polling = Atomic<Bool>(false)
    private let leaderTaken = Atomic<Bool>(false)
    private let parked = Atomic<Int>(0)
    private let inFlight = Atomic<Int>(0)
    /// Requests the leader found by polling, without sleeping (status).
    let polledRequests = Atomic<Int>(0)

    /// Largest `--poll-us` (``PollingPolicy/maximumMicroseconds``).
    package static let maximumMicroseconds = PollingPolicy.maximumMicroseconds
    /// `--poll-us` unless given (``PollingPolicy/defaultMicroseconds``).
    package static let defaultMicroseconds = PollingPolicy.defaultMicroseconds

    /// - Parameters:
    ///   - session: the session whose exit ends a poll.
    ///   - microseconds: the polling window, 1 … ``maximumMicroseconds``.
    init(session: OpaquePointer, microseconds: Int) {
        self.session = session
        policy = PollingPolicy(microseconds: microseconds)
        followers = .allocate(capacity: 1)
        guard sem_init(followers, 0, 0) == 0 else { preconditionFailure("internal error: sem_init failed") }
        var key = pthread_key_t()
        guard pthread_key_create(&key, nil) == 0 else { preconditionFailure("internal error: pthread_key_create failed") }
        holdingKey = key
    }

    deinit {
        sem_destroy(followers)
        followers.deallocate()
        pthread_key_delete(holdingKey)
    }

    /// The read hook: one request into `buffer`, as `read(2)` returns it.
    /// `fd` is libfuse's (its custom I/O hook passes the number: C ABI).
    func read(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ length: Int) -> Int {
        let cameBack = noteServed()
        while true {
            guard polling.load(ordering: .sequentiallyConsistent) else { return readShared(fd, buffer, length) }
            if leaderTaken.compareExchange(expected: false, desired: true, ordering: .sequentiallyConsistent).exchanged {
                return readAsLeader(fd, buffer, length, cameBack: cameBack)
            }
            if let interrupted = waitAsFollower() { return interrupted }
        }
    }

    // MARK: - Modes

    /// Shared mode: a blocking read, counting requests served alone.
    private func readShared(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ length: Int) -> Int {
        let n = Glibc.read(fd, buffer, length)
        guard n > 0 else { return n }
        if policy.noteTaken(alone: noteTaken() == 0) { polling.store(true, ordering: .sequentiallyConsistent) }
        return n
    }

    /// Polling mode, the leader: back to shared mode if requests queue
    /// while it serves, else poll up to the window, then block.
    private func readAsLeader(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ length: Int, cameBack: Bool) -> Int {
        var waiting = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        if cameBack {
            let queued = poll(&waiting, 1, 0) > 0
            if policy.noteComeback(foundQueued: queued) {
                stopPolling()
                return readShared(fd, buffer, length)
            }
            if queued { return readTaken(fd, buffer, length, polled: false, began: nil) }
        }
        let began = PollingPolicy.now()
        guard policy.shouldPoll() else { return readTaken(fd, buffer, length, polled: false, began: began) }
        let session = session
        let found = policy.poll(arrived: { poll(&waiting, 1, 0) > 0 }, ended: { fuse_session_exited(session) != 0 })
        if fuse_session_exited(session) != 0 {
            leaderTaken.store(false, ordering: .sequentiallyConsistent)
            errno = EINTR
            return -1
        }
        return readTaken(fd, buffer, length, polled: found, began: began)
    }

    /// The leader's read of a request it saw queued (or, after the window,
    /// a blocking one); the leader role is free again on return.
    private func readTaken(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ length: Int, polled: Bool, began: Int64?) -> Int {
        let n = Glibc.read(fd, buffer, length)
        let code = errno
        if let began { policy.noteWaited(since: began) }
        leaderTaken.store(false, ordering: .sequentiallyConsistent)
        if n > 0 {
            _ = noteTaken()
            if polled { polledRequests.add(1, ordering: .relaxed) }
        }
        errno = code
        return n
    }

    /// Polling mode, not the leader: waits in user space until polling
    /// stops. Returns -1 (EINTR) when a signal ended the session, nil to
    /// look again.
    private func waitAsFollower() -> Int? {
        parked.add(1, ordering: .sequentiallyConsistent)
        // Announced, then checked: a stop either sees this worker counted
        // or this worker sees the stop (both sequentially consistent).
        guard polling.load(ordering: .sequentiallyConsistent) else {
            parked.subtract(1, ordering: .sequentiallyConsistent)
            return nil
        }
        // sem_wait is a cancellation point: libfuse cancels its workers
        // at the end of the loop.
        let rc = sem_wait(followers)
        let code = errno
        parked.subtract(1, ordering: .sequentiallyConsistent)
        // EINTR-ok: not a retry; tells libfuse's loop that the session ended
        if rc != 0, code == EINTR, fuse_session_exited(session) != 0 {
            errno = EINTR
            return -1
        }
        return nil
    }

    /// Back to shared mode: the waiting workers go back to reading.
    private func stopPolling() {
        polling.store(false, ordering: .sequentiallyConsistent)
        leaderTaken.store(false, ordering: .sequentiallyConsistent)
        for _ in 0..<parked.load(ordering: .sequentiallyConsistent) { sem_post(followers) }
    }

    // MARK: - Bookkeeping

    /// Notes that the calling thread finished the request it had taken, if
    /// any; returns whether it had one.
    private func noteServed() -> Bool {
        guard pthread_getspecific(holdingKey) != nil else { return false }
        pthread_setspecific(holdingKey, nil)
        inFlight.subtract(1, ordering: .relaxed)
        return true
    }

    /// Notes that the calling thread took a request; returns how many
    /// other requests were being served.
    private func noteTaken() -> Int {
        pthread_setspecific(holdingKey, UnsafeRawPointer(bitPattern: 1))
        return inFlight.add(1, ordering: .relaxed).newValue - 1
    }
}
