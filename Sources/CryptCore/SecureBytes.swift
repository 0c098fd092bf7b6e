#if canImport(Glibc)
import Glibc
#endif

/// Owned storage for secret bytes that wipes itself.
///
/// The buffer is allocated once (small secrets from `SecureHeap`, a region
/// locked once; larger ones on their own), locked in memory where
/// `RLIMIT_MEMLOCK` allows (best effort: a failed `mlock` is counted in
/// ``SecureMemoryStatus/lockFailures`` so the caller can warn once), and wiped
/// in `deinit` (``wipe(_:)``). Secrets of the second kind can share a
/// page with each other; `MemoryLock` keeps a shared page locked until the
/// last of them is freed. Bytes are reachable only through
/// `withUnsafeBytes`; `==` compares in constant time.
///
/// Sendable because the bytes are written only by the creator before the
/// value is shared (``init(count:initializer:)``); afterwards it is read-only.
package final class SecureBytes: @unchecked Sendable, Equatable {
    private let storage: UnsafeMutableRawBufferPointer
    private let locked: Bool
    /// Whether `storage` came from `SecureHeap` (small secrets) rather
    /// than its own allocation and `mlock`.
    private let fromHeap: Bool

    /// The number of secret bytes.
    ///
    /// Not `storage.count`: the allocation is at least one byte (so an empty
    /// secret still has a valid base address), which is capacity, not content.
    package var count: Int { _count }

    /// Allocates `count` bytes and lets `initializer` fill them.
    ///
    /// - Parameters:
    ///   - count: the number of bytes (0 is allowed).
    ///   - initializer: writes the secret; if it throws, the buffer is wiped.
    /// - Throws: whatever `initializer` throws.
    package init<E: Error>(count: Int, initializer: (UnsafeMutableRawBufferPointer) throws(E) -> Void) throws(E) {
        precondition(count >= 0, "internal error: negative secret size")
        if let (buffer, heapLocked) = SecureHeap.allocate(max(count, 1)) {
            storage = buffer
            locked = heapLocked
            fromHeap = true
            if !heapLocked { SecureMemoryStatus.recordLockFailure() }
        } else {
            storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 16)
            storage.initializeMemory(as: UInt8.self, repeating: 0)
            locked = MemoryLock.lock(storage)
            fromHeap = false
        }
        let view = UnsafeMutableRawBufferPointer(rebasing: storage[0..<count])
        do {
            try initializer(view)
        } catch {
            Self.release(storage, locked: locked, fromHeap: fromHeap)
            throw error
        }
        _count = count
    }

    /// Wipes and frees storage from either source.
    private static func release(_ storage: UnsafeMutableRawBufferPointer, locked: Bool, fromHeap: Bool) {
        if fromHeap {
            SecureHeap.free(storage)
        } else {
            wipe(storage)
            if locked { MemoryLock.unlock(storage) }
            storage.deallocate()
        }
    }

    private let _count: Int

    /// Copies `bytes` into new secure storage.
    package convenience init(copying bytes: UnsafeRawBufferPointer) {
        self.init(count: bytes.count) { (dst: UnsafeMutableRawBufferPointer) in
            dst.copyMemory(from: bytes)
        }
    }

    /// Copies `bytes` into new secure storage. The caller still owns (and
    /// should wipe) its own copy.
    package convenience init(copying bytes: [UInt8]) {
        self.init(count: bytes.count) { (dst: UnsafeMutableRawBufferPointer) in
            bytes.withUnsafeBytes { dst.copyMemory(from: $0) }
        }
    }

    /// Fresh random bytes from the system generator.
    ///
    /// - Throws: `CryptError.randomFailure`.
    package static func random(count: Int) throws -> SecureBytes {
        try SecureBytes(count: count) { (dst: UnsafeMutableRawBufferPointer) throws in
            try SecureRandom.fill(dst)
        }
    }

    deinit { Self.release(storage, locked: locked, fromHeap: fromHeap) }

    /// Calls `body` with a read-only view of the secret.
    package func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(rebasing: storage[0..<_count]))
    }

    /// Whether the storage could be locked in memory.
    package var isLocked: Bool { locked }

    /// Compares two secrets in constant time (for equal lengths).
    package static func == (lhs: SecureBytes, rhs: SecureBytes) -> Bool {
        guard lhs.count == rhs.count else { return false }
        return lhs.withUnsafeBytes { a in rhs.withUnsafeBytes { b in ConstantTime.equal(a, b) } }
    }

    /// Calls `body` with `count` zeroed bytes of scratch space held like a
    /// secret (secure heap, or a locked allocation of its own), wiped and
    /// freed when `body` returns or throws.
    ///
    /// For intermediate values that are as secret as the result (HKDF's
    /// T(i) blocks) and would otherwise sit in an ordinary, swappable array.
    static func withScratch<R, E: Error>(count: Int, _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
        let scratch = SecureBytes(count: count) { (_: UnsafeMutableRawBufferPointer) in }
        return try withExtendedLifetime(scratch) { () throws(E) -> R in
            try body(UnsafeMutableRawBufferPointer(rebasing: scratch.storage[0..<count]))
        }
    }

    /// Wipes a buffer the caller owns (for example a decrypted chunk buffer).
    ///
    /// The corresponding C function is glibc's `explicit_bzero`, which the
    /// compiler cannot optimize away, like `OPENSSL_cleanse`, but which
    /// wipes at `memset`'s speed, where `OPENSSL_cleanse` stores 8 bytes a
    /// step: chunk buffers are wiped after every chunk, and that loop was a
    /// visible share of packing and reading compressed bundles
    /// (docs/PERFORMANCE.md). Elsewhere `OPENSSL_cleanse`.
    package static func wipe(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
#if canImport(Glibc)
        explicit_bzero(base, buffer.count)
#else
        OpenSSLMemory.cleanse(UnsafeMutableRawBufferPointer(start: base, count: buffer.count))
#endif
    }
}
