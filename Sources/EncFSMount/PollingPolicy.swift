import CFuse
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// When a server looks for its next request by polling instead of sleeping
/// in the kernel, and for how long: the rules both transports follow
/// (`--poll-us`; the classic loop's ``RequestPoller`` and the rings'
/// ``RingServer``), so that they poll alike.
///
/// - **Start** after ``calmRequestsToPoll`` requests in a row each taken
///   while no other was being served (a lone reader waiting on each reply).
/// - **Stop** when ``queuedComebacksToStop`` times in a row a request was
///   already waiting when the server came back from serving one: requests
///   queue, so every thread is better put to work than one spinning.
/// - **Poll** only while the last request came within the window (an idle
///   or sparse mount sleeps, it never spins for nothing), and not at all
///   for ``requestsBackingOff`` requests once another task wanted the
///   CPU while the server polled (a busy machine: polling would take from
///   it).
/// - **Spin politely**: the caller's check runs with `sched_yield` between
///   tries, so another task waiting for this CPU (the reader itself, when
///   they share one) runs first.
///
/// Everything is an atomic: the classic loop's workers share one policy,
/// a ring server keeps one of its own.
package final class PollingPolicy: Sendable {
    /// How long a server polls after its last request, in nanoseconds.
    let windowNanoseconds: Int64
    private let calmStreak = Atomic<Int>(0)
    private let queuedStreak = Atomic<Int>(0)
    /// Whether the next wait may poll: the last request came within the
    /// window.
    private let lastWithinWindow = Atomic<Bool>(true)
    /// Requests left during which nobody polls: others wanted the CPU.
    private let backOff = Atomic<Int>(0)

    /// Requests in a row served alone before polling starts.
    static let calmRequestsToPoll = 32
    /// Comebacks in a row that find a request queued before polling stops.
    static let queuedComebacksToStop = 2
    /// Requests served without polling after the poller's CPU was wanted
    /// by another task while it polled.
    static let requestsBackingOff = 1000
    /// Largest `--poll-us`.
    package static let maximumMicroseconds = 1000
    /// `--poll-us` unless given: long enough for a reader's next request
    /// after a reply, short enough that a sparse workload spins little.
    package static let defaultMicroseconds = 50

    /// - Parameter microseconds: the window, 1 … ``maximumMicroseconds``.
    init(microseconds: Int) {
        windowNanoseconds = Int64(microseconds) * 1000
    }

    /// Notes a request taken.
    ///
    /// - Parameter alone: whether no other request was being served.
    /// - Returns: whether polling should start now (the calm streak is
    ///   long enough; the streaks start over).
    func noteTaken(alone: Bool) -> Bool {
        guard alone else {
            calmStreak.store(0, ordering: .relaxed)
            return false
        }
        guard calmStreak.add(1, ordering: .relaxed).newValue >= Self.calmRequestsToPoll else { return false }
        calmStreak.store(0, ordering: .relaxed)
        queuedStreak.store(0, ordering: .relaxed)
        return true
    }

    /// Notes a server's comeback from serving a request while polling.
    ///
    /// - Parameter foundQueued: whether a request was already waiting.
    /// - Returns: whether polling should stop now.
    func noteComeback(foundQueued: Bool) -> Bool {
        guard foundQueued else {
            queuedStreak.store(0, ordering: .relaxed)
            return false
        }
        return queuedStreak.add(1, ordering: .relaxed).newValue >= Self.queuedComebacksToStop
    }

    /// Whether the coming wait should poll first: the last request came
    /// within the window and no back-off is running (this counts one of
    /// its requests down).
    func shouldPoll() -> Bool {
        lastWithinWindow.load(ordering: .relaxed) && backOffOver()
    }

    /// Whether no back-off is running; counts one request of a running one
    /// down.
    func backOffOver() -> Bool {
        guard backOff.load(ordering: .relaxed) > 0 else { return true }
        backOff.subtract(1, ordering: .relaxed)
        return false
    }

    /// Polls: calls `arrived` until it holds, `ended` holds or the window
    /// passes, yielding the CPU between tries. Starts a back-off when the
    /// calling thread was switched out involuntarily meanwhile.
    ///
    /// - Returns: whether `arrived` held (a request was found by polling).
    func poll(arrived: () -> Bool, ended: () -> Bool) -> Bool {
        let switchesBefore = cfuse_thread_involuntary_switches()
        let deadline = Self.now() + windowNanoseconds
        var found = false
        while Self.now() < deadline, !ended() {
            if arrived() {
                found = true
                break
            }
            // Another task waiting for this CPU (the reader itself, on a
            // busy machine) runs first.
            sched_yield()
        }
        if cfuse_thread_involuntary_switches() != switchesBefore {
            // The CPU was wanted by others while this thread polled: the
            // machine is busy, and polling would take from them.
            backOff.store(Self.requestsBackingOff, ordering: .relaxed)
        }
        return found
    }

    /// Notes that a wait which began at `began` (``now()``) ended with a
    /// request: the next wait polls only if this one was within the window.
    func noteWaited(since began: Int64) {
        lastWithinWindow.store(Self.now() - began <= windowNanoseconds, ordering: .relaxed)
    }

    /// CLOCK_MONOTONIC in nanoseconds.
    static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }
}
