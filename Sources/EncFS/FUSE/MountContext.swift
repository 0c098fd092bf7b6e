import CFuse
import CryptCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Everything the FUSE callbacks need, reached through `fuse_req_userdata`.
///
/// Immutable apart from the reply-buffer pool (behind a `Mutex`): callbacks
/// run concurrently on libfuse's worker threads. No globals, so two mounts
/// can live in one process.
final class MountContext: Sendable {
    let reader: BundleReader
    let logger: MountLogger
    let uid: uid_t
    let gid: gid_t
    /// Timeouts for entries and attributes: the content never changes.
    static let cacheTimeout = Double.greatestFiniteMagnitude
    /// Largest read the kernel sends (max_read); reply buffers hold this much.
    static let maximumRead = 1 << 20
    /// Largest read-ahead window asked of the kernel (it also caps it at the
    /// bdi's read_ahead_kb, see `--readahead`).
    static let maximumReadahead = 1 << 20
    private let buffers = Mutex<[ReplyBuffer]>([])
    /// Set once the "could not lock memory" warning has been logged.
    private let warnedAboutLocking = Atomic<Bool>(false)
    /// Damaged chunks already logged. The kernel retries a failed read
    /// (readahead, then the page itself) and programs retry too; a damaged
    /// chunk gets one log line per mount, not one per attempt.
    private let loggedCorruptChunks = Mutex<Set<CorruptChunk>>([])
    /// Beyond this many damaged chunks every failure is logged again
    /// rather than remembered, so the set stays bounded.
    static let maximumLoggedCorruptChunks = 4096

    init(reader: BundleReader, logger: MountLogger) {
        self.reader = reader
        self.logger = logger
        uid = getuid()
        gid = getgid()
    }

    /// The stat of `entry` as a read-only ext4 would report it.
    func attributes(of entry: IndexEntry) -> stat {
        var st = stat()
        st.st_ino = ino_t(entry.position + 1)
        st.st_uid = uid
        st.st_gid = gid
        st.st_blksize = 4096
        let perm = mode_t(entry.mode)
        switch entry.kind {
        case .directory:
            st.st_mode = S_IFDIR | perm
            st.st_nlink = nlink_t(2 + reader.index.subdirectoryCount(of: entry))
            st.st_size = 4096
            st.st_blocks = 8
        case .file:
            st.st_mode = S_IFREG | perm
            st.st_nlink = 1
            st.st_size = off_t(entry.size)
            // Allocated size as ext4 reports a non-sparse file: 4 KiB blocks.
            st.st_blocks = blkcnt_t((entry.size + 4095) / 4096 * 8)
        case .symlink:
            st.st_mode = S_IFLNK | perm
            st.st_nlink = 1
            st.st_size = off_t(entry.size)
            st.st_blocks = 0
        }
        let time = timespec(tv_sec: Int(entry.mtimeSeconds), tv_nsec: Int(entry.mtimeNanoseconds))
        st.st_mtim = time
        st.st_atim = time
        st.st_ctim = time
        return st
    }

    /// The reply for a lookup of `entry`.
    func entryParameters(of entry: IndexEntry) -> fuse_entry_param {
        var e = fuse_entry_param()
        e.ino = fuse_ino_t(entry.position + 1)
        e.generation = 1
        e.attr = attributes(of: entry)
        e.attr_timeout = Self.cacheTimeout
        e.entry_timeout = Self.cacheTimeout
        return e
    }

    /// Whether a failure of `chunk` of the entry at `entry` has not been
    /// logged yet (and records it).
    func isFirstReport(ofCorruptChunk chunk: UInt64, entry: Int) -> Bool {
        let key = CorruptChunk(entry: entry, chunk: chunk)
        return loggedCorruptChunks.withLock { logged in
            guard logged.count < Self.maximumLoggedCorruptChunks else { return !logged.contains(key) }
            return logged.insert(key).inserted
        }
    }

    /// Reply buffers grow in steps of this size: most reads are readahead
    /// (128 KiB by default) or single pages, so a pool of 1 MiB buffers, each
    /// locked in memory, would cost RSS for nothing.
    static let bufferStep = 128 << 10

    /// A pooled buffer of at least `size` bytes (`size` ≤ ``maximumRead``).
    func takeBuffer(size: Int) -> ReplyBuffer {
        if let buffer = buffers.withLock({ pool -> ReplyBuffer? in
            guard let i = pool.lastIndex(where: { $0.bytes.count >= size }) else { return nil }
            return pool.remove(at: i)
        }) {
            return buffer
        }
        let capacity = (max(size, 1) + Self.bufferStep - 1) / Self.bufferStep * Self.bufferStep
        return ReplyBuffer(capacity: min(capacity, Self.maximumRead))
    }

    func returnBuffer(_ buffer: ReplyBuffer) {
        buffers.withLock { pool in
            // Keep at most one buffer per worker thread; a larger buffer
            // displaces the smallest when the pool is full.
            if pool.count < MountSession.maximumThreads {
                pool.append(buffer)
            } else if let i = pool.indices.min(by: { pool[$0].bytes.count < pool[$1].bytes.count }),
                      pool[i].bytes.count < buffer.bytes.count {
                pool[i] = buffer
            }
        }
        // Buffers and chunk workspaces are created on the first reads; warn
        // once if any of them could not be locked in memory.
        if SecureMemoryStatus.lockFailures > 0, !warnedAboutLocking.exchange(true, ordering: .relaxed) {
            logger.log("warning", "could not lock plaintext buffers in memory (RLIMIT_MEMLOCK); they may be swapped out")
        }
    }
}

/// A chunk of an entry, by index position and chunk index.
struct CorruptChunk: Hashable, Sendable {
    let entry: Int
    let chunk: UInt64
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
