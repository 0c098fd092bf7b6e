import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// encfs-serve's log: one line per event on stderr, or appended to
/// `--log-file`. No URL, no token, no name: a damaged chunk is named by
/// inode and chunk as the mount names it (`FailurePolicy`).
final class ServeLog: Sendable {
    private let output: FileDescriptor.Borrowed
    /// The `--log-file`, held open for as long as the log (nil: stderr).
    private let file: FileDescriptor?

    /// Logs to stderr, or to `file` when given.
    init(file: FileDescriptor? = nil) {
        self.file = file
        output = file.map { FileDescriptor.Borrowed($0.rawValue, path: $0.path) } ?? FileDescriptor.Borrowed(2, path: Array("stderr".utf8))
    }

    /// Writes `encfs-serve: LEVEL: MESSAGE` as one `write`, so lines from
    /// several threads never interleave.
    func log(_ level: String, _ message: String) {
        let line = Array("encfs-serve: \(level): \(message)\n".utf8)
        line.withUnsafeBytes { bytes in
            _ = try? output.writeAll(bytes)
        }
    }
}
