import CFuse
#if canImport(Glibc)
import Glibc
import EncFSService
#endif

extension FUSEOperations {
    /// `init`: learns what the kernel can do and asks for what an
    /// immutable tree wants, before any request.
    static func initialize(_ userdata: UnsafeMutableRawPointer?, _ conn: UnsafeMutablePointer<fuse_conn_info>?) {
        guard let conn else { return }
        var checksReads = false
        if let userdata {
            let context = Unmanaged<MountContext>.fromOpaque(userdata).takeUnretainedValue()
            context.kernelSkipsOpen.store(conn.pointee.capable & UInt32(FUSE_CAP_NO_OPEN_SUPPORT) != 0, ordering: .relaxed)
            context.kernelSkipsOpendir.store(conn.pointee.capable & UInt32(FUSE_CAP_NO_OPENDIR_SUPPORT) != 0, ordering: .relaxed)
            checksReads = context.access.checksReads
        }
        // Immutable content: cache symlinks, let readdirplus fill the
        // attribute cache, keep reads asynchronous. Except under
        // --enforce-reads: an asynchronous read (read-ahead for a private
        // mapping's fault) is sent on behalf of a process that may be gone
        // by the time the daemon checks it, its pid then reused by an
        // allowed program; a synchronous one keeps the faulting task in the
        // kernel until answered (CallerProcess). Both transports send the
        // INIT reply libfuse builds from `want`.
        conn.pointee.want |= UInt32(FUSE_CAP_CACHE_SYMLINKS)
        if checksReads {
            conn.pointee.want &= ~UInt32(FUSE_CAP_ASYNC_READ)
        } else {
            conn.pointee.want |= UInt32(FUSE_CAP_ASYNC_READ)
        }
        conn.pointee.want &= ~UInt32(FUSE_CAP_ATOMIC_O_TRUNC)
        conn.pointee.max_readahead = UInt32(MountContext.maximumReadahead)
        // Must equal the max_read mount option (MountSession.baseOptions).
        conn.pointee.max_read = UInt32(MountContext.maximumRead)
        conn.pointee.time_gran = 1
    }

    /// `forget`: the tree lives as long as the mount, so nothing is
    /// dropped; the kernel's lookup count of `inode` goes down by `count`
    /// (at zero, a lock no longer needs to invalidate it).
    static func forget(_ req: fuse_req_t?, inode: fuse_ino_t, count: UInt64) {
        MountContext.of(req)?.bundle.seen.forget(inode: inode, count: count)
        fuse_reply_none(req)
    }

    /// `forget_multi`: `forget` for each of `count` inodes.
    static func forget(_ req: fuse_req_t?, count: Int, _ forgets: UnsafeMutablePointer<fuse_forget_data>?) {
        if let context = MountContext.of(req), let forgets {
            for item in UnsafeBufferPointer(start: forgets, count: count) {
                context.bundle.seen.forget(inode: item.ino, count: item.nlookup)
            }
        }
        fuse_reply_none(req)
    }
}
