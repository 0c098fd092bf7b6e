import EncFSCore
import CFuse
#if canImport(Glibc)
import Glibc
#endif

extension FUSEOperations {
    /// `read`: decrypts the chunks `size` bytes at `offset` cover into the
    /// worker's reply buffer and sends it; short only at end of file.
    ///
    /// The hot path: no allocation (the worker's scratch holds the buffer,
    /// the workspace the cipher context and recent entries), no lock. With
    /// `--enforce-reads` the caller is checked first (``AccessPolicy``).
    static func read(_ req: fuse_req_t?, inode: fuse_ino_t, size: Int, offset: off_t) {
        guard let context = MountContext.of(req) else { return reply(req, errno: EBADF) }
        guard inode >= 1, inode <= UInt64(context.reader.index.count) else { return reply(req, errno: EBADF) }
        guard offset >= 0, size >= 0 else { return reply(req, errno: EINVAL) }
        let position = Int(inode - 1)
        do {
            let scratch = try context.scratch()
            // The thread's workspace remembers the files it read last, so a
            // run of reads of one file does not touch the index.
            let entry = try scratch.workspace.cachedEntry(at: position) ?? context.reader.index.entry(at: position)
            guard entry.kind == .file else { return reply(req, errno: EISDIR) }
            // --enforce-reads: whoever reads now, through whatever
            // descriptor, must pass the policy as if opening.
            if context.access.checksReads,
               let refusal = context.access.refusal(of: .read, to: entry, by: AccessPolicy.Caller(req)) {
                return reply(req, errno: refusal)
            }
            // max_read bounds size; a larger request gets its own buffer.
            var grown = false
            let buffer = size <= MountContext.maximumRead ? scratch.buffer(size: size, grown: &grown) : ReplyBuffer(capacity: size)
            let n = try context.reader.read(entry, fromOffset: UInt64(offset),
                                            into: UnsafeMutableRawBufferPointer(rebasing: buffer.bytes[0..<size]),
                                            using: scratch.workspace)
            _ = fuse_reply_buf(req, buffer.bytes.baseAddress, n)
            if grown { context.warnIfMemoryNotLocked() }
        } catch {
            context.reply(req, failure: error, inode: inode)
        }
    }
}
