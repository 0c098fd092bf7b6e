import EncFS
#if canImport(Glibc)
import Glibc
#endif

/// Where the mount daemon's log lines go: stderr (foreground), a file
/// (`--log-file`), or syslog (background without `--log-file`).
///
/// Lines name entries and chunk indices, never contents or key bytes.
public final class MountLogger: Sendable {
    public enum Sink: Sendable {
        case standardError
        case file(Int32)
        case syslog
    }

    private let sink: Sink

    public init(sink: Sink) {
        self.sink = sink
        if case .syslog = sink {
            openlog(MountLogger.ident, LOG_PID | LOG_NDELAY, LOG_DAEMON)
        }
    }

    /// openlog keeps the pointer: the identity string lives for the process.
    nonisolated(unsafe) private static let ident: UnsafeMutablePointer<CChar>? = strdup("encfs-mount")

    /// Logs one line; `path` (raw bytes) is appended in parentheses.
    public func log(_ level: String, _ message: String, path: [UInt8]? = nil) {
        var line = Array("\(level): \(message)".utf8)
        if let path { line += Array(" (".utf8) + path + Array(")".utf8) }
        switch sink {
        case .standardError:
            writeLine(2, Array("encfs-mount: ".utf8) + line)
        case .file(let fd):
            var ts = timespec()
            clock_gettime(CLOCK_REALTIME, &ts)
            var tmValue = tm()
            var seconds = ts.tv_sec
            gmtime_r(&seconds, &tmValue)
            let stamp = String(format4: Int(tmValue.tm_year) + 1900) + "-" + String(pad2: Int(tmValue.tm_mon) + 1) + "-"
                + String(pad2: Int(tmValue.tm_mday)) + "T" + String(pad2: Int(tmValue.tm_hour)) + ":"
                + String(pad2: Int(tmValue.tm_min)) + ":" + String(pad2: Int(tmValue.tm_sec)) + "Z"
            writeLine(fd, Array("\(stamp) encfs-mount[\(getpid())]: ".utf8) + line)
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

    private func writeLine(_ fd: Int32, _ bytes: [UInt8]) {
        var out = bytes
        out.append(0x0A)
        out.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return }
            _ = write(fd, base, raw.count) // one write: lines from threads do not interleave
        }
    }
}

private extension String {
    init(pad2 value: Int) { self = value < 10 ? "0\(value)" : "\(value)" }
    init(format4 value: Int) { self = String(value) }
}
