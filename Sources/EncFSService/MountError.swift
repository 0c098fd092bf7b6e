#if canImport(Glibc)
import Glibc
#endif

/// Errors of the mount layer's own: starting the background daemon and
/// hearing back from it. (What the bundle or libfuse report stays a
/// `BundleError`.)
package enum MountError: Error, Sendable, Equatable {
    /// A pipe, the bundle hand-off or the spawn itself failed.
    case daemonNotStarted(errno: Int32, operation: String)
    /// The content key could not be written to the daemon; EPIPE when the
    /// daemon had already exited.
    case keyNotHandedOver(errno: Int32)
    /// The daemon reported why it could not mount: what went wrong (the
    /// meaning), its message and path (for people).
    case daemonFailed(code: ErrorCode, message: String, path: [UInt8]?)
    /// The daemon exited without saying whether it mounted.
    case daemonExited
    /// The daemon reported the mount, but the mount does not answer.
    case daemonStopped
    /// `--transport uring` was asked for and FUSE over io_uring cannot
    /// serve here (the reason: kernel, module parameter, io_uring refused).
    case transportUnavailable(reason: String)

    /// A one-line, lowercase description without a final period.
    package var message: String {
        switch self {
        case .daemonNotStarted(let code, let operation):
            return "cannot start the mount daemon: \(operation) failed: \(String(cString: strerror(code)))"
        case .keyNotHandedOver(let code):
            return "cannot hand the key to the mount daemon: \(String(cString: strerror(code)))"
        case .daemonFailed(_, let message, _): return message
        case .daemonExited: return "the mount daemon exited before the mount was ready"
        case .daemonStopped: return "the mount daemon stopped right after mounting (see its log)"
        case .transportUnavailable(let reason): return "--transport uring is not available: \(reason)"
        }
    }

    /// The path the error is about, when it has its own.
    package var path: [UInt8]? {
        if case .daemonFailed(_, _, let path) = self { return path }
        return nil
    }

    /// What went wrong, for the verdict pipe and the command's hint.
    package var code: ErrorCode {
        switch self {
        case .daemonFailed(let code, _, _): return code
        case .keyNotHandedOver: return .keyNotReceived
        case .transportUnavailable: return .transportUnavailable
        // Found by the command itself, whose message says all there is.
        case .daemonNotStarted, .daemonExited, .daemonStopped: return .other
        }
    }
}
