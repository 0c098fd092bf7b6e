import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// When the mount was last used, in whole seconds of the monotonic clock,
/// for `--idle-lock`.
///
/// Touched by every read, so it stores only when the second changed
/// (a load, not a store, on the common path: no cache line bounces between
/// workers) and reads the coarse clock (vDSO, no system call).
package final class ActivityClock: Sendable {
    private let lastUse = Atomic<Int>(ActivityClock.now())

    /// Seconds on the coarse monotonic clock.
    package static func now() -> Int {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &time)
        return time.tv_sec
    }

    /// Records a use now.
    package func touch() {
        let now = Self.now()
        if lastUse.load(ordering: .relaxed) != now { lastUse.store(now, ordering: .relaxed) }
    }

    /// Whole seconds since the last use.
    package var idleSeconds: Int { max(0, Self.now() - lastUse.load(ordering: .relaxed)) }
}
