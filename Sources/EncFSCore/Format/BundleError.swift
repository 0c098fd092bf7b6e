#if canImport(Glibc)
import Glibc
#endif

/// Errors of the bundle format layer: opening, unlocking, reading, writing.
///
/// Descriptions never contain key bytes, passphrases or file contents. Paths
/// are kept as raw bytes (file names need not be UTF-8) and rendered only
/// when a message is printed.
package enum BundleError: Error, Sendable {
    /// The file does not start with the encfs magic.
    case notABundle
    /// The bundle's format version is not one this build reads.
    case unsupportedVersion(UInt16)
    /// The fixed header or a key slot is malformed (the reason says which field).
    case corruptHeader(String)
    /// The header's authentication code does not verify under the unwrapped key.
    case headerAuthenticationFailed
    /// No key slot opened with the secrets given; lists the slot kinds present.
    case wrongKey(slotKinds: [String])
    /// The encrypted index failed authentication or validation.
    case corruptIndex(String)
    /// The file's length differs from what the authenticated header records.
    case lengthMismatch(expected: UInt64, actual: UInt64)
    /// A chunk of an entry failed authentication (or could not be read whole).
    case corruptChunk(entry: Int, chunk: UInt64)
    /// No entry at that path.
    case notFound
    /// A path component is not a directory.
    case notADirectory
    /// The entry is a directory where a file was expected.
    case isADirectory
    /// A system call failed; `errno` is the C error, `path` what it was about.
    case io(errno: Int32, operation: String, path: [UInt8])
    /// The source tree changed while it was being packed.
    case sourceChanged(path: [UInt8], what: String)
    /// A value outside the format's limits (too many entries, name too long…).
    case limitExceeded(String)
    /// A cryptographic primitive failed for a reason other than authentication.
    case crypto(String)
    /// No key and no recipient were given to pack with: a bundle needs at
    /// least one key slot.
    case noKeyGiven
    /// A zstd level outside 1 … 19 was asked for.
    case invalidCompressionLevel(Int)
    /// A chunk size (as log2 bytes) outside the format's range was asked for.
    case invalidChunkSize(log2: Int)
    /// The source directory to pack cannot be opened (`errno`, `path`).
    case sourceUnreadable(errno: Int32, path: [UInt8])
    /// `rekey --remove` named a fingerprint no key slot has.
    case unknownSlot(fingerprint: String)
    /// `rekey --remove` would leave the bundle without a key slot.
    case lastSlotRemoved
    /// A key given to add opens a slot (kind and fingerprint) being removed.
    case removedSlotKeyGiven(kind: String, fingerprint: String)
    /// The bundle file was replaced by another while it was being rekeyed.
    case bundleReplaced
    /// `rekey --remove` makes a new content key, and these kept slots
    /// (each "kind fingerprint") cannot wrap it: neither their secret nor
    /// their public key was given, and a slot does not store its public key.
    case slotsNotCarriedOver([String])
    /// A symlink's target leaves the bundle (absolute, or climbing above
    /// the root), refused by default: served, it would read the host's
    /// files through the mount. `path` is the link's path inside the bundle
    /// (in the source tree, when packing; the path being resolved, with an
    /// empty `target`, when a walk through links left the bundle); both
    /// stay raw bytes.
    case externalSymlink(path: [UInt8], target: [UInt8])
    /// A passphrase slot (1-based `slot`) needs more scrypt memory
    /// (128 · r · N bytes) than the reader allows; refused before any
    /// scrypt run, since nothing in the header is authenticated yet.
    case scryptMemoryLimit(slot: Int, needs: UInt64, limit: UInt64)
    /// A signature was required and the bundle has none.
    case notSigned
    /// A signature was required and the bundle's signer (fingerprint given)
    /// is none of the keys it had to be.
    case untrustedSigner(fingerprint: String)
    /// The bundle's signature, by a required signer, does not hold: the
    /// reason says for what (the signed fields, the content key).
    case badSignature(String)
    /// The bundle's signature slot has a version this build cannot check.
    case unsupportedSignature(version: UInt8)
    /// A bundle id was required and the bundle has another (both 16 bytes).
    case unexpectedBundleID(expected: [UInt8], actual: [UInt8])

    /// The errno a FUSE reply carries for this error. The only place where
    /// bundle errors become errno values.
    package var errno: Int32 {
        switch self {
        case .notFound: return ENOENT
        case .notADirectory: return ENOTDIR
        case .isADirectory: return EISDIR
        case .io(let code, _, _): return code == 0 ? EIO : code
        case .limitExceeded: return EFBIG
        case .sourceUnreadable(let code, _): return code == 0 ? EIO : code
        case .slotsNotCarriedOver, .noKeyGiven, .invalidCompressionLevel, .invalidChunkSize, .unknownSlot, .lastSlotRemoved,
             .removedSlotKeyGiven, .bundleReplaced:
            return EINVAL
        case .notABundle, .unsupportedVersion, .corruptHeader, .headerAuthenticationFailed, .wrongKey,
             .corruptIndex, .lengthMismatch, .corruptChunk, .sourceChanged, .crypto, .externalSymlink,
             .scryptMemoryLimit:
            return EIO
        // Raised only while a bundle is opened, before anything is served.
        case .notSigned, .untrustedSigner, .badSignature, .unsupportedSignature, .unexpectedBundleID:
            return EIO
        }
    }

    /// A one-line, lowercase description without a final period.
    package var message: String {
        switch self {
        case .notABundle: return "not an encfs bundle"
        case .unsupportedVersion(let v): return "unsupported bundle format version \(v) (this build reads versions \(BundleFormat.readableVersions.lowerBound) and \(BundleFormat.readableVersions.upperBound))"
        case .corruptHeader(let why): return "corrupted bundle header: \(why)"
        case .headerAuthenticationFailed: return "bundle header failed authentication (modified or damaged)"
        case .wrongKey(let kinds):
            return "wrong key: no key slot opened (the bundle has \(kinds.isEmpty ? "no" : kinds.joined(separator: ", ")) slots)"
        case .corruptIndex(let why): return "corrupted index: \(why)"
        case .lengthMismatch(let expected, let actual):
            return "bundle length is \(actual) bytes but its header records \(expected) (truncated or extended)"
        case .corruptChunk(let entry, let chunk): return "chunk \(chunk) of entry \(entry) failed authentication"
        case .notFound: return "no such file or directory"
        case .notADirectory: return "not a directory"
        case .isADirectory: return "is a directory"
        case .io(let code, let operation, _): return "\(operation) failed: \(String(cString: strerror(code)))"
        case .sourceChanged(_, let what): return "source changed while packing: \(what)"
        case .limitExceeded(let what): return "limit exceeded: \(what)"
        case .crypto(let what): return "cryptographic failure: \(what)"
        case .noKeyGiven: return "no key or recipient given"
        case .invalidCompressionLevel(let level): return "invalid zstd level \(level) (1 … 19)"
        case .invalidChunkSize(let log2): return "invalid chunk size 2^\(log2)"
        case .sourceUnreadable(let code, _): return "cannot read source directory: \(String(cString: strerror(code)))"
        case .unknownSlot(let fingerprint): return "no key slot has fingerprint \(fingerprint)"
        case .lastSlotRemoved: return "refusing to remove the last key slot"
        case .removedSlotKeyGiven(let kind, let fingerprint): return "a key given to add opens the \(kind) slot \(fingerprint) being removed"
        case .bundleReplaced: return "the bundle file was replaced while it was being rekeyed"
        case .slotsNotCarriedOver(let slots):
            return "no secret or public key given for kept key slot\(slots.count == 1 ? "" : "s") \(slots.joined(separator: ", ")): "
                + "removing a slot re-encrypts under a new content key, which every kept slot must wrap again"
        case .externalSymlink(_, let target):
            let what = "symlink points outside the bundle"
            return target.isEmpty ? what : "\(what): \(PrintableText.escaping(target))"
        case .scryptMemoryLimit(let slot, let needs, let limit):
            return "key slot \(slot) (passphrase) needs \(Self.sizeText(needs)) of scrypt memory, more than the \(Self.sizeText(limit)) allowed"
        case .notSigned: return "bundle is not signed"
        case .untrustedSigner(let fingerprint): return "bundle is signed by a key not given with --verify-key (signer \(fingerprint))"
        case .badSignature(let why): return "bundle signature does not verify: \(why)"
        case .unsupportedSignature(let version):
            return "bundle signature has version \(version) (this build checks version \(BundleSignature.version))"
        case .unexpectedBundleID(let expected, let actual):
            return "bundle id is \(Hex.encode(actual)), not the expected \(Hex.encode(expected))"
        }
    }

    /// `1 GiB`, `512 MiB`, `3 KiB`, `100 bytes`: exact, for limits.
    static func sizeText(_ bytes: UInt64) -> String {
        for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] where bytes >= 1 << shift && bytes % (1 << shift) == 0 {
            return "\(bytes >> shift) \(unit)"
        }
        return "\(bytes) bytes"
    }

    /// The path the error is about, when it has one.
    package var path: [UInt8]? {
        switch self {
        case .io(_, _, let path) where !path.isEmpty: return path
        case .sourceChanged(let path, _): return path
        case .sourceUnreadable(_, let path): return path
        case .externalSymlink(let path, _): return path
        default: return nil
        }
    }

    /// Wraps the current `errno` of a failed system call.
    static func lastIO(_ operation: String, _ path: [UInt8] = []) -> BundleError {
        .io(errno: Glibc.errno, operation: operation, path: path)
    }
}
