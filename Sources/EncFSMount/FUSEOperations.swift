import EncFSCore
import EncFSService
import CFuse
#if canImport(Glibc)
import Glibc
#endif

/// The low-level FUSE operations of a mount, one named function each.
///
/// Inode = index position + 1 (the root is 1 = FUSE_ROOT_ID); the tree is
/// built once at mount, so `forget` only tells the lock which inodes the
/// kernel no longer holds (``SeenInodes``). Every operation
/// recovers the ``MountContext`` from its request, answers from the index
/// or the reader, and catches everything: an error becomes an errno and a
/// log line in one place (``MountContext/reply(_:failure:inode:)``), and
/// what a caller may open is decided in one place (``AccessPolicy``).
/// Whatever needs a key or a name goes through ``MountContext/serve(_:_:)``,
/// which answers ENOKEY while the mount is locked.
///
/// By concern: this file holds the table and the helpers every operation
/// uses; `+Init` the connection setup; `+Entries` lookup, attributes,
/// symlinks, statfs, access and xattrs; `+Open` open and opendir;
/// `+Read` read; `+Directory` readdir; `+ReadOnly` everything that would
/// modify the tree.
enum FUSEOperations {
    /// The operation table handed to `fuse_session_new`.
    ///
    /// Only assignments: each entry is a closure that captures nothing (so
    /// it converts to the `@convention(c)` pointer libfuse stores) and
    /// calls the named operation. Operations left nil get ENOSYS from
    /// libfuse.
    static func assignOperations() -> fuse_lowlevel_ops {
        var ops = fuse_lowlevel_ops()
        ops.`init` = { userdata, conn in FUSEOperations.initialize(userdata, conn) }
        ops.lookup = { req, parent, name in FUSEOperations.lookup(req, parent: parent, name: name) }
        ops.forget = { req, ino, nlookup in FUSEOperations.forget(req, inode: ino, count: nlookup) }
        ops.forget_multi = { req, count, forgets in FUSEOperations.forget(req, count: count, forgets) }
        ops.getattr = { req, ino, _ in FUSEOperations.getattr(req, inode: ino) }
        ops.readlink = { req, ino in FUSEOperations.readlink(req, inode: ino) }
        ops.open = { req, ino, fi in FUSEOperations.open(req, inode: ino, info: fi) }
        ops.opendir = { req, ino, fi in FUSEOperations.opendir(req, inode: ino, info: fi) }
        ops.release = { req, _, fi in FUSEOperations.release(req, handle: fi?.pointee.fh ?? 0) }
        ops.releasedir = { req, _, fi in FUSEOperations.release(req, handle: fi?.pointee.fh ?? 0) }
        ops.read = { req, ino, size, offset, fi in
            FUSEOperations.read(req, inode: ino, size: size, offset: offset, handle: fi?.pointee.fh ?? 0)
        }
        ops.readdir = { req, ino, size, offset, _ in FUSEOperations.readdir(req, inode: ino, size: size, offset: offset) }
        ops.readdirplus = { req, ino, size, offset, _ in FUSEOperations.readdirplus(req, inode: ino, size: size, offset: offset) }
        ops.statfs = { req, _ in FUSEOperations.statfs(req) }
        ops.access = { req, ino, _ in FUSEOperations.access(req, inode: ino) }
        ops.getxattr = { req, _, _, _ in FUSEOperations.getxattr(req) }
        ops.listxattr = { req, _, size in FUSEOperations.listxattr(req, size: size) }
        ops.setattr = { req, _, _, _, _ in FUSEOperations.refuseModification(req) }
        ops.mknod = { req, _, _, _, _ in FUSEOperations.refuseModification(req) }
        ops.mkdir = { req, _, _, _ in FUSEOperations.refuseModification(req) }
        ops.unlink = { req, _, _ in FUSEOperations.refuseModification(req) }
        ops.rmdir = { req, _, _ in FUSEOperations.refuseModification(req) }
        ops.symlink = { req, _, _, _ in FUSEOperations.refuseModification(req) }
        ops.rename = { req, _, _, _, _, _ in FUSEOperations.refuseModification(req) }
        ops.link = { req, _, _, _ in FUSEOperations.refuseModification(req) }
        ops.write = { req, _, _, _, _, _ in FUSEOperations.refuseModification(req) }
        ops.create = { req, _, _, _, _ in FUSEOperations.refuseModification(req) }
        ops.setxattr = { req, _, _, _, _, _ in FUSEOperations.refuseModification(req) }
        ops.removexattr = { req, _, _ in FUSEOperations.refuseModification(req) }
        ops.fallocate = { req, _, _, _, _, _ in FUSEOperations.refuseModification(req) }
        return ops
    }

    // MARK: - Helpers every operation uses

    /// Answers `req` with `code` (0 is success for replies without data).
    /// The corresponding C function is `fuse_reply_err`.
    static func reply(_ req: fuse_req_t?, errno code: Int32) {
        _ = fuse_reply_err(req, code)
    }

    /// The entry of `inode`, or nil after answering ENOENT (no such inode)
    /// or the failure (through the context's one policy).
    static func entry(_ req: fuse_req_t?, _ context: MountContext, _ reader: BundleReader, inode: fuse_ino_t) -> IndexEntry? {
        do {
            if let entry = try reader.index.entry(inode: inode) { return entry }
            reply(req, errno: ENOENT)
        } catch {
            context.reply(req, failure: error, inode: inode)
        }
        return nil
    }
}
