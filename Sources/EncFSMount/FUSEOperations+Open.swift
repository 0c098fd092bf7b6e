import EncFSCore
import EncFSService
import CFuse
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

// Opens keep no state (but under `unless-open`, below): reads find the
// entry by inode and the file key in the worker's workspace, so there is
// nothing to hand out or free. Once
// the caller is allowed (AccessPolicy), a kernel that can skip opens
// (4.19+ for files, 5.1+ for directories) is answered ENOSYS: it then
// stops sending open and opendir (and release, releasedir) for this mount
// and keeps the page cache across opens, its default then
// (FOPEN_KEEP_CACHE, and FOPEN_CACHE_DIR for directories). That saves two
// round trips per opened file. An older kernel would take ENOSYS as a
// failed open, so there every open is answered, with the same flags.
// When the mount must see every open (MountContext.answersEveryOpen: an
// access policy that decides per caller, or a mount that may lock, which
// counts open handles, refuses opens while locked with ENOKEY and, under
// `unless-open`, keeps each file handle's own key in OpenFileTable so that
// it reads on after a lock) nothing is answered ENOSYS. Under
// `-o auto_unmount` every opendir is answered (MountContext.answersEveryOpendir).
// With --enforce-reads a file is opened for direct I/O instead: no page
// cache, so every read comes to the daemon and is checked again.
extension FUSEOperations {
    /// `open`: allowed for reading by the policy; the content never
    /// changes, so the kernel keeps its cache (direct I/O instead with
    /// `--enforce-reads`).
    static func open(_ req: fuse_req_t?, inode: fuse_ino_t, info: UnsafeMutablePointer<fuse_file_info>?) {
        guard let context = MountContext.of(req), let info else { return reply(req, errno: EIO) }
        context.serve(req) { reader in
            guard let entry = entry(req, context, reader, inode: inode) else { return }
            guard entry.kind == .file else { return reply(req, errno: entry.kind == .directory ? EISDIR : ELOOP) }
            let request = AccessPolicy.Request.open(flags: info.pointee.flags)
            if let refusal = context.access.refusal(of: request, to: entry, by: AccessPolicy.Caller(req)) {
                return reply(req, errno: refusal)
            }
            if !context.answersEveryOpen, context.kernelSkipsOpen.load(ordering: .relaxed) { return reply(req, errno: ENOSYS) }
            if context.access.checksReads {
                cfuse_fi_set_direct_io(info)
            } else {
                cfuse_fi_set_keep_cache(info)
            }
            cfuse_fi_set_noflush(info)
            if context.lockSettings.protection == .unlessOpen {
                // The file's own key, kept until release, so that it reads
                // on after a lock.
                // (None for a compressed file: it needs the index, so it
                // stops at lock as under `complete`.)
                do {
                    if let file = try reader.detachedFile(entry) { info.pointee.fh = context.bundle.openFiles.insert(file) }
                } catch {
                    return context.reply(req, failure: error, inode: inode)
                }
            }
            replyOpen(req, context, info)
        }
    }

    /// `opendir`: allowed by the policy; listings never change, so the
    /// kernel caches them.
    static func opendir(_ req: fuse_req_t?, inode: fuse_ino_t, info: UnsafeMutablePointer<fuse_file_info>?) {
        guard let context = MountContext.of(req), let info else { return reply(req, errno: EIO) }
        context.serve(req) { reader in
            guard let entry = entry(req, context, reader, inode: inode) else { return }
            guard entry.kind == .directory else { return reply(req, errno: ENOTDIR) }
            if let refusal = context.access.refusal(of: .openDirectory, to: entry, by: AccessPolicy.Caller(req)) {
                return reply(req, errno: refusal)
            }
            if !context.answersEveryOpen, !context.answersEveryOpendir, context.kernelSkipsOpendir.load(ordering: .relaxed) {
                return reply(req, errno: ENOSYS)
            }
            cfuse_fi_set_cache_readdir(info)
            cfuse_fi_set_keep_cache(info)
            replyOpen(req, context, info)
        }
    }

    /// Answers an allowed open and counts the handle (for `encfs-ctl
    /// status` and `lock`) once the kernel has taken it.
    private static func replyOpen(_ req: fuse_req_t?, _ context: MountContext, _ info: UnsafeMutablePointer<fuse_file_info>) {
        if fuse_reply_open(req, info) == 0 {
            context.bundle.openHandles.add(1, ordering: .relaxed)
        } else if info.pointee.fh != 0 {
            // The opener was interrupted: no release will come.
            context.bundle.openFiles.remove(info.pointee.fh)
        }
    }

    /// `release` and `releasedir`: only sent for opens answered with a
    /// handle; forgets the handle's file (wiping its key) and the count.
    static func release(_ req: fuse_req_t?, handle: UInt64) {
        if let context = MountContext.of(req) {
            context.bundle.openHandles.subtract(1, ordering: .relaxed)
            if handle != 0 { context.bundle.openFiles.remove(handle) }
        }
        reply(req, errno: 0)
    }
}
