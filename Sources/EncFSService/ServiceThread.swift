import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// Starts the threads a mount or a server runs beside its main loop (the
/// control socket's, encfs-serve's connection reaper) with every signal
/// blocked: SIGINT, SIGTERM and SIGHUP belong to the thread that ends the
/// process (libfuse's session loop, encfs-serve's `sigwait`); delivered to
/// one of these, they would only interrupt a poll and the process would
/// never end.
package enum ServiceThread {
    /// What the new thread runs.
    private final class Work {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }

    /// Runs `body` on a new thread named `name` (its comm, told apart in
    /// ps and /proc/PID/task), every signal blocked.
    ///
    /// - Returns: the thread, for `pthread_join`.
    /// - Throws: `BundleError.io` (`operation`) when it cannot be made.
    package static func start(named name: String, operation: String, _ body: @escaping @Sendable () -> Void) throws -> pthread_t {
        var made = pthread_t()
        var all = sigset_t()
        var previous = sigset_t()
        sigfillset(&all)
        pthread_sigmask(SIG_BLOCK, &all, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        let work = Unmanaged.passRetained(Work(name: name, body: body)).toOpaque()
        let rc = pthread_create(&made, nil, { raw in
            guard let raw else { return nil }
            let work = Unmanaged<Work>.fromOpaque(raw).takeRetainedValue()
            // PR_SET_NAME names the calling thread only.
            ProcessHardening.setProcessName(work.name)
            work.body()
            return nil
        }, work)
        guard rc == 0 else {
            Unmanaged<Work>.fromOpaque(work).release()
            throw BundleError.io(errno: rc, operation: operation, path: [])
        }
        return made
    }
}
