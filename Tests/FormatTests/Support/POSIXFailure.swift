#if canImport(Glibc)
import Glibc
#endif

/// A system call made by a test helper failed (not a library error: the
/// tests never expect this one).
struct POSIXFailure: Error, CustomStringConvertible {
    let operation: String
    let path: [UInt8]
    let code: Int32

    /// Captures the current `errno`.
    init(_ operation: String, _ path: [UInt8]) {
        self.operation = operation
        self.path = path
        code = errno
    }

    var description: String { "\(operation) \(path.debugPath): \(String(cString: strerror(code)))" }
}
