#if canImport(Glibc)
import Glibc
#endif

/// A fresh directory under /tmp, removed with everything in it on deinit.
final class TemporaryDirectory {
    /// The directory path.
    let path: [UInt8]

    init() throws {
        var template = bytes("/tmp/encfs-format-tests.XXXXXX") + [0]
        let made = template.withUnsafeMutableBufferPointer { b in
            b.withMemoryRebound(to: CChar.self) { mkdtemp($0.baseAddress!) != nil }
        }
        guard made else { throw POSIXFailure("mkdtemp", template) }
        path = Array(template.dropLast())
    }

    deinit { FileTree.removeTree(path) }

    /// `path/component` (components are joined with '/').
    func appending(_ components: [UInt8]...) -> [UInt8] {
        components.reduce(path) { join($0, $1) }
    }

    /// `path/name` for a UTF-8 name.
    func appending(_ name: String) -> [UInt8] { join(path, bytes(name)) }
}
