internal import COpenSSL

/// Small secrets (keys, derived keys) come from OpenSSL's secure heap: one
/// region `mlock`ed once, with guard pages, excluded from core dumps.
///
/// Locking every 32-byte key on its own cost two system calls and a split
/// and merge of the process's memory mappings per key: a large share of
/// encfs-pack's time with many files (one derived key per file; figures in
/// docs/PERFORMANCE.md), and a part of every first read of a file through
/// the mount. The heap is made on
/// first use, process-wide (like OpenSSL's own), and only serves requests up
/// to ``largestBlock``; larger secrets, or any request once the heap is full,
/// take the per-buffer path in `SecureBytes`.
enum SecureHeap {
    /// Bytes in the heap: 8,192 keys of 32 bytes. OpenSSL draws on the
    /// same heap for private-key arithmetic (secure BIGNUMs) once it
    /// exists, so it has room to spare.
    static let size = 256 << 10
    /// Smallest block the heap hands out (a power of two).
    static let minimumBlock = 16
    /// Largest request served from the heap.
    static let largestBlock = 256

    /// CRYPTO_secure_malloc_init's result: 1 locked, 2 usable but not
    /// locked (RLIMIT_MEMLOCK), 0 unusable. Swift runs this once, atomically.
    private static let state: Int32 = CRYPTO_secure_malloc_init(size, minimumBlock)

    /// `count` zeroed bytes from the heap and whether they are locked, or
    /// nil when the request is too large, the heap is unusable or full.
    ///
    /// Leaves this thread's OpenSSL error queue exactly as it found it.
    /// Later OpenSSL releases queue `CRYPTO_R_SECURE_MALLOC_FAILURE` when
    /// the heap is full (3.0 queues nothing); left there, that entry would
    /// be reported by ``openSSLError(_:)``, which reads the oldest entry, as
    /// the cause of the next, unrelated failure. A mark set before the call
    /// and popped after it removes exactly what the call added, and nothing
    /// that was queued before (the old code cleared the whole queue after a
    /// success, losing errors that belonged to someone else).
    static func allocate(_ count: Int) -> (buffer: UnsafeMutableRawBufferPointer, locked: Bool)? {
        guard count >= 1, count <= largestBlock, state != 0,
              let raw = OpenSSLErrorQueue.discardingNewErrors({ CRYPTO_secure_zalloc(count, "SecureHeap", 0) })
        else { return nil }
        return (UnsafeMutableRawBufferPointer(start: raw, count: count), state == 1)
    }

    /// Makes sure the heap exists before OpenSSL allocates private key
    /// material of its own. OpenSSL puts X25519 and Ed25519 private keys
    /// and RSA private numbers in `OPENSSL_secure_malloc` memory, which is
    /// this heap once it exists and the ordinary heap before; so every path
    /// that generates or reads a private key calls this first.
    static func prepare() {
        _ = state
    }

    /// Wipes `buffer` (from ``allocate(_:)``) and returns it to the heap.
    /// The corresponding C function is `CRYPTO_secure_clear_free`.
    static func free(_ buffer: UnsafeMutableRawBufferPointer) {
        CRYPTO_secure_clear_free(buffer.baseAddress, buffer.count, "SecureHeap", 0)
    }

    /// Bytes of the heap in use now (for tests).
    static var usedBytes: Int { CRYPTO_secure_used() }
}
