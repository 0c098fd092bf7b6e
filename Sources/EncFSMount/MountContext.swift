import EncFSCore
import CFuse
import CryptCore
import Synchronization
#if canImport(Glibc)
import Glibc
import EncFSService
#endif

/// Everything the FUSE callbacks need, reached through `fuse_req_userdata`.
///
/// Immutable apart from per-thread scratch (behind a thread-specific key),
/// the failure log's memory (behind a `Mutex`) and the bundle, which a lock
/// takes away (``LockableBundle``): callbacks run concurrently on libfuse's
/// worker threads. No globals, so two mounts can live in one process.
final class MountContext: Sendable {
    /// The bundle and its lock; requests reach the reader only through
    /// ``serve(_:_:)``.
    let bundle: LockableBundle
    /// How this mount locks (`--protection`, `--idle-lock`, `--start-locked`).
    let lockSettings: LockSettings
    let logger: MountLogger
    let uid: uid_t
    let gid: gid_t
    /// Timeouts for entries and attributes: the content never changes.
    static let cacheTimeout = Double.greatestFiniteMagnitude
    /// Largest read the kernel sends (max_read); reply buffers hold this much.
    ///
    /// Smaller than the read-ahead window on purpose: the kernel splits a
    /// 1 MiB window into four 256 KiB requests that worker threads decrypt
    /// in parallel, where one 1 MiB request kept one core busy while the
    /// other waited; smaller requests cost more round trips than they gain
    /// (figures: docs/PERFORMANCE.md, "Why the code is the way it is").
    static let maximumRead = 256 << 10
    /// Largest read-ahead window asked of the kernel (it also caps it at the
    /// bdi's read_ahead_kb, see `--readahead`).
    static let maximumReadahead = 1 << 20
    /// Whether the kernel treats ENOSYS from open / opendir as "no open
    /// needed" (FUSE_CAP_NO_OPEN_SUPPORT / _NO_OPENDIR_SUPPORT), learned in
    /// `init` before any request.
    let kernelSkipsOpen = Atomic<Bool>(false)
    let kernelSkipsOpendir = Atomic<Bool>(false)
    /// Finds each worker thread's ``WorkerScratch``; its destructor
    /// releases a thread's scratch when libfuse ends the thread.
    private let scratchKey: pthread_key_t
    /// Set once the "could not lock memory" warning has been logged.
    private let warnedAboutLocking = Atomic<Bool>(false)
    /// Decides the errno and the log line of every failed request.
    let failures: FailurePolicy
    /// Decides what a caller may do at open and opendir (and read, with
    /// `--enforce-reads`).
    let access: AccessPolicy
    /// Which transport carries requests (`--transport`): libfuse's loop
    /// alone, or FUSE rings beside it; reads on a ring decrypt into it.
    let transport: FUSETransport

    /// Whether every open and opendir must be answered here, never with
    /// the ENOSYS that lets the kernel skip all later ones: the one place
    /// that says so, for every feature that needs to see each open (the
    /// access policy's rules; a mount that may lock, which counts handles,
    /// refuses opens while locked and keeps `unless-open` files' keys).
    var answersEveryOpen: Bool { access.answersEveryOpen || lockSettings.needsEveryOpen }

    /// Whether every opendir must be answered here (`-o auto_unmount`):
    /// fusermount3 unmounts a killed daemon's mount only when opening its
    /// root fails with ENOTCONN, and a kernel told to skip opendir opens
    /// the root of a dead mount without asking anyone, so the mount stayed.
    let answersEveryOpendir: Bool

    /// - Parameters:
    ///   - bundle: the bundle, unlocked or not.
    ///   - lockSettings: how the mount locks.
    ///   - logger: where failures are logged.
    ///   - logNames: whether log lines may name entries (`--log-names`).
    ///   - accessRules: who may open (`--allow-*`, `--enforce-reads`).
    ///   - autoUnmount: `-o auto_unmount` (see ``answersEveryOpendir``).
    init(bundle: LockableBundle, lockSettings: LockSettings, logger: MountLogger, logNames: Bool,
         accessRules: AccessRules = AccessRules(), autoUnmount: Bool = false) {
        self.bundle = bundle
        answersEveryOpendir = autoUnmount
        self.lockSettings = lockSettings
        self.logger = logger
        failures = FailurePolicy(bundle: bundle, logger: logger, logNames: logNames)
        access = AccessPolicy(rules: accessRules, logger: logger, failures: failures)
        transport = FUSETransport(logger: logger)
        uid = getuid()
        gid = getgid()
        var key = pthread_key_t()
        let rc = pthread_key_create(&key) { raw in
            guard let raw else { return }
            Unmanaged<WorkerScratch>.fromOpaque(raw).release()
        }
        // Only fails when the process has used up PTHREAD_KEYS_MAX (1024)
        // keys; one mount makes one.
        guard rc == 0 else { preconditionFailure("internal error: pthread_key_create failed (\(rc))") }
        scratchKey = key
    }

    deinit {
        // After the loop: libfuse has joined its workers, whose scratch the
        // destructor released.
        pthread_key_delete(scratchKey)
    }

    /// Permission bits never served: setuid and setgid (06000). The bundle keeps
    /// them (`encfs-inspect ls` shows them), but a mount must not hand out
    /// set-id programs, whatever its options (it is also always `nosuid`,
    /// see ``MountSession/kernelOptions(bundlePath:extra:)``).
    static let unservedModeBits: mode_t = 0o6000

    /// Runs `body` with the unlocked bundle's reader, holding its gate for
    /// the whole request (the reply included: it is sent from the thread's
    /// scratch, which a lock wipes); answers ENOKEY ("Required key not
    /// available", as fscrypt does) when the mount is locked.
    ///
    /// Counts as use for `--idle-lock`. `body` must not call `serve` again.
    ///
    /// - Parameter whenLocked: answers instead while locked (still within
    ///   the gate, so it may use the thread's scratch); by default ENOKEY.
    func serve(_ req: fuse_req_t?, _ body: (BundleReader) -> Void, whenLocked: (() -> Void)? = nil) {
        bundle.activity.touch()
        bundle.withGate { reader in
            if let reader { return body(reader) }
            if let whenLocked { return whenLocked() }
            _ = fuse_reply_err(req, ENOKEY)
        }
    }

    /// The stat of the root while locked: an empty directory only its
    /// owner may enter, so the mountpoint still answers `stat` (and
    /// `encfs-ctl` finds it) without showing anything of the bundle.
    var lockedRootAttributes: stat {
        var st = stat()
        st.st_ino = ino_t(FUSE_ROOT_ID)
        st.st_uid = uid
        st.st_gid = gid
        st.st_blksize = 4096
        st.st_mode = S_IFDIR | 0o500
        st.st_nlink = 2
        st.st_size = 4096
        st.st_blocks = 8
        return st
    }

    /// The stat of `entry` as a read-only ext4 mounted `nosuid` would
    /// report it.
    func attributes(of entry: IndexEntry, in reader: BundleReader) -> stat {
        attributes(of: entry, subdirectoryCount: reader.index.subdirectoryCount(of: entry))
    }

    /// The stat of `entry`, a directory with `subdirectoryCount`
    /// subdirectories or not a directory (0).
    func attributes(of entry: IndexEntry, subdirectoryCount: Int) -> stat {
        var st = stat()
        st.st_ino = ino_t(entry.position + 1)
        st.st_uid = uid
        st.st_gid = gid
        st.st_blksize = 4096
        let perm = mode_t(entry.mode) & ~Self.unservedModeBits
        switch entry.kind {
        case .directory:
            st.st_mode = S_IFDIR | perm
            st.st_nlink = nlink_t(2 + subdirectoryCount)
            st.st_size = 4096
            st.st_blocks = 8
        case .file:
            st.st_mode = S_IFREG | perm
            st.st_nlink = 1
            st.st_size = off_t(entry.fileSize)
            // Allocated size as ext4 reports a non-sparse file: 4 KiB blocks.
            st.st_blocks = blkcnt_t((entry.fileSize + 4095) / 4096 * 8)
        case .symlink:
            st.st_mode = S_IFLNK | perm
            st.st_nlink = 1
            st.st_size = off_t(entry.targetLength)
            st.st_blocks = 0
        }
        let time = timespec(tv_sec: Int(entry.mtimeSeconds), tv_nsec: Int(entry.mtimeNanoseconds))
        st.st_mtim = time
        st.st_atim = time
        st.st_ctim = time
        return st
    }

    /// The reply for a lookup of `entry`. The kernel will cache it: the
    /// caller records the inode for invalidation at lock (`bundle.seen`)
    /// when the kernel counts the reply as a lookup.
    func entryParameters(of entry: IndexEntry, in reader: BundleReader) -> fuse_entry_param {
        var e = fuse_entry_param()
        e.ino = fuse_ino_t(entry.position + 1)
        e.generation = 1
        e.attr = attributes(of: entry, in: reader)
        e.attr_timeout = Self.cacheTimeout
        e.entry_timeout = Self.cacheTimeout
        return e
    }

    /// The reply to a lookup that found nothing: cached as long as a
    /// positive one (inode 0 tells the kernel to cache the miss).
    static var negativeEntry: fuse_entry_param {
        var e = fuse_entry_param()
        e.ino = 0
        e.entry_timeout = cacheTimeout
        return e
    }

    /// Answers `req` for a request about `inode` that failed with
    /// `failure`: the errno and the log line come from ``failures``.
    func reply(_ req: fuse_req_t?, failure: Error, inode: UInt64) {
        _ = fuse_reply_err(req, failures.errno(for: failure, inode: inode))
    }

    /// The context of `req`, handed to libfuse as `userdata` by
    /// ``MountSession``. The corresponding C function is `fuse_req_userdata`.
    static func of(_ req: fuse_req_t?) -> MountContext? {
        guard let req, let raw = fuse_req_userdata(req) else { return nil }
        return Unmanaged<MountContext>.fromOpaque(raw).takeUnretainedValue()
    }

    /// Reply buffers grow in steps of this size: most reads are readahead
    /// (128 KiB by default) or single pages, so a pool of 1 MiB buffers, each
    /// locked in memory, would cost RSS for nothing.
    static let bufferStep = 128 << 10

    /// The calling worker thread's scratch, made on its first request and
    /// registered with the bundle, whose lock wipes it.
    func scratch() -> WorkerScratch {
        if let raw = pthread_getspecific(scratchKey) {
            return Unmanaged<WorkerScratch>.fromOpaque(raw).takeUnretainedValue()
        }
        let scratch = WorkerScratch()
        bundle.register(scratch)
        warnIfMemoryNotLocked()
        // Released by the key's destructor when the thread ends.
        guard pthread_setspecific(scratchKey, Unmanaged.passRetained(scratch).toOpaque()) == 0 else {
            preconditionFailure("internal error: pthread_setspecific failed for a valid key")
        }
        return scratch
    }

    /// Logs once when a plaintext buffer could not be locked in memory;
    /// called when a workspace or reply buffer has just been made.
    func warnIfMemoryNotLocked() {
        if SecureMemoryStatus.lockFailures > 0, !warnedAboutLocking.load(ordering: .relaxed),
           !warnedAboutLocking.exchange(true, ordering: .relaxed) {
            logger.log("warning", "could not lock plaintext buffers in memory (RLIMIT_MEMLOCK); they may be swapped out")
        }
    }
}

/// A pooled reply buffer for reads; wiped when freed.
final class ReplyBuffer: @unchecked Sendable {
    // @unchecked: used by one thread at a time; moves only through the pool.
    let bytes: UnsafeMutableRawBufferPointer
    private let locked: Bool

    init(capacity: Int) {
        bytes = .allocate(byteCount: capacity, alignment: 4096)
        bytes.initializeMemory(as: UInt8.self, repeating: 0)
        locked = SecureMemory.lock(bytes)
    }

    deinit {
        SecureMemory.release(bytes, locked: locked)
        bytes.deallocate()
    }
}
