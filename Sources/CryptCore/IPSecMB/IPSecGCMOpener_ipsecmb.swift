internal import CIPSecMB

/// Opens AES-256-GCM messages with Intel's ipsec-mb on CPUs with vector
/// AES (VAES, VPCLMULQDQ), where its GCM decrypts a 4 KiB chunk about three
/// times as fast as OpenSSL 3.0's, which has no VAES path
/// (docs/PERFORMANCE.md, "Sequential reads: the AES-GCM wall"). Sequential
/// reads are CPU-bound and AES-GCM was about half of the daemon's time.
///
/// One per ``AESGCM``, not thread-safe. It keeps the expanded key of the
/// last key it was given (compared by identity, like ``AESGCM``'s OpenSSL
/// context), in one buffer allocated at init, locked in memory and wiped
/// on every change of key and in `deinit`: opening allocates nothing.
final class VAESGCMOpener {
    /// Whether openings go through ipsec-mb on this machine: the CPU has
    /// AVX-512 with VAES; elsewhere ``make()`` returns nil and OpenSSL does
    /// all the work.
    static let isAvailable = cimb_cpu_has_vaes_avx512() != 0

    private let expandedKey: UnsafeMutableRawBufferPointer
    private let locked: Bool
    /// The key storage `expandedKey` was expanded from.
    private var expandedFrom: SecureBytes?

    /// An opener, or nil when this CPU does not get the fast path.
    static func make() -> VAESGCMOpener? {
        isAvailable ? VAESGCMOpener() : nil
    }

    private init() {
        expandedKey = .allocate(byteCount: cimb_gcm_key_size(), alignment: 64)
        expandedKey.initializeMemory(as: UInt8.self, repeating: 0)
        locked = SecureMemory.lock(expandedKey)
    }

    deinit {
        SecureMemory.release(expandedKey, locked: locked)
        expandedKey.deallocate()
    }

    /// Decrypts `ciphertext` into `plaintext` (same length) and checks the
    /// tag; returns false, with `plaintext` wiped, when it does not verify.
    /// Callers pass non-empty buffers (the C function wants real pointers).
    func open(key: SymmetricKey, nonce: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer,
              ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer,
              into plaintext: UnsafeMutableRawBufferPointer) -> Bool {
        if expandedFrom !== key.bytes {
            SecureBytes.wipe(expandedKey)
            key.withUnsafeBytes { cimb_gcm256_expand($0.baseAddress, expandedKey.baseAddress) }
            expandedFrom = key.bytes
        }
        let verified = cimb_gcm256_open(expandedKey.baseAddress, plaintext.baseAddress, ciphertext.baseAddress,
                                        UInt64(ciphertext.count), nonce.baseAddress, aad.baseAddress, UInt64(aad.count),
                                        tag.baseAddress) == 1
        if !verified { SecureBytes.wipe(plaintext) }
        return verified
    }
}
