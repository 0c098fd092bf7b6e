import EncFSCore
import EncFSService

extension MountDaemon {
    /// What the daemon says on fd 4, once: mounted, or why not.
    package enum Verdict: Equatable, Sendable {
        case mounted
        /// What went wrong (the meaning), the message and the path it is
        /// about (for people).
        case failed(ErrorCode, message: String, path: [UInt8]?)

        /// The verdict for `error`: its code, its message and its own path,
        /// else `path` (none for a ``MountError``, which names no file).
        package init(failure error: any Error, path: [UInt8]) {
            switch error {
            case let error as BundleError: self = .failed(ErrorCode(error), message: error.message, path: error.path ?? path)
            case let error as MountError: self = .failed(error.code, message: error.message, path: error.path)
            default: self = .failed(.other, message: "\(error)", path: path)
            }
        }

        /// Byte 0; or the code, the message, and NUL and the path when
        /// there is one.
        package var encoded: [UInt8] {
            switch self {
            case .mounted: return [0]
            case .failed(let code, let message, let path):
                return [code.rawValue] + Array(message.utf8) + (path.map { [0] + $0 } ?? [])
            }
        }

        /// The verdict read from the pipe; a code this build does not know
        /// as ``ErrorCode/other``.
        ///
        /// - Returns: nil for nothing (the daemon exited without a word).
        package init?(decoding status: [UInt8]) {
            guard let first = status.first else { return nil }
            guard first != 0 else {
                self = .mounted
                return
            }
            let parts = status.dropFirst().split(separator: 0, maxSplits: 1, omittingEmptySubsequences: false)
            self = .failed(ErrorCode(rawValue: first) ?? .other, message: String(decoding: parts.first ?? [], as: UTF8.self),
                           path: parts.count > 1 && !parts[1].isEmpty ? Array(parts[1]) : nil)
        }
    }
}
