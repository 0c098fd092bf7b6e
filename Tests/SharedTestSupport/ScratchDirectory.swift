import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A fresh directory from `mkdtemp` for one test, removed afterwards.
///
/// Removal uses `rm -rf --one-file-system`, so a mount that somehow
/// survived its unmount is never descended into; the unmount teardown runs
/// first because teardown blocks run last-registered first.
public final class ScratchDirectory: Sendable {
    /// Absolute, symlink-free path.
    public let path: String

    /// Creates `$TMPDIR/encfs-mount-tests.XXXXXX` (or under /tmp).
    ///
    /// - Throws: `TemporaryDirectory.Failure` when mkdtemp fails,
    ///   `SubprocessError` when the path does not resolve.
    public init() throws {
        let raw = try TemporaryDirectory.make(prefix: "encfs-mount-tests")
        guard let resolved = realpath(raw, nil) else { throw SubprocessError("realpath \(raw)") }
        path = String(cString: resolved)
        free(resolved)
    }

    /// `path/name`.
    public func url(_ name: String) -> String { "\(path)/\(name)" }

    /// Creates `path/name` (and parents) and returns its path.
    @discardableResult
    public func makeDirectory(_ name: String) throws -> String {
        let p = url(name)
        try FileManager.default.createDirectory(atPath: p, withIntermediateDirectories: true)
        return p
    }

    /// Writes `bytes` to `path/name` with `mode`.
    @discardableResult
    public func write(_ name: String, _ bytes: [UInt8], mode: mode_t = 0o644) throws -> String {
        let p = url(name)
        let fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        guard fd >= 0 else { throw SubprocessError("create \(p): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var done = 0
        while done < bytes.count {
            let n = bytes[done...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { throw SubprocessError("write \(p): \(String(cString: strerror(errno)))") }
            done += n
        }
        return p
    }

    /// Removes the directory and everything below it on the same file system.
    public func remove() {
        // Restore write permission first (a test tree may hold 0500 dirs).
        _ = try? Subprocess.run("chmod", ["-R", "u+rwX", path], timeout: 60)
        _ = try? Subprocess.run("rm", ["-rf", "--one-file-system", path], timeout: 120)
    }
}
