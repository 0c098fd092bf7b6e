import EncFSCore
import CryptCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Tries an unlock request's secrets on a thread of its own, one request
/// at a time, and answers its client.
///
/// Why a thread: each passphrase costs a scrypt run (up to the 1 GiB
/// limit, seconds), and while it runs the control thread must go on
/// answering `status` and `lock --force` and checking the idle timer. A
/// second unlock while one is tried is refused, not queued: a queue would
/// let a peer line up guesses, and its clients would time out waiting.
package final class UnlockWorker: Sendable {
    private let controller: any ControlledService
    /// The running (or finished, not yet joined) thread; `busy` while it
    /// tries a request.
    private let state = Mutex<(thread: pthread_t?, busy: Bool)>((nil, false))

    package init(controller: any ControlledService) {
        self.controller = controller
    }

    /// The thread's name (comm), beside ``ControlServer/threadName``.
    package static let threadName = "encfs-unlock"

    /// What the thread is handed.
    private final class Job: Sendable {
        let worker: UnlockWorker
        let request: SecureBytes
        let client: FileDescriptor
        /// The bundle's lock count when the request came.
        let locksBefore: Int
        init(worker: UnlockWorker, request: SecureBytes, client: FileDescriptor, locksBefore: Int) {
            self.worker = worker
            self.request = request
            self.client = client
            self.locksBefore = locksBefore
        }
    }

    /// Starts trying `request` (an unlock request, its code first) for
    /// `client` on a new thread, which replies and closes the connection.
    /// A lock that comes after this call wins over the unlock.
    ///
    /// - Returns: false, starting nothing, when an unlock is being tried.
    /// - Throws: `BundleError.io` when no thread can be made.
    package func start(_ request: SecureBytes, for client: FileDescriptor) throws -> Bool {
        let claim = state.withLock { state -> (claimed: Bool, finished: pthread_t?) in
            guard !state.busy else { return (false, nil) }
            state.busy = true
            defer { state.thread = nil }
            return (true, state.thread)
        }
        guard claim.claimed else { return false }
        // The previous thread is done (it was not busy): only its exit is
        // waited for.
        if let finished = claim.finished { pthread_join(finished, nil) }
        let job = Unmanaged.passRetained(Job(worker: self, request: request, client: client,
                                             locksBefore: controller.bundle.lockCount)).toOpaque()
        var made = pthread_t()
        // Inherits the control thread's mask: every signal blocked.
        let rc = pthread_create(&made, nil, { raw in
            guard let raw else { return nil }
            let job = Unmanaged<Job>.fromOpaque(raw).takeRetainedValue()
            ProcessHardening.setProcessName(UnlockWorker.threadName)
            job.worker.run(job)
            return nil
        }, job)
        guard rc == 0 else {
            Unmanaged<Job>.fromOpaque(job).release()
            state.withLock { $0.busy = false }
            throw BundleError.io(errno: rc, operation: "start unlock thread", path: [])
        }
        state.withLock { $0.thread = made }
        return true
    }

    /// Waits for the unlock being tried, if any (at unmount).
    package func join() {
        let thread = state.withLock { state -> pthread_t? in
            defer { state.thread = nil }
            return state.thread
        }
        if let thread { pthread_join(thread, nil) }
    }

    private func run(_ job: Job) {
        let answer: ControlProtocol.Reply = job.request.withUnsafeBytes { body in
            let secrets = UnsafeRawBufferPointer(rebasing: body.dropFirst())
            do {
                return .ok(try controller.unlock(with: secrets, locksBefore: job.locksBefore) {
                    !ControlSocket.peerHasGone(job.client)
                })
            } catch {
                return ControlProtocol.Reply(refusing: error)
            }
        }
        // Free before the client hears back: its next unlock must not find
        // this one still running.
        state.withLock { $0.busy = false }
        ControlServer.reply(answer, to: job.client)
    }
}
