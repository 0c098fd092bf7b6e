import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Removes a named temporary output file when SIGINT, SIGTERM or SIGHUP
/// ends the process, then lets the signal take its default action (so the
/// exit status still names the signal).
///
/// `AtomicFile` output normally has no name (`O_TMPFILE`) and vanishes with
/// the process. It has one on file systems without `O_TMPFILE` (FUSE, NFS,
/// CIFS, vfat), where it is a hidden named file for the whole run, and for
/// the instant between `linkat` and `rename` in a commit; this removes it
/// on an interrupt. Nothing can remove it after SIGKILL.
///
/// Signal dispositions are process-wide, so this is process-wide state: one
/// name at a time, which is all a pack, rekey or keygen run ever has. The
/// handler may only call async-signal-safe functions (`unlink`, `signal`,
/// `raise`) and must not allocate: the name sits in a buffer allocated up
/// front, published by a lock-free atomic flag. A signal the process was
/// started with ignored (a shell's background job ignores SIGINT) stays
/// ignored.
enum InterruptCleanup {
    private static let signals: [Int32] = [SIGINT, SIGTERM, SIGHUP]
    /// NUL-terminated; written only while `armed` is false.
    nonisolated(unsafe) private static let name = UnsafeMutablePointer<CChar>.allocate(capacity: Int(PATH_MAX) + 1)
    private static let armed = Atomic<Bool>(false)
    /// Whether the handlers are installed; also serializes ``arm(_:)``.
    private static let installed = Mutex<Bool>(false)

    /// Removes `path` if one of the signals arrives before ``disarm()``.
    static func arm(_ path: [UInt8]) {
        guard path.count <= Int(PATH_MAX), !path.contains(0) else { return }
        // Writers take the lock (two threads never mix names); the handler
        // reads only while `armed` is true, so never a half-written name.
        installed.withLock { done in
            armed.store(false, ordering: .sequentiallyConsistent)
            for (i, byte) in path.enumerated() { name[i] = CChar(bitPattern: byte) }
            name[path.count] = 0
            if !done {
                done = true
                installHandlers()
            }
            armed.store(true, ordering: .sequentiallyConsistent)
        }
    }

    /// Forgets the name (it was renamed, linked or removed).
    static func disarm() {
        armed.store(false, ordering: .sequentiallyConsistent)
    }

    /// Called once, under the lock.
    private static func installHandlers() {
        for signal in signals {
            var current = sigaction()
            guard sigaction(signal, nil, &current) == 0 else { continue }
            if let previous = current.__sigaction_handler.sa_handler,
               unsafeBitCast(previous, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self) { continue }
            _ = Glibc.signal(signal, handler)
        }
    }

    private static let handler: @convention(c) (Int32) -> Void = { signal in
        if InterruptCleanup.armed.load(ordering: .sequentiallyConsistent) {
            _ = unlink(InterruptCleanup.name)
        }
        _ = Glibc.signal(signal, SIG_DFL)
        _ = raise(signal)
    }
}
