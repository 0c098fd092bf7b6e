import EncFS
#if canImport(Glibc)
import Glibc
#endif

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

/// A failure as the C ABI reports it: the code and its details.
struct Failure: Error {
    var status: Status
    var message: String
    var path: [UInt8] = []
    var chunk: UInt64 = 0
    var errno: Int32 = 0

    /// A refused argument of the function `function`.
    static func invalid(_ function: String, _ why: String) -> Failure {
        Failure(status: .invalidArgument, message: "\(function): \(why)")
    }

    /// The one table from the public API's errors to the C ABI's codes,
    /// exhaustively switched: a new case of `EncryptedBundleError` does not
    /// compile until it has its code here.
    init(_ error: EncryptedBundleError) {
        message = error.description
        switch error {
        case .wrongKey: status = .wrongKey
        case .unusableKey: status = .unusableKey
        case .notABundle: status = .notABundle
        case .unsupportedVersion: status = .unsupportedVersion
        case .damagedBundle: status = .damagedBundle
        case .damagedChunk(let path, let chunk): status = .damagedChunk; self.path = path; self.chunk = chunk
        case .noSuchFile(let path): status = .noSuchFile; self.path = path
        case .notADirectory(let path): status = .notADirectory; self.path = path
        case .isADirectory(let path): status = .isADirectory; self.path = path
        case .symlinkOutsideBundle(let path): status = .symlinkOutsideBundle; self.path = path
        case .tooLarge(let path, _, _): status = .tooLarge; self.path = path
        case .io(let code, _): status = .io; errno = code
        case .cryptoFailure: status = .crypto
        case .notSigned: status = .notSigned
        case .untrustedSigner: status = .untrustedSigner
        case .badSignature: status = .badSignature
        case .unexpectedBundleID: status = .unexpectedBundleID
        }
    }

    init(status: Status, message: String) {
        self.status = status
        self.message = message
    }
}

/// Runs the body of an exported function: its failure becomes the
/// calling thread's last error and the returned code. Every exported
/// function that can fail goes through here.
@inline(__always)
func exported(_ body: () throws(Failure) -> Void) -> Int32 {
    do {
        try body()
        return Status.ok.rawValue
    } catch {
        LastError.record(error)
        return error.status.rawValue
    }
}

/// Runs a call of the public API, turning its error into a ``Failure``.
@inline(__always)
func api<T>(_ body: () throws(EncryptedBundleError) -> T) throws(Failure) -> T {
    do { return try body() } catch { throw Failure(error) }
}
