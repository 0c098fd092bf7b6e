import Foundation
#if canImport(Glibc)
import Glibc
import SharedTestSupport
#endif

/// A symlink to a built tool in /usr/local/bin, for programs that look the
/// tool up on their own fixed PATH (mount(8) through `mount.fuse3`), not
/// on the test's.
extension ToolTestCase {
    /// Links `/usr/local/bin/NAME` to `target` for this test; the link is
    /// removed at teardown.
    ///
    /// - Throws: `SubprocessError` when something other than a link made
    ///   here already sits there (an installed encfs-mount is never replaced).
    func linkIntoSystemPath(_ name: String, target: String) throws {
        let link = "/usr/local/bin/\(name)"
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink(link, &buffer, buffer.count - 1)
        if n >= 0 {
            let existing = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard existing.hasSuffix("/\(name)"), existing.contains("/.build/") else {
                throw SubprocessError("\(link) exists (→ \(existing)): not replacing an installed tool")
            }
            unlink(link)
        } else if access(link, F_OK) == 0 {
            throw SubprocessError("\(link) exists and is not a link: not replacing an installed tool")
        }
        guard symlink(target, link) == 0 else { throw SubprocessError("cannot link \(link): \(String(cString: strerror(errno)))") }
        addTeardownBlock { unlink(link) }
    }
}
