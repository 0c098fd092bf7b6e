import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A scratch directory from `mkdtemp`, removed with everything in it on
/// deinit: the one temporary-directory helper of every test target.
///
/// The path is kept as bytes (names need not be UTF-8, and the format and
/// library tests build paths as `[UInt8]`); ``make(prefix:under:)`` is for
/// a caller that owns the directory's lifetime itself (the mount tests'
/// `ScratchDirectory`, which must not descend into a mount).
public final class TemporaryDirectory: Sendable {
    /// Why a scratch directory could not be made: a broken run, which a
    /// test reports as a failure, never as a skip.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The directory, as bytes.
    public let path: [UInt8]

    /// The directory, as a `String` (mkdtemp names are ASCII).
    public var pathString: String { String(decoding: path, as: UTF8.self) }

    /// Creates `base/prefix.XXXXXX` (mode 0700).
    ///
    /// - Throws: ``Failure`` naming the base and mkdtemp's error.
    public init(prefix: String, under base: String = defaultBase) throws {
        path = Array(try Self.make(prefix: prefix, under: base).utf8)
    }

    deinit { remove() }

    /// Removes the directory and everything in it (again on deinit: harmless).
    public func remove() { Self.removeTree(path) }

    /// `path/a/b…` from byte components; empty components are left out.
    public func appending(_ components: [UInt8]...) -> [UInt8] {
        Array(([path] + components.filter { !$0.isEmpty }).joined(separator: [UInt8(ascii: "/")]))
    }

    /// `path/name` for a UTF-8 name.
    public func appending(_ name: String) -> [UInt8] { appending(Array(name.utf8)) }

    /// `$TMPDIR`, or /tmp when it is unset or empty.
    public static var defaultBase: String {
        ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    }

    /// Creates `base/prefix.XXXXXX` (mode 0700, from `mkdtemp`) that the
    /// caller removes.
    ///
    /// - Returns: its path as made, not resolved through symlinks.
    /// - Throws: ``Failure`` naming the base and mkdtemp's error.
    public static func make(prefix: String, under base: String = defaultBase) throws -> String {
        var template = Array("\(base)/\(prefix).XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress.flatMap { mkdtemp($0) }.map { String(cString: $0) }
        }
        guard let made else { throw Failure(description: "mkdtemp in \(base): \(String(cString: strerror(errno)))") }
        return made
    }

    /// Removes `path` and everything below it, not following symlinks and
    /// making read-only directories writable first (a test may leave one);
    /// best effort, as it runs in deinit.
    public static func removeTree(_ path: [UInt8]) {
        var st = stat()
        guard path.withCPath({ lstat($0, &st) }) == 0 else { return }
        guard st.st_mode & S_IFMT == S_IFDIR else {
            _ = path.withCPath { unlink($0) }
            return
        }
        _ = path.withCPath { chmod($0, 0o700) }
        if let dir = path.withCPath({ opendir($0) }) {
            var names: [[UInt8]] = []
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
                if name != [0x2E], name != [0x2E, 0x2E] { names.append(name) }
            }
            closedir(dir)
            for name in names { removeTree(path + [UInt8(ascii: "/")] + name) }
        }
        _ = path.withCPath { rmdir($0) }
    }
}
