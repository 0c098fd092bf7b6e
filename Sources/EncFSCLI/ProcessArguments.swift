import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// This process's argv as the kernel shows it to others
/// (`/proc/PID/cmdline`, `ps`), rewritten in place.
///
/// Why: with `-f` the process that parsed a presigned URL serves the mount
/// for as long as it lasts, and anyone on the machine could read the
/// URL's signature and user information from its argv. Swift's
/// `CommandLine.arguments` is a copy; what the kernel shows is the memory
/// between `arg_start` and `arg_end` (fields 48 and 49 of
/// `/proc/self/stat`), the strings `execve` placed on the stack. That
/// memory is ours to write: the strings are rewritten there, and what is
/// left over is zeroed.
///
/// What remains: the window between `execve` and the rewrite (the time
/// to parse the options, before any key or network is touched), during
/// which a process that polls `/proc` can read the original.
/// `--address-file` leaves no such window.
package enum ProcessArguments {
    /// Shows every remote bundle address among the arguments by its
    /// display name (no query string, no user information).
    package static func hideAddresses() {
        rewrite { RemoteCommandLine.isRemote($0) ? RemoteCommandLine.shown($0) : nil }
    }

    /// Replaces every argument for which `replacement` returns a value
    /// (the program name included), in the memory the kernel shows.
    /// Nothing is written unless that memory holds exactly the arguments
    /// the process started with.
    ///
    /// - Returns: whether the memory was rewritten.
    @discardableResult
    package static func rewrite(_ replacement: ([UInt8]) -> [UInt8]?) -> Bool {
        guard let area = argumentArea() else { return false }
        let original = Array(UnsafeRawBufferPointer(area))
        var started: [[UInt8]] = []
        for i in 0..<Int(CommandLine.argc) {
            guard let p = CommandLine.unsafeArgv[i] else { return false }
            started.append(Array(UnsafeRawBufferPointer(start: p, count: strlen(p))))
        }
        guard original == Array(started.map { $0 + [0] }.joined()) else { return false }
        var rewritten = Array(started.map { (replacement($0) ?? $0) + [0] }.joined())
        // Never longer than the area: a replacement is cut, NUL-ended.
        if rewritten.count > area.count {
            rewritten = Array(rewritten.prefix(area.count - 1)) + [0]
        }
        // The area keeps its length (moving its end takes PR_SET_MM, a
        // variadic prctl and CAP_SYS_RESOURCE): the zeros after the last
        // argument read as empty arguments.
        rewritten += [UInt8](repeating: 0, count: area.count - rewritten.count)
        area.copyBytes(from: rewritten)
        return true
    }

    /// The memory `/proc/self/cmdline` shows, from `/proc/self/stat`.
    private static func argumentArea() -> UnsafeMutableRawBufferPointer? {
        guard let file = try? FileDescriptor.open(Array("/proc/self/stat".utf8), flags: O_RDONLY) else { return nil }
        var stat = [UInt8](repeating: 0, count: 4096)
        guard let n = try? stat.withUnsafeMutableBytes({ try file.read(into: $0) }) else { return nil }
        stat.removeLast(stat.count - n)
        guard let close = stat.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        // Fields after the command name start with field 3 (state).
        let fields = stat[(close + 1)...].split(separator: UInt8(ascii: " "))
        guard fields.count > 46, let start = UInt(String(decoding: fields[45], as: UTF8.self)),
              let end = UInt(String(decoding: fields[46], as: UTF8.self)), end > start,
              let base = UnsafeMutableRawPointer(bitPattern: start) else { return nil }
        return UnsafeMutableRawBufferPointer(start: base, count: Int(end - start))
    }
}
