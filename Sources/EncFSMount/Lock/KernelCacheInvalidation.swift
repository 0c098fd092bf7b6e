import EncFSCore
import CryptCore
import CFuse
#if canImport(Glibc)
import Glibc
#endif

/// Tells the kernel to forget what it cached of a mount: the pages,
/// attributes and directory listings of each inode, and the names that
/// lead to them.
///
/// Called from the control thread, never from a FUSE request handler:
/// the kernel takes the inode's and the parent directory's locks to
/// invalidate, which a handler of the same session answering a request
/// that holds them would wait for forever. Requests that arrive meanwhile
/// are answered ENOKEY by the workers, so nothing refills the caches.
enum KernelCacheInvalidation {
    /// Invalidates the inodes at `positions` (index positions) and their
    /// names, which come from `reader`'s index (the reader a lock just
    /// took away, dropped by the caller afterwards).
    ///
    /// Best effort, entry by entry: ENOENT (the kernel already dropped the
    /// inode or name) is the usual answer for the ones it evicted itself.
    ///
    /// The corresponding C functions are `fuse_lowlevel_notify_inval_inode`
    /// and `fuse_lowlevel_notify_inval_entry`.
    static func invalidate(_ session: OpaquePointer, positions: [Int], reader: BundleReader) {
        // Pages first: they hold plaintext; then the names, children
        // before their directories.
        for position in positions {
            _ = fuse_lowlevel_notify_inval_inode(session, fuse_ino_t(position + 1), 0, 0)
        }
        let name = UnsafeMutableRawBufferPointer.allocate(byteCount: BundleFormat.maximumNameLength + 1, alignment: 16)
        let locked = SecureMemory.lock(name)
        defer {
            SecureMemory.release(name, locked: locked)
            name.deallocate()
        }
        for position in positions.reversed() where position > 0 {
            guard let entry = try? reader.index.entry(at: position),
                  let length = try? reader.index.copyName(of: entry, into: name) else { continue }
            _ = name.baseAddress.map {
                fuse_lowlevel_notify_inval_entry(session, fuse_ino_t(entry.parent + 1), $0.assumingMemoryBound(to: CChar.self), length)
            }
            SecureBytes.wipe(UnsafeMutableRawBufferPointer(rebasing: name[0..<length]))
        }
    }
}
