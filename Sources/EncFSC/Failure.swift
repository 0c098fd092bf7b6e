import EncFS
#if canImport(Glibc)
import Glibc
#endif

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
