import EncFSCore
import CryptCore
#if canImport(Glibc)
import Glibc
#endif

extension EncryptedBundleError {
    /// The public form of any error the core raises: the only place where
    /// `BundleError`, `KeyInputError` and `CryptError` become
    /// ``EncryptedBundleError``, exhaustively switched so a new internal
    /// case cannot slip out unmapped.
    ///
    /// - Parameters:
    ///   - error: what the core, a key file or a byte source threw.
    ///   - path: the bundle path the call was about (empty for the bundle
    ///     as a whole), for the cases that name one.
    init(_ error: any Error, path: [UInt8]) {
        switch error {
        case let error as EncryptedBundleError:
            self = error
        case let error as BundleError:
            self = Self(bundleError: error, path: path)
        case let error as KeyInputError:
            let file = error.path.map { " (\(String(decoding: $0, as: UTF8.self)))" } ?? ""
            self = .unusableKey(reason: error.message + file)
        case let error as CryptError:
            self = .cryptoFailure(reason: error.description)
        default:
            // A custom ByteSource may throw errors of its own; its
            // description is all that can be said about them.
            self = .io(errno: EIO, what: "read (\(error))")
        }
    }

    private init(bundleError error: BundleError, path: [UInt8]) {
        switch error {
        case .notABundle: self = .notABundle
        case .unsupportedVersion(let version): self = .unsupportedVersion(version)
        case .corruptHeader(let why): self = .damagedBundle(.header, reason: why)
        case .headerAuthenticationFailed: self = .damagedBundle(.header, reason: "header failed authentication")
        case .wrongKey(let names): self = .wrongKey(slotKinds: names.map(EncryptedBundle.SlotKind.init(slotKindName:)))
        case .corruptIndex(let why): self = .damagedBundle(.index, reason: why)
        case .lengthMismatch: self = .damagedBundle(.fileLength, reason: error.message)
        // The entry number means nothing to a caller: the path it asked
        // about does.
        case .corruptChunk(_, let chunk): self = .damagedChunk(path: path, chunk: chunk)
        case .notFound: self = .noSuchFile(path: path)
        case .notADirectory: self = .notADirectory(path: path)
        case .isADirectory: self = .isADirectory(path: path)
        case .io(let code, let operation, let subject):
            let about = subject.isEmpty ? "" : " \(String(decoding: subject, as: UTF8.self))"
            self = .io(errno: code == 0 ? EIO : code, what: operation + about)
        // Raised by a walk through links that leaves the bundle
        // (BundleIndex.resolve), naming the path asked for; never at open,
        // since EncryptedBundle opens with such links allowed.
        case .externalSymlink: self = .symlinkOutsideBundle(path: path)
        // Reading raises .limitExceeded only for passphrase slots that ask
        // for more scrypt work than readers spend: a hostile or damaged
        // header.
        case .limitExceeded(let what): self = .damagedBundle(.header, reason: what)
        // Likewise a passphrase slot that needs more scrypt memory than
        // readers allow (1 GiB): encfs-pack never writes one.
        case .scryptMemoryLimit: self = .damagedBundle(.header, reason: error.message)
        case .crypto(let what): self = .cryptoFailure(reason: what)
        case .notSigned: self = .notSigned
        case .untrustedSigner(let fingerprint): self = .untrustedSigner(fingerprint: fingerprint)
        case .badSignature(let why): self = .badSignature(reason: why)
        case .unsupportedSignature: self = .badSignature(reason: error.message)
        case .unexpectedBundleID(let expected, let actual): self = .unexpectedBundleID(expected: Hex.encode(expected), actual: Hex.encode(actual))
        // Raised only by writing and rekeying, never on the read paths the
        // public API takes; mapped for completeness.
        case .sourceChanged, .slotsNotCarriedOver, .noKeyGiven, .invalidCompressionLevel, .invalidChunkSize, .sourceUnreadable,
             .unknownSlot, .lastSlotRemoved, .removedSlotKeyGiven, .bundleReplaced:
            self = .io(errno: error.errno, what: error.message)
        }
    }
}
