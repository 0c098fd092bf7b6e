import EncFS
import CFuse
import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// The low-level FUSE callbacks: thin `@convention(c)` thunks that recover
/// the `MountContext`, call the reader, catch everything and reply.
///
/// Inode = index position + 1 (the root is 1 = FUSE_ROOT_ID); the tree is
/// built once at mount, so `forget` has nothing to do. Every modifying
/// operation replies EROFS (the mount is also `ro`, so the kernel usually
/// answers first).
enum FUSEOperations {
    /// Wires every operation into one table.
    static func assignOperations() -> fuse_lowlevel_ops {
        var ops = fuse_lowlevel_ops()
        ops.`init` = { userdata, conn in
            guard let conn else { return }
            if let userdata {
                let context = Unmanaged<MountContext>.fromOpaque(userdata).takeUnretainedValue()
                context.kernelSkipsOpen.store(conn.pointee.capable & UInt32(FUSE_CAP_NO_OPEN_SUPPORT) != 0, ordering: .relaxed)
                context.kernelSkipsOpendir.store(conn.pointee.capable & UInt32(FUSE_CAP_NO_OPENDIR_SUPPORT) != 0, ordering: .relaxed)
            }
            // Immutable content: cache symlinks, let readdirplus fill the
            // attribute cache, keep reads asynchronous.
            conn.pointee.want |= UInt32(FUSE_CAP_CACHE_SYMLINKS)
            conn.pointee.want |= UInt32(FUSE_CAP_ASYNC_READ)
            conn.pointee.want &= ~UInt32(FUSE_CAP_ATOMIC_O_TRUNC)
            conn.pointee.max_readahead = UInt32(MountContext.maximumReadahead)
            // Must equal the max_read mount option (MountSession.baseOptions).
            conn.pointee.max_read = UInt32(MountContext.maximumRead)
            conn.pointee.time_gran = 1
        }
        ops.lookup = { req, parent, name in
            guard let context = mountContext(req), let name else { return replyError(req, ENOENT) }
            do {
                guard let directory = try context.reader.index.entry(inode: parent) else { return replyError(req, ENOENT) }
                guard directory.kind == .directory else { return replyError(req, ENOTDIR) }
                let raw = UnsafeRawBufferPointer(start: name, count: strlen(name))
                guard let child = try context.reader.index.lookup(raw, in: directory) else {
                    // Cache the negative answer as long as positive ones.
                    var e = fuse_entry_param()
                    e.ino = 0
                    e.entry_timeout = MountContext.cacheTimeout
                    _ = fuse_reply_entry(req, &e)
                    return
                }
                var e = context.entryParameters(of: child)
                _ = fuse_reply_entry(req, &e)
            } catch {
                replyError(req, context.indexFailure(error))
            }
        }
        ops.forget = { req, _, _ in fuse_reply_none(req) }
        ops.forget_multi = { req, _, _ in fuse_reply_none(req) }
        ops.getattr = { req, ino, _ in
            guard let context = mountContext(req) else { return replyError(req, ENOENT) }
            guard let entry = entryOrReply(req, context, ino) else { return }
            var st = context.attributes(of: entry)
            _ = fuse_reply_attr(req, &st, MountContext.cacheTimeout)
        }
        ops.readlink = { req, ino in
            guard let context = mountContext(req) else { return replyError(req, ENOENT) }
            do {
                guard let entry = try context.reader.index.entry(inode: ino) else { return replyError(req, ENOENT) }
                guard entry.kind == .symlink else { return replyError(req, EINVAL) }
                var target = try context.reader.index.withSymlinkTarget(of: entry) { [UInt8]($0) }
                target.append(0)
                target.withUnsafeBufferPointer { b in
                    b.withMemoryRebound(to: CChar.self) { _ = fuse_reply_readlink(req, $0.baseAddress) }
                }
            } catch {
                replyError(req, context.indexFailure(error))
            }
        }
        // No open, release, opendir or releasedir: ENOSYS tells the kernel
        // (4.19+ for files, 5.1+ for directories) to stop sending them for
        // this mount and to keep the page cache across opens, its default
        // then (FOPEN_KEEP_CACHE, and FOPEN_CACHE_DIR for directories). That
        // saves two round trips per opened file. Nothing is lost: reads find
        // the entry by inode and the file key in the reader's workspace
        // cache; the `ro` mount refuses writes and O_TRUNC with EROFS before
        // anything reaches us. An older kernel would take ENOSYS as a failed
        // open, so there the opens are answered as before, with no state.
        ops.open = { req, ino, fi in
            guard let context = mountContext(req), let fi else { return replyError(req, EIO) }
            if context.kernelSkipsOpen.load(ordering: .relaxed) { return replyError(req, ENOSYS) }
            guard let entry = entryOrReply(req, context, ino) else { return }
            guard entry.kind == .file else { return replyError(req, entry.kind == .directory ? EISDIR : ELOOP) }
            guard fi.pointee.flags & O_ACCMODE == O_RDONLY, fi.pointee.flags & (O_TRUNC | O_CREAT) == 0 else { return replyError(req, EROFS) }
            cfuse_fi_set_keep_cache(fi)
            cfuse_fi_set_noflush(fi)
            _ = fuse_reply_open(req, fi)
        }
        ops.opendir = { req, ino, fi in
            guard let context = mountContext(req), let fi else { return replyError(req, EIO) }
            if context.kernelSkipsOpendir.load(ordering: .relaxed) { return replyError(req, ENOSYS) }
            guard let entry = entryOrReply(req, context, ino) else { return }
            guard entry.kind == .directory else { return replyError(req, ENOTDIR) }
            cfuse_fi_set_cache_readdir(fi)
            cfuse_fi_set_keep_cache(fi)
            _ = fuse_reply_open(req, fi)
        }
        // Only on kernels that send opens (above); there is nothing to free.
        ops.release = { req, _, _ in replyError(req, 0) }
        ops.releasedir = { req, _, _ in replyError(req, 0) }
        ops.read = { req, ino, size, offset, _ in
            guard let context = mountContext(req) else { return replyError(req, EBADF) }
            guard ino >= 1, ino <= UInt64(context.reader.index.count) else { return replyError(req, EBADF) }
            guard offset >= 0 else { return replyError(req, EINVAL) }
            let position = Int(ino - 1)
            let scratch: WorkerScratch
            let entry: IndexEntry
            do {
                scratch = try context.scratch()
                // The thread's workspace remembers the files it read last,
                // so a run of reads of one file does not touch the index.
                entry = try scratch.workspace.cachedEntry(at: position) ?? context.reader.index.entry(at: position)
            } catch {
                return replyError(req, context.indexFailure(error))
            }
            guard entry.kind == .file else { return replyError(req, EISDIR) }
            do {
                // max_read bounds size; a larger request gets its own buffer.
                var grown = false
                let buffer = size <= MountContext.maximumRead ? scratch.buffer(size: size, grown: &grown) : ReplyBuffer(capacity: size)
                let n = try context.reader.read(entry, fromOffset: UInt64(offset),
                                                into: UnsafeMutableRawBufferPointer(rebasing: buffer.bytes[0..<size]),
                                                using: scratch.workspace)
                _ = fuse_reply_buf(req, buffer.bytes.baseAddress, n)
                if grown { context.warnIfMemoryNotLocked() }
            } catch {
                let path = (try? context.reader.index.path(of: entry)) ?? Array("inode \(ino)".utf8)
                if case BundleError.corruptChunk(let position, let chunk) = error {
                    if context.isFirstReport(ofCorruptChunk: chunk, entry: position) {
                        context.logger.log("error", "chunk \(chunk) failed authentication, returning EIO", path: path)
                    }
                } else {
                    context.logger.log("error", "read failed: \((error as? BundleError)?.message ?? "\(error)")", path: path)
                }
                replyError(req, errnoOf(error))
            }
        }
        ops.readdir = { req, ino, size, offset, _ in listDirectory(req, ino, size, offset, plus: false) }
        ops.readdirplus = { req, ino, size, offset, _ in listDirectory(req, ino, size, offset, plus: true) }
        ops.statfs = { req, _ in
            guard let context = mountContext(req) else { return replyError(req, EIO) }
            var sv = statvfs()
            sv.f_bsize = 4096
            sv.f_frsize = 4096
            sv.f_blocks = fsblkcnt_t((context.reader.bundleSize + 4095) / 4096)
            sv.f_bfree = 0
            sv.f_bavail = 0
            sv.f_files = fsfilcnt_t(context.reader.index.count)
            sv.f_ffree = 0
            sv.f_favail = 0
            sv.f_namemax = UInt(BundleFormat.maximumNameLength)
            sv.f_flag = UInt(ST_RDONLY)
            _ = fuse_reply_statfs(req, &sv)
        }
        ops.access = { req, ino, _ in
            // Permission bits are checked by the kernel (default_permissions);
            // writes are refused by the read-only mount.
            guard let context = mountContext(req), ino >= 1, ino <= UInt64(context.reader.index.count) else { return replyError(req, ENOENT) }
            replyError(req, 0)
        }
        ops.getxattr = { req, _, _, _ in replyError(req, ENODATA) }
        ops.listxattr = { req, _, size in
            if size == 0 { _ = fuse_reply_xattr(req, 0) } else { _ = fuse_reply_buf(req, nil, 0) }
        }
        // Everything that would modify the tree.
        ops.setattr = { req, _, _, _, _ in replyError(req, EROFS) }
        ops.mknod = { req, _, _, _, _ in replyError(req, EROFS) }
        ops.mkdir = { req, _, _, _ in replyError(req, EROFS) }
        ops.unlink = { req, _, _ in replyError(req, EROFS) }
        ops.rmdir = { req, _, _ in replyError(req, EROFS) }
        ops.symlink = { req, _, _, _ in replyError(req, EROFS) }
        ops.rename = { req, _, _, _, _, _ in replyError(req, EROFS) }
        ops.link = { req, _, _, _ in replyError(req, EROFS) }
        ops.write = { req, _, _, _, _, _ in replyError(req, EROFS) }
        ops.create = { req, _, _, _, _ in replyError(req, EROFS) }
        ops.setxattr = { req, _, _, _, _, _ in replyError(req, EROFS) }
        ops.removexattr = { req, _, _ in replyError(req, EROFS) }
        ops.fallocate = { req, _, _, _, _, _ in replyError(req, EROFS) }
        return ops
    }
}

// MARK: - Helpers (file-level so the thunks capture nothing)

private func mountContext(_ req: fuse_req_t?) -> MountContext? {
    guard let req, let raw = fuse_req_userdata(req) else { return nil }
    return Unmanaged<MountContext>.fromOpaque(raw).takeUnretainedValue()
}

private func replyError(_ req: fuse_req_t?, _ code: Int32) {
    _ = fuse_reply_err(req, code)
}

/// The entry of inode `ino`, or nil after replying ENOENT (no such inode)
/// or the index failure's errno (logged once by the context).
private func entryOrReply(_ req: fuse_req_t?, _ context: MountContext, _ ino: fuse_ino_t) -> IndexEntry? {
    do {
        if let entry = try context.reader.index.entry(inode: ino) { return entry }
        replyError(req, ENOENT)
    } catch {
        replyError(req, context.indexFailure(error))
    }
    return nil
}

/// The one translation from errors to errno.
private func errnoOf(_ error: Error) -> Int32 {
    (error as? BundleError)?.errno ?? EIO
}

/// readdir and readdirplus: offset 0 starts, 1 = ".", 2 = "..", 3 + k = child k.
private func listDirectory(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ size: Int, _ offset: off_t, plus: Bool) {
    guard let context = mountContext(req) else { return replyError(req, ENOENT) }
    let index = context.reader.index
    guard let directory = entryOrReply(req, context, ino) else { return }
    guard directory.kind == .directory else { return replyError(req, ENOTDIR) }
    guard offset >= 0 else { return replyError(req, EINVAL) }
    let capacity = min(size, 1 << 20)
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(capacity, 1), alignment: 8)
    defer { buffer.deallocate() }
    guard let base = buffer.baseAddress?.assumingMemoryBound(to: CChar.self) else { return replyError(req, EIO) }
    // One name at a time, NUL-terminated (names are at most 255 bytes).
    let name = UnsafeMutableRawBufferPointer.allocate(byteCount: BundleFormat.maximumNameLength + 1, alignment: 8)
    defer { name.deallocate() }
    var used = 0
    let children = directory.children
    let total = 2 + children.count
    var position = Int(min(offset, off_t(total)))
    do {
        while position < total {
            let entry: IndexEntry
            let length: Int
            switch position {
            case 0:
                entry = directory
                name[0] = 0x2E
                length = 1
            case 1:
                entry = try index.entry(at: directory.parent)
                name[0] = 0x2E
                name[1] = 0x2E
                length = 2
            default:
                entry = try index.entry(at: children.lowerBound + position - 2)
                length = try index.copyName(of: entry, into: name)
            }
            name[length] = 0
            let remaining = capacity - used
            let cname = name.baseAddress?.assumingMemoryBound(to: CChar.self)
            let added: Int
            if plus {
                var e = context.entryParameters(of: entry)
                added = fuse_add_direntry_plus(req, base + used, remaining, cname, &e, off_t(position + 1))
            } else {
                var st = context.attributes(of: entry)
                added = fuse_add_direntry(req, base + used, remaining, cname, &st, off_t(position + 1))
            }
            if added > remaining { break }
            used += added
            position += 1
        }
    } catch {
        // Entries already in the buffer are fine; the next call retries
        // from the failed one.
        if used == 0 { return replyError(req, context.indexFailure(error)) }
        _ = context.indexFailure(error)
    }
    _ = fuse_reply_buf(req, base, used)
}
