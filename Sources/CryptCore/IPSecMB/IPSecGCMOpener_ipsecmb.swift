internal import CIPSecMB

/// Opens AES-256-GCM messages with Intel's ipsec-mb instead of OpenSSL 3.0
/// wherever the CPU runs one of its two codes that beat OpenSSL's:
///
/// - VAES with AVX-512: a 4 KiB chunk in about a third of OpenSSL's time,
///   which has no VAES path (docs/PERFORMANCE.md, "AES-GCM: OpenSSL 3.0
///   and ipsec-mb"); sequential reads are CPU-bound and AES-GCM was about
///   half of the daemon's time.
/// - AES-NI with AVX ("gen2"), on CPUs without AVX-512 such as AMD's: a
///   4 KiB chunk in about four fifths of OpenSSL's time, mostly OpenSSL's
///   per-call work (its context, parameter and tag handling) saved
///   (docs/PERFORMANCE.md, "AES-GCM: OpenSSL 3.0 and ipsec-mb").
///
/// One per ``AESGCM``, not thread-safe. It keeps the expanded key of the
/// last key it was given (compared by identity, like ``AESGCM``'s OpenSSL
/// context), in one buffer allocated at init, locked in memory and wiped
/// on every change of key and in `deinit`: opening allocates nothing.
final class IPSecGCMOpener {
    /// One of ipsec-mb's implementations of GCM.
    enum Code: Int32, CaseIterable {
        case vaesAVX512 = 1
        case avx = 2

        /// The name ``AESGCM/openingBackend`` gives.
        var backendName: String {
            switch self {
            case .vaesAVX512: "ipsec-mb (VAES)"
            case .avx: "ipsec-mb (AVX)"
            }
        }

        /// Whether this CPU runs it: every CPU that runs VAES with AVX-512
        /// also runs AVX.
        var runsHere: Bool {
            guard let best = IPSecGCMOpener.cpuCode else { return false }
            return best == self || self == .avx
        }
    }

    /// The code that opens messages on this machine: the fastest the CPU
    /// runs; nil when it runs neither, and OpenSSL does all the work.
    static let cpuCode = Code(rawValue: cimb_cpu_code())

    private let code: Code
    private let expandedKey: UnsafeMutableRawBufferPointer
    private let locked: Bool
    /// The key storage `expandedKey` was expanded from.
    private var expandedFrom: SecureBytes?

    /// An opener with this machine's code, or nil when it has none.
    static func make() -> IPSecGCMOpener? {
        cpuCode.map(IPSecGCMOpener.init(code:))
    }

    /// An opener with `code`, which the caller has checked runs here
    /// (``Code/runsHere``): tests take every code the CPU runs.
    init(code: Code) {
        self.code = code
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
            key.withUnsafeBytes { cimb_gcm256_expand(code.rawValue, $0.baseAddress, expandedKey.baseAddress) }
            expandedFrom = key.bytes
        }
        let verified = cimb_gcm256_open(code.rawValue, expandedKey.baseAddress, plaintext.baseAddress, ciphertext.baseAddress,
                                        UInt64(ciphertext.count), nonce.baseAddress, aad.baseAddress, UInt64(aad.count),
                                        tag.baseAddress) == 1
        if !verified { SecureBytes.wipe(plaintext) }
        return verified
    }
}
