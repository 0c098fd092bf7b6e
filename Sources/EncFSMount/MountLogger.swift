import EncFSCore
import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// Where the mount daemon's log lines go: stderr (foreground), a file
/// (`--log-file`), or syslog (background without `--log-file`).
///
/// Lines name inodes and chunk indices, never contents or key bytes, and
/// entry names only when the mount was asked to (`--log-names`).
package final class MountLogger: Sendable {
    package enum Sink: Sendable {
        case standardError
        case file(FileDescriptor)
        case syslog
    }

    private let sink: Sink

    package init(sink: Sink) {
        self.sink = sink
        if case .syslog = sink {
            openlog(MountLogger.ident, LOG_PID | LOG_NDELAY, LOG_DAEMON)
        }
    }

    /// A logger appending to `path` (absolute; created 0600). The
    /// descriptor (close-on-exec) stays open as long as the logger.
    ///
    /// A root daemon writes lines partly chosen by callers (names, paths)
    /// there, so the file is opened as ``TrustedPath`` opens it: never
    /// through a symbolic link, never another user's file or a hard link,
    /// in a directory reached only through directories that root or this
    /// user alone can change (sticky ones such as /tmp included).
    ///
    /// - Throws: ``TrustedPathError`` naming what was refused.
    package static func appending(to path: [UInt8]) throws(TrustedPathError) -> MountLogger {
        MountLogger(sink: .file(try TrustedPath.openForAppending(path)))
    }

    /// Logs once, at start, when key memory could not be locked.
    package func warnIfSecretsNotLocked() {
        if SecureMemoryStatus.lockFailures > 0 {
            log("warning", "could not lock key memory (RLIMIT_MEMLOCK); it may be swapped out")
        }
    }

    /// openlog keeps the pointer: the identity string lives for the process.
    nonisolated(unsafe) private static let ident: UnsafeMutablePointer<CChar>? = strdup("encfs-mount")

    /// Logs one line; `path` is appended in parentheses, escaped (see
    /// ``escaped(_:)``).
    package func log(_ level: String, _ message: String, path: [UInt8]? = nil) {
        var line = Array("\(level): \(message)".utf8)
        if let path { line += Array(" (".utf8) + Self.escaped(path) + Array(")".utf8) }
        switch sink {
        case .standardError:
            writeLine(2, Array("encfs-mount: ".utf8) + line)
        case .file(let file):
            var ts = timespec()
            clock_gettime(CLOCK_REALTIME, &ts)
            let stamp = RFC3339.format(seconds: Int64(ts.tv_sec))
            writeLine(file.rawValue, Array("\(stamp) encfs-mount[\(getpid())]: ".utf8) + line)
        case .syslog:
            line.append(0)
            line.withUnsafeBufferPointer { b in
                b.withMemoryRebound(to: CChar.self) { c in
                    guard let base = c.baseAddress else { return }
                    withVaList([base]) { vsyslog(level == "error" ? LOG_ERR : LOG_INFO, "%s", $0) }
                }
            }
        }
    }

    /// `bytes` as every tool shows names (`PrintableText`): control bytes
    /// (C0, DEL, C1) and bytes that are not UTF-8 as `\xNN`, backslashes
    /// doubled, at most 4 KiB keeping the end, so a name cannot end a log
    /// line early, forge the next one, or send escape sequences to the
    /// terminal that shows the log.
    static func escaped(_ bytes: [UInt8]) -> [UInt8] {
        Array(PrintableText.escaping(bytes).utf8)
    }

    private func writeLine(_ fd: Int32, _ bytes: [UInt8]) {
        var out = bytes
        out.append(0x0A)
        out.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            _ = write(fd, base, raw.count) // one write: lines from threads do not interleave
        }
    }
}
