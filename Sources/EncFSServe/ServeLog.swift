import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// encfs-serve's log: one line per event on stderr, or appended to
/// `--log-file`. No URL, no token, no name: a damaged chunk is named by
/// inode and chunk as the mount names it (`FailurePolicy`).
final class ServeLog: Sendable {
    private let fd: Int32

    /// Logs to `fd` (2 for stderr), which stays open for the process.
    init(fd: Int32 = 2) { self.fd = fd }

    /// Writes `encfs-serve: LEVEL: MESSAGE` as one `write`, so lines from
    /// several threads never interleave.
    func log(_ level: String, _ message: String) {
        let line = Array("encfs-serve: \(level): \(message)\n".utf8)
        line.withUnsafeBytes { bytes in
            _ = try? FileIO.writeAll(fd, bytes, path: [])
        }
    }
}
