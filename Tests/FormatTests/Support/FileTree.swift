#if canImport(Glibc)
import Glibc
import SharedTestSupport
#endif

/// Builds and inspects source trees through byte paths and plain system
/// calls: `FileManager` would route names through `String`, and the point is
/// that names which are not UTF-8 survive.
enum FileTree {
    /// Creates (or replaces) a regular file holding `contents`, with exactly
    /// `mode` (set with `fchmod`, so the umask does not apply).
    static func writeFile(_ path: [UInt8], _ contents: [UInt8], mode: mode_t = 0o644) throws {
        let fd = path.withCPath { open($0, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600) }
        guard fd >= 0 else { throw POSIXFailure("open", path) }
        defer { close(fd) }
        var done = 0
        while done < contents.count {
            let n = contents.withUnsafeBytes { write(fd, $0.baseAddress! + done, contents.count - done) }
            guard n > 0 else { throw POSIXFailure("write", path) }
            done += n
        }
        guard fchmod(fd, mode) == 0 else { throw POSIXFailure("fchmod", path) }
    }

    /// Creates a directory with exactly `mode`.
    static func makeDirectory(_ path: [UInt8], mode: mode_t = 0o755) throws {
        guard path.withCPath({ mkdir($0, 0o700) }) == 0 else { throw POSIXFailure("mkdir", path) }
        try setMode(path, mode)
    }

    /// Creates a symlink at `path` pointing to `target` (any bytes but NUL).
    static func makeSymlink(_ path: [UInt8], target: [UInt8]) throws {
        guard target.withCPath({ t in path.withCPath { symlink(t, $0) } }) == 0 else { throw POSIXFailure("symlink", path) }
    }

    /// Creates a Unix-domain socket file at `path` (a special file the
    /// packer skips with a warning; the tests use that warning as a hook
    /// that runs in the middle of the walk).
    static func makeSocket(_ path: [UInt8]) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXFailure("socket", path) }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.count < capacity else { throw POSIXFailure("socket path too long", path) }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.enumerated() { raw[i] = b }
        }
        let rc = withUnsafePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { throw POSIXFailure("bind", path) }
    }

    static func setMode(_ path: [UInt8], _ mode: mode_t) throws {
        guard path.withCPath({ chmod($0, mode) }) == 0 else { throw POSIXFailure("chmod", path) }
    }

    /// Sets the modification time (and the access time, to the same value)
    /// without following a symlink.
    static func setModificationTime(_ path: [UInt8], seconds: Int64, nanoseconds: Int) throws {
        var times = [timespec(tv_sec: Int(seconds), tv_nsec: nanoseconds), timespec(tv_sec: Int(seconds), tv_nsec: nanoseconds)]
        let rc = path.withCPath { p in times.withUnsafeMutableBufferPointer { utimensat(AT_FDCWD, p, $0.baseAddress, AT_SYMLINK_NOFOLLOW) } }
        guard rc == 0 else { throw POSIXFailure("utimensat", path) }
    }

    /// The whole file.
    static func readFile(_ path: [UInt8]) throws -> [UInt8] {
        let fd = path.withCPath { open($0, O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else { throw POSIXFailure("open", path) }
        defer { close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n >= 0 else { throw POSIXFailure("read", path) }
            if n == 0 { return out }
            out += chunk[0..<n]
        }
    }

    /// Names in a directory (without "." and ".."), sorted by bytes.
    static func list(_ path: [UInt8]) throws -> [[UInt8]] {
        guard let dir = path.withCPath({ opendir($0) }) else { throw POSIXFailure("opendir", path) }
        defer { closedir(dir) }
        var names: [[UInt8]] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
            if name != [0x2E], name != [0x2E, 0x2E] { names.append(name) }
        }
        return names.sorted { $0.lexicographicallyPrecedes($1) }
    }

    /// Whether anything (even a dangling symlink) exists at `path`.
    static func exists(_ path: [UInt8]) -> Bool {
        var st = stat()
        return path.withCPath { lstat($0, &st) } == 0
    }
}
