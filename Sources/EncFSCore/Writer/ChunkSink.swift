import CryptCore
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Buffers sealed chunks and writes them on a second thread, straight to the
/// disk where the file system allows (`O_DIRECT`).
///
/// Two 4 MiB buffers: while one is written (`pwrite` on a serial dispatch
/// queue), the packer reads and encrypts into the other, so reading,
/// encryption and writing overlap. A write error is reported at the next
/// hand-over or at ``finish()``. When hashing, the writer thread also
/// hashes each buffer before writing it, up to ``dataDigest()``, so the
/// signature's chunk digest costs the packer thread nothing.
///
/// Direct writes: the bundle is ciphertext that nobody reads back while it
/// is packed, and copying it into the page cache was half of the writer
/// thread's time, with the dirty pages then written back at the final
/// `fsync` or in competition with the source's reads (docs/PERFORMANCE.md).
/// `O_DIRECT` needs aligned file offsets, lengths and memory, so every
/// buffer starts at an aligned file offset: the first one at the header's
/// offset rounded down (the bytes before the payload are zeros there, and
/// the header is written over them at the end), and when a buffer is
/// handed over only its aligned part is written and the unaligned tail
/// moves to the front of the next buffer. ``finish()`` writes the last
/// block padded with zeros, cuts the file to its length and turns
/// `O_DIRECT` off for the header's small write. A file system that refuses
/// `O_DIRECT` (at open or at a write, e.g. a short write at disk full that
/// leaves an unaligned rest) gets ordinary writes from then on, each range
/// pushed to writeback right away (`POSIX_FADV_DONTNEED`).
final class ChunkSink {
    /// The bundle file (held, not owned alone: `AtomicFile` has it too).
    private let file: FileDescriptor
    private let path: [UInt8]
    private let buffers: [WriteBuffer]
    private var current = 0
    /// Bytes in the current buffer, including a carried-over tail.
    private var used = 0
    /// Bytes at the front of the current buffer already hashed (the tail
    /// carried over from the last one).
    private var hashedInBuffer = 0
    /// File offset of the current buffer's first byte (aligned).
    private var base: UInt64
    /// File offset of the payload's first byte (the header's length).
    private let start: UInt64
    private let direct: DirectWrites
    private let writer = DispatchQueue(label: "encfs-pack.writer")
    /// Signalled when the write in flight has finished. Starts at 0 and is
    /// back at 0 whenever nothing is in flight (libdispatch traps when a
    /// semaphore is freed below its initial value).
    private let idle = DispatchSemaphore(value: 0)
    private var inFlight = false
    private let failure = WriteFailure()
    /// Hashes what is submitted while not nil.
    private var hasher: SubmittedDataHasher?
    static let capacity = 4 << 20
    /// File offsets and lengths of direct writes are multiples of this (the
    /// largest logical block size in use; buffers are page-aligned).
    static let alignment = 4096

    /// - Parameters:
    ///   - startOffset: where the payload starts in the file.
    ///   - hashing: hash the bytes written until ``dataDigest()``.
    ///   - direct: try `O_DIRECT` (ordinary writes if the file system
    ///     refuses it).
    init(file: FileDescriptor, startOffset: UInt64, hashing: Bool = false, direct: Bool = true) throws {
        self.file = file
        self.path = file.path
        start = startOffset
        base = startOffset & ~UInt64(Self.alignment - 1)
        buffers = [WriteBuffer(capacity: Self.capacity), WriteBuffer(capacity: Self.capacity)]
        hasher = hashing ? SubmittedDataHasher() : nil
        self.direct = DirectWrites(file: file, requested: direct)
        // What lies before the payload in the first block: zeros now, the
        // header later.
        used = Int(startOffset - base)
        hashedInBuffer = used
        buffers[0].bytes.baseAddress?.initializeMemory(as: UInt8.self, repeating: 0, count: used)
    }

    deinit {
        // Wait for a write still in flight before its buffer goes away.
        waitForWrite()
    }

    /// Whether writes still bypass the page cache (for tests and figures).
    var writesDirectly: Bool { direct.isOn }

    private func waitForWrite() {
        if inFlight {
            idle.wait()
            inFlight = false
        }
    }

    /// Bytes of payload produced so far (buffered included).
    var dataLength: UInt64 { base + UInt64(used) - start }

    /// Hands out `count` bytes of buffer space for `body` to fill.
    func withSpace(_ count: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> Void) throws {
        // A carried tail is shorter than the alignment, so `count` always
        // fits after a hand-over.
        precondition(count <= Self.capacity - Self.alignment, "internal error: chunk larger than the write buffer")
        if count > Self.capacity - used { try submit() }
        try body(UnsafeMutableRawBufferPointer(rebasing: buffers[current].bytes[used..<(used + count)]))
        used += count
    }

    /// Appends bytes (the sealed index) after everything buffered.
    func append(_ bytes: [UInt8]) throws {
        var offset = 0
        let piece = Self.capacity - Self.alignment
        while offset < bytes.count {
            let n = min(piece, bytes.count - offset)
            try withSpace(n) { space in
                bytes.withUnsafeBytes { space.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + n)])) }
            }
            offset += n
        }
    }

    /// The SHA-256 of everything appended so far, when hashing (nil
    /// otherwise); what is appended later is not hashed.
    ///
    /// - Throws: the first write error.
    func dataDigest() throws -> [UInt8]? {
        guard let hasher else { return nil }
        try submit()
        waitForWrite()
        if let error = failure.value.withLock({ $0 }) { throw error }
        self.hasher = nil
        // The writer queue is idle: no other thread touches the hasher now.
        return hasher.hasher.finalize()
    }

    /// Writes everything and waits for it; throws the first write error.
    /// The file then ends at the last byte appended, and `O_DIRECT` is off.
    func finish() throws {
        try submit()
        waitForWrite()
        if let error = failure.value.withLock({ $0 }) { throw error }
        let end = base + UInt64(used)
        if used > 0 {
            // The last, partial block: padded to the alignment, then cut.
            let padded = (used + Self.alignment - 1) & ~(Self.alignment - 1)
            let buffer = buffers[current].bytes
            if let start = buffer.baseAddress { (start + used).initializeMemory(as: UInt8.self, repeating: 0, count: padded - used) }
            try direct.write(UnsafeRawBufferPointer(rebasing: buffer[0..<padded]), at: base, path: path)
            guard ftruncate(file.rawValue, off_t(end)) == 0 else { throw BundleError.lastIO("truncate", path) }
        }
        direct.turnOff()
    }

    /// Hands the current buffer's aligned part to the writer; its
    /// unaligned tail moves to the front of the other buffer.
    private func submit() throws {
        // The other buffer's write must be done before it is filled again.
        waitForWrite()
        if let error = failure.value.withLock({ $0 }) { throw error }
        let length = used & ~(Self.alignment - 1)
        let buffer = buffers[current]
        let next = buffers[1 - current]
        let hashRange = hashedInBuffer..<used
        let tail = used - length
        if length == 0 {
            // Less than one block: nothing to write yet; only hash it.
            if !hashRange.isEmpty, let hasher {
                hasher.hasher.update(UnsafeRawBufferPointer(rebasing: buffer.bytes[hashRange]))
                hashedInBuffer = used
            }
            return
        }
        if tail > 0 {
            // Read-only on both sides: the writer only reads `buffer` too.
            next.bytes.copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer.bytes[length..<used]))
        }
        let offset = base
        let (path, idle, failure, hasher, direct) = (self.path, self.idle, self.failure, self.hasher, self.direct)
        writer.async {
            if !hashRange.isEmpty { hasher?.hasher.update(UnsafeRawBufferPointer(rebasing: buffer.bytes[hashRange])) }
            do {
                try direct.write(UnsafeRawBufferPointer(rebasing: buffer.bytes[0..<length]), at: offset, path: path)
            } catch let error as BundleError {
                failure.value.withLock { if $0 == nil { $0 = error } }
            } catch {
                failure.value.withLock { if $0 == nil { $0 = .io(errno: EIO, operation: "write", path: path) } }
            }
            idle.signal()
        }
        inFlight = true
        base += UInt64(length)
        used = tail
        hashedInBuffer = tail
        current = 1 - current
    }
}

/// Whether a ``ChunkSink`` writes with `O_DIRECT`, and its writes.
///
/// `O_DIRECT` is a file status flag of the descriptor: it is set once at
/// the start and cleared for good when a write is refused (`EINVAL`) or at
/// the end; the state is atomic, so the writer queue and the packer agree.
final class DirectWrites: Sendable {
    /// Glibc defines `O_DIRECT` only under `_GNU_SOURCE`, which Swift's
    /// Glibc module does not see; its value differs between architectures.
#if arch(arm64) || arch(arm)
    static let flag: Int32 = 0o200000
#elseif arch(powerpc64le) || arch(powerpc64)
    static let flag: Int32 = 0o400000
#else
    static let flag: Int32 = 0o40000
#endif

    private let file: FileDescriptor
    private let on = Atomic<Bool>(false)

    /// Sets `O_DIRECT` on `file` when `requested` and the file system takes it.
    init(file: FileDescriptor, requested: Bool) {
        self.file = file
        let fd = file.rawValue
        guard requested else { return }
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0, fcntl(fd, F_SETFL, flags | Self.flag) == 0 {
            on.store(true, ordering: .releasing)
        }
    }

    var isOn: Bool { on.load(ordering: .acquiring) }

    /// Clears `O_DIRECT` (idempotent).
    func turnOff() {
        guard on.exchange(false, ordering: .acquiringAndReleasing) else { return }
        let flags = fcntl(file.rawValue, F_GETFL)
        if flags >= 0 { _ = fcntl(file.rawValue, F_SETFL, flags & ~Self.flag) }
    }

    /// Writes all of `bytes` at `offset`: directly while that works, else
    /// through the page cache, starting writeback of the range at once.
    ///
    /// - Throws: `BundleError.io`.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64, path: [UInt8]) throws {
        guard let start = bytes.baseAddress else { return }
        var done = 0
        while done < bytes.count {
            let n = SystemCall.retryingInterrupts { pwrite(file.rawValue, start + done, bytes.count - done, off_t(offset) + off_t(done)) }
            if n > 0 {
                done += n
                continue
            }
            if n < 0 && errno == EINVAL && isOn {
                // Refused, or an unaligned rest after a short write: go on
                // through the page cache.
                turnOff()
                continue
            }
            throw BundleError.io(errno: n == 0 ? EIO : errno, operation: "write", path: path)
        }
        if !isOn {
            // Start writing these pages to disk now (Linux starts writeback
            // for dirty pages on POSIX_FADV_DONTNEED, without waiting), so
            // the disk works while the next buffers are read and encrypted,
            // instead of all at the final fsync.
            _ = posix_fadvise(file.rawValue, off_t(offset), off_t(bytes.count), POSIX_FADV_DONTNEED)
        }
    }
}

/// The first write error of a ``ChunkSink``, shared with its writer queue.
final class WriteFailure: Sendable {
    let value = Mutex<BundleError?>(nil)
}

/// The hasher of a ``ChunkSink``'s data. `@unchecked Sendable`: only the
/// sink's serial writer queue updates it, and the sink reads the digest
/// only once that queue is idle.
final class SubmittedDataHasher: @unchecked Sendable {
    let hasher = SHA256.Hasher()
}

/// One write buffer of ``ChunkSink``; it holds ciphertext only.
/// `@unchecked Sendable`: the sink hands it to the writer queue and does not
/// touch it again until the write has signalled.
final class WriteBuffer: @unchecked Sendable {
    let bytes: UnsafeMutableRawBufferPointer

    init(capacity: Int) {
        bytes = .allocate(byteCount: capacity, alignment: 4096)
    }

    deinit { bytes.deallocate() }
}

