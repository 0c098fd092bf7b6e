import CFuse
#if canImport(Glibc)
import Glibc
#endif

extension FUSEOperations {
    /// `setattr`, `mknod`, `mkdir`, `unlink`, `rmdir`, `symlink`, `rename`,
    /// `link`, `write`, `create`, `setxattr`, `removexattr`, `fallocate`:
    /// EROFS. The mount is also `ro`, so the kernel usually answers first;
    /// this covers whatever reaches the daemon anyway.
    static func refuseModification(_ req: fuse_req_t?) {
        reply(req, errno: EROFS)
    }
}
