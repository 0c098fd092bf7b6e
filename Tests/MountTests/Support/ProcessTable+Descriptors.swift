import Foundation
#if canImport(Glibc)
import Glibc
import SharedTestSupport
#endif

/// What another process has open, and where it stands, from /proc.
extension ProcessTable {
    /// The open descriptors of `pid` with what they point at (a path, or
    /// `/dir/#123 (deleted)` for an unnamed `O_TMPFILE` file).
    static func descriptors(of pid: pid_t) -> [(fd: Int32, target: String)] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { return [] }
        return names.compactMap { name in
            guard let fd = Int32(name),
                  let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(name)") else { return nil }
            return (fd, target)
        }
    }

    /// The file offset of descriptor `fd` of `pid` (`pos:` in fdinfo).
    static func position(of pid: pid_t, fd: Int32) -> UInt64? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/fdinfo/\(fd)", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("pos:") {
            return UInt64(line.dropFirst(4).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    /// The one-letter state of `pid` (`R`, `S`, `T` stopped, `Z`…), or nil.
    static func state(of pid: pid_t) -> Character? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).first
    }

    /// A field of `/proc/<pid>/status` in kB (`VmRSS`, `VmLck`…), or nil.
    static func statusKilobytes(_ field: String, of pid: pid_t) -> UInt64? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("\(field):") {
            return UInt64(line.dropFirst(field.count + 1).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "")
        }
        return nil
    }
}
