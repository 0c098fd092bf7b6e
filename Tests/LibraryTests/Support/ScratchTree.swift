import Foundation
import SharedTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A fresh directory under /tmp, filled through byte paths and plain system
/// calls (`FileManager` would route names through `String`, and the point
/// is that names which are not UTF-8 survive), removed on deinit.
final class ScratchTree: Sendable {
    /// The directory, removed on deinit.
    private let directory: TemporaryDirectory

    /// The directory, as bytes.
    var path: [UInt8] { directory.path }

    /// The directory, as a `String` (mkdtemp names are ASCII).
    var pathString: String { directory.pathString }

    /// Creates `/tmp/encfs-library-tests.XXXXXX`.
    init() throws {
        directory = try TemporaryDirectory(prefix: "encfs-library-tests", under: "/tmp")
    }

    /// Removes the directory and everything in it (again on deinit: harmless).
    func remove() { directory.remove() }

    /// `path/relative` for a relative path given as bytes.
    func appending(_ relative: [UInt8]) -> [UInt8] { path + [UInt8(ascii: "/")] + relative }

    /// `path/relative` for a relative path given as a `String`.
    func appending(_ relative: String) -> String { pathString + "/" + relative }

    /// Creates (or replaces) the file `relative` holding `contents`, with
    /// exactly `mode` (set with `fchmod`, so the umask does not apply).
    func writeFile(_ relative: [UInt8], _ contents: [UInt8], mode: mode_t = 0o644) throws {
        let full = appending(relative)
        let fd = full.withCPath { open($0, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600) }
        guard fd >= 0 else { throw TestFailure("open", full) }
        defer { close(fd) }
        var done = 0
        while done < contents.count {
            let n = contents[done...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw TestFailure("write", full) }
            done += n
        }
        guard fchmod(fd, mode) == 0 else { throw TestFailure("fchmod", full) }
    }

    /// Creates the directory `relative`.
    func makeDirectory(_ relative: [UInt8], mode: mode_t = 0o755) throws {
        let full = appending(relative)
        guard full.withCPath({ mkdir($0, 0o700) }) == 0, full.withCPath({ chmod($0, mode) }) == 0 else {
            throw TestFailure("mkdir", full)
        }
    }

    /// Creates the symlink `relative` pointing to `target`.
    func makeSymlink(_ relative: [UInt8], target: [UInt8]) throws {
        let full = appending(relative)
        guard target.withCPath({ t in full.withCPath { symlink(t, $0) } }) == 0 else { throw TestFailure("symlink", full) }
    }

    /// Sets the modification time of `relative` (not following a symlink).
    func setModificationTime(_ relative: [UInt8], seconds: Int, nanoseconds: Int) throws {
        let full = appending(relative)
        var times = [timespec(tv_sec: seconds, tv_nsec: nanoseconds), timespec(tv_sec: seconds, tv_nsec: nanoseconds)]
        let rc = full.withCPath { p in times.withUnsafeMutableBufferPointer { utimensat(AT_FDCWD, p, $0.baseAddress, AT_SYMLINK_NOFOLLOW) } }
        guard rc == 0 else { throw TestFailure("utimensat", full) }
    }

    /// The whole file at the absolute byte path `full`.
    static func readFile(_ full: [UInt8]) throws -> [UInt8] {
        let fd = full.withCPath { open($0, O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else { throw TestFailure("open", full) }
        defer { close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n >= 0 else { throw TestFailure("read", full) }
            if n == 0 { return out }
            out += chunk[0..<n]
        }
    }
}

/// A test helper's failure (a system call, a tool), with what it was about.
struct TestFailure: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) { self.description = description }

    /// `operation path: strerror(errno)`.
    init(_ operation: String, _ path: [UInt8]) {
        description = "\(operation) \(String(decoding: path, as: UTF8.self)): \(String(cString: strerror(errno)))"
    }
}
