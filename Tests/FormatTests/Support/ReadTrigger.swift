import Foundation
import SharedTestSupport
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Runs an action on another thread as soon as a file is first read.
///
/// The packer offers no hook between "file opened and its size fixed" and
/// "file read", so the tests watch the file with inotify: `IN_ACCESS` is
/// queued only after a `read` has returned data, which is necessarily after
/// the `open` and `fstat` that fixed the snapshot. The action (shrink or grow
/// the file) therefore always lands while the file is being read or after,
/// never before. The writer must notice either way: a short read, one byte
/// too many, or a size changed at its final `fstat`. It could miss the change
/// only if this thread did not run before the whole file had been encrypted;
/// the files used are 16 MiB (thousands of chunk reads) against a wake-up
/// latency of microseconds.
final class ReadTrigger: Sendable {
    private let inotify: Int32
    private let done = DispatchSemaphore(value: 0)
    private let ran = Mutex(false)

    /// Starts watching `path`; `action` runs at most once, within `timeout`.
    init(path: [UInt8], timeout: Int32 = 20_000, action: @escaping @Sendable () -> Void) throws {
        inotify = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard inotify >= 0 else { throw POSIXFailure("inotify_init1", path) }
        guard path.withCPath({ inotify_add_watch(inotify, $0, UInt32(IN_ACCESS)) }) >= 0 else {
            close(inotify)
            throw POSIXFailure("inotify_add_watch", path)
        }
        let fd = inotify
        let thread = Thread { [self] in
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&poller, 1, timeout) == 1 {
                action()
                ran.withLock { $0 = true }
            }
            done.signal()
        }
        thread.start()
    }

    deinit { close(inotify) }

    /// Waits for the watching thread to finish.
    ///
    /// - Returns: whether the action ran.
    func wait() -> Bool {
        done.wait()
        return ran.withLock { $0 }
    }
}
