import EncFSCore
import CryptCore
import CFuse
#if canImport(Glibc)
import Glibc
#endif

extension FUSEOperations {
    /// `lookup`: the child `name` of directory `parent`, or a cached miss.
    static func lookup(_ req: fuse_req_t?, parent: fuse_ino_t, name: UnsafePointer<CChar>?) {
        guard let context = MountContext.of(req), let name else { return reply(req, errno: ENOENT) }
        context.serve(req) { reader in
            do {
                guard let directory = try reader.index.entry(inode: parent) else { return reply(req, errno: ENOENT) }
                guard directory.kind == .directory else { return reply(req, errno: ENOTDIR) }
                let raw = UnsafeRawBufferPointer(start: name, count: strlen(name))
                var answer = MountContext.negativeEntry
                if let found = try reader.index.lookup(raw, in: directory) {
                    answer = context.entryParameters(of: found, in: reader)
                    // Before the reply: the kernel may forget it at once.
                    context.bundle.seen.insert(found.position)
                }
                _ = fuse_reply_entry(req, &answer)
            } catch {
                context.reply(req, failure: error, inode: parent)
            }
        }
    }

    /// `getattr`: the stat of `inode`, cached by the kernel for good.
    /// While locked only the root answers, as an empty directory whose
    /// attributes are not cached (they change at unlock), and files still
    /// open under `unless-open` (the kernel asks before reading them);
    /// not a use for `--idle-lock` (a shell prompt stats its directory).
    static func getattr(_ req: fuse_req_t?, inode: fuse_ino_t) {
        guard let context = MountContext.of(req) else { return reply(req, errno: EIO) }
        let served: Void? = context.bundle.withReader { reader in
            guard let entry = entry(req, context, reader, inode: inode) else { return }
            var st = context.attributes(of: entry, in: reader)
            _ = fuse_reply_attr(req, &st, MountContext.cacheTimeout)
        }
        guard served == nil else { return }
        if let entry = context.bundle.openFiles.entry(inode: inode) {
            var st = context.attributes(of: entry, subdirectoryCount: 0)
            return _ = fuse_reply_attr(req, &st, 0)
        }
        guard inode == FUSE_ROOT_ID else { return reply(req, errno: ENOKEY) }
        var st = context.lockedRootAttributes
        _ = fuse_reply_attr(req, &st, 0)
    }

    /// `readlink`: the stored target, NUL-terminated for libfuse.
    static func readlink(_ req: fuse_req_t?, inode: fuse_ino_t) {
        guard let context = MountContext.of(req) else { return reply(req, errno: EIO) }
        context.serve(req) { reader in readlink(req, context, reader, inode: inode) }
    }

    private static func readlink(_ req: fuse_req_t?, _ context: MountContext, _ reader: BundleReader, inode: fuse_ino_t) {
        guard let entry = entry(req, context, reader, inode: inode) else { return }
        guard entry.kind == .symlink else { return reply(req, errno: EINVAL) }
        do {
            // The target goes through the thread's locked name buffer (the
            // index checked its length), never an ordinary array, and is
            // wiped once libfuse has copied it into the reply.
            let name = context.scratch().name.bytes
            let length = try reader.index.withSymlinkTarget(of: entry) { target -> Int in
                guard target.count < name.count else { return -1 }
                UnsafeMutableRawBufferPointer(rebasing: name[0..<target.count]).copyMemory(from: target)
                return target.count
            }
            guard length >= 0 else { return reply(req, errno: ENAMETOOLONG) }
            name[length] = 0
            _ = fuse_reply_readlink(req, name.baseAddress?.assumingMemoryBound(to: CChar.self))
            SecureBytes.wipe(UnsafeMutableRawBufferPointer(rebasing: name[0...length]))
        } catch {
            context.reply(req, failure: error, inode: inode)
        }
    }

    /// `statfs`: the bundle's size in 4 KiB blocks, none free, read-only;
    /// while locked no files (their number is in the index).
    static func statfs(_ req: fuse_req_t?) {
        guard let context = MountContext.of(req) else { return reply(req, errno: EIO) }
        let files = context.bundle.withReader { $0.index.count } ?? 0
        var sv = statvfs()
        sv.f_bsize = 4096
        sv.f_frsize = 4096
        sv.f_blocks = fsblkcnt_t((context.bundle.source.size + 4095) / 4096)
        sv.f_bfree = 0
        sv.f_bavail = 0
        sv.f_files = fsfilcnt_t(files)
        sv.f_ffree = 0
        sv.f_favail = 0
        sv.f_namemax = UInt(BundleFormat.maximumNameLength)
        sv.f_flag = UInt(ST_RDONLY)
        _ = fuse_reply_statfs(req, &sv)
    }

    /// `access`: granted for any inode that exists. The kernel checks the
    /// permission bits itself (`default_permissions`) and refuses writes
    /// on the `ro` mount, so this is only sent when those allowed it.
    /// While locked only the root exists.
    static func access(_ req: fuse_req_t?, inode: fuse_ino_t) {
        guard let context = MountContext.of(req) else { return reply(req, errno: ENOENT) }
        let count = context.bundle.withReader { $0.index.count }
        guard let count else { return reply(req, errno: inode == FUSE_ROOT_ID ? 0 : ENOKEY) }
        reply(req, errno: inode >= 1 && inode <= UInt64(count) ? 0 : ENOENT)
    }

    /// `getxattr`: bundles store no extended attributes. Answered ENOSYS,
    /// which the kernel remembers for the mount (every later `getxattr`
    /// gets EOPNOTSUPP without a request): `ls -l` asks for two attributes
    /// of every file it lists (ACL, security label), and answering each
    /// with ENODATA was half of the requests of an `ls -lR`
    /// (docs/PERFORMANCE.md, "Listing a real tree").
    static func getxattr(_ req: fuse_req_t?) {
        reply(req, errno: ENOSYS)
    }

    /// `listxattr`: an empty list (size 0 asks for the length needed).
    static func listxattr(_ req: fuse_req_t?, size: Int) {
        if size == 0 { _ = fuse_reply_xattr(req, 0) } else { _ = fuse_reply_buf(req, nil, 0) }
    }
}
