import EncFSCore
import EncFSMount
import Foundation
#if canImport(Glibc)
import Glibc
import SharedTestSupport
#endif

/// The kernel's view of mounts: `/proc/self/mountinfo` and `statfs`.
enum MountTable {
    /// One line of mountinfo.
    struct Entry: Sendable {
        let mountpoint: String
        /// Per-mount options (field 6), e.g. `ro,nosuid,nodev,relatime`.
        let mountOptions: [String]
        /// e.g. `fuse.encfs`.
        let type: String
        let source: String
        /// Super-block options, e.g. `ro,user_id=0,...`.
        let superOptions: [String]
    }

    /// Every mount in this mount namespace.
    static func entries() -> [Entry] {
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let halves = line.components(separatedBy: " - ")
            guard halves.count == 2 else { return nil }
            let left = halves[0].split(separator: " ")
            let right = halves[1].split(separator: " ")
            guard left.count >= 6, right.count >= 3 else { return nil }
            return Entry(mountpoint: unescape(String(left[4])),
                         mountOptions: left[5].split(separator: ",").map(String.init),
                         type: String(right[0]), source: unescape(String(right[1])),
                         superOptions: right[2].split(separator: ",").map(String.init))
        }
    }

    /// The mount at exactly `path` (the last one, if stacked).
    static func entry(at path: String) -> Entry? {
        entries().last { $0.mountpoint == path }
    }

    /// Whether anything is mounted at `path`.
    static func isMounted(_ path: String) -> Bool { entry(at: path) != nil }

    /// Whether a FUSE file system answers `statfs` at `path`.
    ///
    /// statfs waits for the daemon's INIT reply and fails with ENOTCONN
    /// once the daemon is gone, so this is the "serving" test.
    static func isServing(_ path: String) -> Bool {
        // Glibc's Swift module does not export statfs(2); EncFS wraps it.
        MountSession.isServing(Array(path.utf8))
    }

    /// mountinfo escapes space, tab, newline and backslash as `\ooo`.
    private static func unescape(_ field: String) -> String {
        var out: [UInt8] = []
        let bytes = Array(field.utf8)
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "\\"), i + 3 < bytes.count,
               let value = UInt8(String(decoding: bytes[(i + 1)...(i + 3)], as: UTF8.self), radix: 8) {
                out.append(value)
                i += 4
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Facts about other processes, read from /proc.
enum ProcessTable {
    /// argv of `pid`, or `nil` when it is gone.
    static func arguments(of pid: pid_t) -> [[UInt8]]? {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return nil }
        return [UInt8](data).split(separator: 0, omittingEmptySubsequences: false).map(Array.init).dropLastEmpty()
    }

    /// Whether `pid` exists and is not a zombie.
    static func isAlive(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return false }
        let state = stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).first
        return state != "Z" && state != "X"
    }

    /// The encfs-mount process whose arguments include `mountpoint`
    /// (the background daemon re-executes itself with absolute paths).
    static func daemon(servingAt mountpoint: String) -> pid_t? {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return nil }
        let wanted = Array(mountpoint.utf8)
        for name in names {
            guard let pid = pid_t(name), pid != getpid(), let argv = arguments(of: pid), let first = argv.first else { continue }
            let program = first.split(separator: UInt8(ascii: "/")).last.map(Array.init) ?? first
            if program == Array("encfs-mount".utf8), argv.dropFirst().contains(wanted), isAlive(pid) { return pid }
        }
        return nil
    }
}

extension Array where Element == [UInt8] {
    fileprivate func dropLastEmpty() -> [[UInt8]] {
        if let last, last.isEmpty { return Array(dropLast()) }
        return self
    }
}
