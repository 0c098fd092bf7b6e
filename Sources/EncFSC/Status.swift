/// The stable status codes of the C ABI (`encfs_status` in
/// include/encfs.h): the numbers are an ABI and never change.
enum Status: Int32 {
    case ok = 0
    case invalidArgument = 1
    case wrongKey = 2
    case unusableKey = 3
    case notABundle = 4
    case unsupportedVersion = 5
    case damagedBundle = 6
    case damagedChunk = 7
    case noSuchFile = 8
    case notADirectory = 9
    case isADirectory = 10
    case symlinkOutsideBundle = 11
    case tooLarge = 12
    case io = 13
    case crypto = 14
    case notSigned = 15
    case untrustedSigner = 16
    case badSignature = 17
    case unexpectedBundleID = 18
    case noMemory = 19

    /// What `encfs_status_string` returns: static C strings, made once.
    var summary: StaticString {
        switch self {
        case .ok: "success"
        case .invalidArgument: "invalid argument"
        case .wrongKey: "wrong key"
        case .unusableKey: "unusable key"
        case .notABundle: "not an encfs bundle"
        case .unsupportedVersion: "unsupported bundle format version"
        case .damagedBundle: "damaged bundle"
        case .damagedChunk: "damaged chunk"
        case .noSuchFile: "no such file or directory"
        case .notADirectory: "not a directory"
        case .isADirectory: "is a directory"
        case .symlinkOutsideBundle: "symlink points outside the bundle"
        case .tooLarge: "file too large"
        case .io: "input/output error"
        case .crypto: "cryptographic failure"
        case .notSigned: "bundle is not signed"
        case .untrustedSigner: "untrusted signer"
        case .badSignature: "bad signature"
        case .unexpectedBundleID: "unexpected bundle id"
        case .noMemory: "out of memory"
        }
    }
}
