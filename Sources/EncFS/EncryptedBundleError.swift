import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// Why an ``EncryptedBundle`` call failed: the one error type of the public
/// API, thrown (typed) by every throwing call, so a `switch` over it is
/// checked for completeness by the compiler.
///
/// Messages never contain key bytes, passphrases or file contents. Paths
/// inside the bundle are raw bytes, since names need not be UTF-8;
/// ``description`` renders them for people.
public enum EncryptedBundleError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No key slot of the bundle opens with the secrets given.
    ///
    /// `slotKinds` lists the kinds of slot the bundle has (each kind once,
    /// in header order), so a caller can ask for the right kind of secret.
    case wrongKey(slotKinds: [EncryptedBundle.SlotKind])
    /// A secret could not be used before any slot was tried: a key file
    /// that is missing, unreadable or not 64 hex characters, a raw key that
    /// is not 32 bytes, an empty passphrase file, an identity file that is
    /// not an X25519 or RSA private key. `reason` names the file, never its
    /// contents.
    case unusableKey(reason: String)
    /// The bytes do not start like an encfs bundle.
    case notABundle
    /// The bundle's format version is one this build does not read.
    case unsupportedVersion(UInt16)
    /// A part of the bundle failed its checks (modified, damaged,
    /// truncated or extended); nothing from it was used.
    case damagedBundle(EncryptedBundle.DamagedPart, reason: String)
    /// A chunk of the file at `path` failed authentication or could not be
    /// read whole; `chunk` counts from 0. No byte of that chunk was
    /// returned, and the caller's buffer holds no plaintext from the read.
    case damagedChunk(path: [UInt8], chunk: UInt64)
    /// Nothing in the bundle at `path`.
    case noSuchFile(path: [UInt8])
    /// A component of `path` (or `path` itself, when a directory was
    /// asked for) is not a directory.
    case notADirectory(path: [UInt8])
    /// `path` is a directory where a file was asked for.
    case isADirectory(path: [UInt8])
    /// `path` leads through a symlink whose target is absolute or climbs
    /// above the bundle's root: the library never leaves the bundle to
    /// follow it.
    case symlinkOutsideBundle(path: [UInt8])
    /// The file at `path` holds `size` bytes, more than the `limit` the
    /// caller allowed for reading it whole.
    case tooLarge(path: [UInt8], size: UInt64, limit: Int)
    /// A system call or a byte source failed: `errno` is the C error
    /// (`EIO` when a custom ``ByteSource`` threw an error of its own; `ELOOP`
    /// for symlinks that loop), `what` says what was being done to what.
    case io(errno: Int32, what: String)
    /// A cryptographic primitive failed for a reason other than
    /// authentication (OpenSSL could not allocate a context, the random
    /// generator failed).
    case cryptoFailure(reason: String)
    /// Verifying keys were given and the bundle carries no signature.
    case notSigned
    /// Verifying keys were given and the bundle is signed by another key;
    /// `fingerprint` is the signer's (16 hex digits, as
    /// ``EncryptedBundle/VerifyingKey/fingerprint`` gives for a key).
    case untrustedSigner(fingerprint: String)
    /// The bundle is signed by one of the verifying keys, but the signature
    /// does not hold for this bundle (modified header or index, another
    /// content key) or has a version this build cannot check.
    case badSignature(reason: String)
    /// An expected bundle id was given and the bundle has another (both as
    /// 32 hex digits).
    case unexpectedBundleID(expected: String, actual: String)

    /// A one-line, lowercase description without a final period; paths
    /// that are not UTF-8 show replacement characters.
    public var description: String {
        switch self {
        case .wrongKey(let kinds):
            let names = kinds.isEmpty ? "no" : kinds.map(\.description).joined(separator: ", ")
            return "wrong key: no key slot opened (the bundle has \(names) slots)"
        case .unusableKey(let reason): return "unusable key: \(reason)"
        case .notABundle: return "not an encfs bundle"
        case .unsupportedVersion(let version):
            return "unsupported bundle format version \(version) (this build reads versions \(BundleFormat.readableVersions.lowerBound) and \(BundleFormat.readableVersions.upperBound))"
        case .damagedBundle(let part, let reason): return "damaged bundle \(part): \(reason)"
        case .damagedChunk(let path, let chunk): return "chunk \(chunk) of \(Self.render(path)) failed authentication"
        case .noSuchFile(let path): return "no such file or directory: \(Self.render(path))"
        case .notADirectory(let path): return "not a directory: \(Self.render(path))"
        case .isADirectory(let path): return "is a directory: \(Self.render(path))"
        case .symlinkOutsideBundle(let path): return "symlink points outside the bundle: \(Self.render(path))"
        case .tooLarge(let path, let size, let limit):
            return "file is too large to read whole: \(Self.render(path)) (\(size) bytes, limit \(limit))"
        case .io(let code, let what): return "\(what) failed: \(String(cString: strerror(code)))"
        case .cryptoFailure(let reason): return "cryptographic failure: \(reason)"
        case .notSigned: return "bundle is not signed"
        case .untrustedSigner(let fingerprint): return "bundle is signed by a key not among the verifying keys (signer \(fingerprint))"
        case .badSignature(let reason): return "bundle signature does not verify: \(reason)"
        case .unexpectedBundleID(let expected, let actual): return "bundle id is \(actual), not the expected \(expected)"
        }
    }

    /// A bundle path for a message: "/" for the root, the bytes as UTF-8
    /// otherwise (invalid sequences become U+FFFD).
    static func render(_ path: [UInt8]) -> String {
        path.isEmpty ? "/" : String(decoding: path, as: UTF8.self)
    }
}
