import CFuse
import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// A second thread for one ring queue: when one wait brings several
/// requests (read-ahead sends up to four at once, all queued on the
/// reader's CPU), the queue's thread hands every other one to its helper
/// and serves the rest itself, so that they decrypt on two cores. A
/// single request, the common case for small reads, never leaves the
/// queue's pinned thread.
///
/// The helper is not pinned: the scheduler puts it on the idle core. It
/// rebuilds requests in a buffer of its own and answers into the same ring
/// entries (each entry is served by one thread at a time); the queue's
/// thread commits all of them once ``wait()`` returns.
final class RingHelper: @unchecked Sendable {
    // @unchecked: `share` and `stopping` are written by the queue's thread
    // before it posts `go` and read by the helper after it waits on `go`;
    // the semaphores order them.
    private unowned let queue: RingQueue
    private let work: RingWork
    private let request: UnsafeMutableRawBufferPointer
    private let go = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
    private let done = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
    private var share: (entries: UnsafeBufferPointer<Int>, stride: Int, first: Int)?
    private var stopping = false
    private var thread = pthread_t()

    /// Starts the helper thread; nil when it cannot be started (the queue
    /// then serves everything itself).
    init?(queue: RingQueue, work: RingWork, requestBytes: Int) {
        self.queue = queue
        self.work = work
        request = .allocate(byteCount: requestBytes, alignment: 4096)
        sem_init(go, 0, 0)
        sem_init(done, 0, 0)
        let rc = pthread_create(&thread, nil, { raw in
            guard let raw else { return nil }
            Unmanaged<RingHelper>.fromOpaque(raw).takeUnretainedValue().run()
            return nil
        }, Unmanaged.passUnretained(self).toOpaque())
        guard rc == 0 else {
            sem_destroy(go)
            sem_destroy(done)
            go.deallocate()
            done.deallocate()
            request.deallocate()
            return nil
        }
    }

    deinit {
        sem_destroy(go)
        sem_destroy(done)
        go.deallocate()
        done.deallocate()
        SecureBytes.wipe(request)
        request.deallocate()
    }

    /// Hands over the entries `ready[first]`, `ready[first + stride]`, …;
    /// `ready` stays valid until ``wait()`` returns.
    func start(_ ready: UnsafeBufferPointer<Int>, every stride: Int, from first: Int) {
        share = (ready, stride, first)
        sem_post(go)
    }

    /// Waits until the helper has answered what ``start(_:every:from:)`` gave it.
    func wait() {
        while sem_wait(done) != 0 && errno == EINTR {}
    }

    /// Ends the thread and waits for it (the queue's thread, at its end).
    func stop() {
        stopping = true
        sem_post(go)
        pthread_join(thread, nil)
    }

    private func run() {
        _ = cfuse_set_process_name("encfs-ringhelp")
        RingQueue.blockSignals()
        while true {
            while sem_wait(go) != 0 && errno == EINTR {}
            if stopping { return }
            if let share {
                for i in stride(from: share.first, to: share.entries.count, by: share.stride) {
                    queue.serveRequest(in: queue.entry(share.entries[i]), work, rebuildingIn: request)
                }
            }
            share = nil
            sem_post(done)
        }
    }
}
