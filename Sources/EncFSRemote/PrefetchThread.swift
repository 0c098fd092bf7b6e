#if canImport(Glibc)
import Glibc
#endif

/// A detached thread of its own for one start-up prefetch worker.
///
/// Why not Dispatch: libdispatch on Linux runs no more blocking work items
/// at once than there are CPUs, so a list's workers (one per connection,
/// each waiting on a request most of the time) made two requests at a time
/// on two cores, not `--connections` (docs/PERFORMANCE.md, "A fleet").
enum PrefetchThread {
    private final class Job {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    /// Runs `body` on a new detached thread, which inherits the caller's
    /// signal mask.
    ///
    /// - Returns: false when no thread could be made (`body` did not run).
    static func start(_ body: @escaping @Sendable () -> Void) -> Bool {
        let job = Unmanaged.passRetained(Job(body)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { raw in
            guard let raw else { return nil }
            Unmanaged<Job>.fromOpaque(raw).takeRetainedValue().body()
            return nil
        }, job)
        guard rc == 0 else {
            Unmanaged<Job>.fromOpaque(job).release()
            return false
        }
        pthread_detach(thread)
        return true
    }
}
