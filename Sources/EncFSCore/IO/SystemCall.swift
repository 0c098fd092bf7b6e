#if canImport(Glibc)
import Glibc
#endif

/// The one retry loop for system calls.
///
/// Every call that can be interrupted by a signal goes through
/// ``retrying(_:path:_:)``, which repeats it on `EINTR` and turns `-1` into
/// a thrown `BundleError.io` naming the operation and the path, in the
/// spirit of swift-system's `valueOrErrno(retryOnInterrupt:)`; a caller
/// that handles the failure itself (returns nil, tries EAGAIN, ignores a
/// closed standard error) uses ``retryingInterrupts(_:)``, the same loop
/// without the throw. Scripts/check-layering.sh refuses an `EINTR`
/// comparison anywhere else in Sources.
///
/// Both are `@inline(__always)` over a non-escaping closure: nothing is
/// allocated, so the read path may use them.
package enum SystemCall {
    /// Calls `body` until it returns something other than `-1` with `errno`
    /// `EINTR`.
    ///
    /// - Parameters:
    ///   - operation: what failed, for the message ("read", "open bundle").
    ///   - path: what it was about, for the message (may be empty).
    ///   - body: the system call; returns `-1` and sets `errno` on failure.
    /// - Returns: the call's result (never `-1`).
    /// - Throws: `BundleError.io` with the call's `errno`.
    @inline(__always)
    package static func retrying<Result: FixedWidthInteger>(_ operation: StaticString, path: [UInt8] = [],
                                                            _ body: () -> Result) throws(BundleError) -> Result {
        while true {
            let result = body()
            if result != -1 { return result }
            let code = errno
            if code != EINTR { throw BundleError.io(errno: code, operation: "\(operation)", path: path) }
        }
    }

    /// Calls `body` until it returns something other than `-1` with `errno`
    /// `EINTR`, and returns that, `-1` included (`errno` is then the
    /// call's).
    ///
    /// - Parameter body: the system call; returns `-1` and sets `errno` on failure.
    /// - Returns: the first result that is not an interruption.
    @inline(__always)
    package static func retryingInterrupts<Result: FixedWidthInteger>(_ body: () -> Result) -> Result {
        while true {
            let result = body()
            if result != -1 || errno != EINTR { return result }
        }
    }
}
