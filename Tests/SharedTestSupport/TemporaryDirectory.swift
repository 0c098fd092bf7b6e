import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Scratch directories for tests, made by `mkdtemp` in one place for every
/// test target.
public enum TemporaryDirectory {
    /// Why a scratch directory could not be made: a broken run, which a
    /// test reports as a failure, never as a skip.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// `$TMPDIR`, or /tmp when it is unset or empty.
    public static var defaultBase: String {
        ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    }

    /// Creates `base/prefix.XXXXXX` (mode 0700, from `mkdtemp`).
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
}
