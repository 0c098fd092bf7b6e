import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// The `--connections` requests one source may have at once, handed out
/// by priority: a request an application's read waits for goes before any
/// background one (`--prefetch all`, a `--prefetch-list`, a probe).
///
/// Why: a start-up list queues dozens of requests over a few connections,
/// and a read of a file not yet reached waited behind all of them
/// (docs/PERFORMANCE.md, "A fleet"). A DispatchSemaphore has no priority;
/// this is a count under a mutex with a condition variable on the
/// monotonic clock. `@unchecked Sendable`: `free` and `waitingReads` are
/// only touched with the mutex held.
package final class ConnectionSlots: @unchecked Sendable {
    /// Who waits for a slot.
    package enum Priority: Sendable {
        /// A read an application waits for (also read-ahead and the rest
        /// of a unit it started).
        case read
        /// Work nobody waits for: it takes a slot only when no read waits.
        case background
    }

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var free: Int
    private var waitingReads = 0

    init(count: Int) {
        free = max(1, count)
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Takes a slot, waiting until `deadline` at most.
    ///
    /// - Returns: false when none came in time.
    func acquire(_ priority: Priority, until deadline: DispatchTime) -> Bool {
        // The deadline as CLOCK_MONOTONIC time: the time left, from now.
        var limit = timespec()
        if deadline != .distantFuture {
            clock_gettime(CLOCK_MONOTONIC, &limit)
            let now = DispatchTime.now().uptimeNanoseconds
            let left = deadline.uptimeNanoseconds > now ? deadline.uptimeNanoseconds - now : 0
            let nanoseconds = UInt64(limit.tv_nsec) + left % 1_000_000_000
            limit.tv_sec += Int(left / 1_000_000_000 + nanoseconds / 1_000_000_000)
            limit.tv_nsec = Int(nanoseconds % 1_000_000_000)
        }
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        let isRead = priority == .read
        if isRead { waitingReads += 1 }
        defer {
            if isRead {
                waitingReads -= 1
                // Background waiters held back for this read may go now.
                if waitingReads == 0, free > 0 { pthread_cond_broadcast(condition) }
            }
        }
        while free == 0 || (!isRead && waitingReads > 0) {
            if deadline == .distantFuture {
                pthread_cond_wait(condition, mutex)
            } else if pthread_cond_timedwait(condition, mutex, &limit) == ETIMEDOUT {
                return false
            }
        }
        free -= 1
        return true
    }

    /// Gives a slot back.
    func release() {
        pthread_mutex_lock(mutex)
        free += 1
        pthread_mutex_unlock(mutex)
        pthread_cond_broadcast(condition)
    }
}
