import EncFSCore
import EncFSService
import CryptCore
import CFuse
#if canImport(Glibc)
import Glibc
#endif

extension FUSEOperations {
    /// `read`: decrypts the chunks `size` bytes at `offset` cover into the
    /// worker's reply buffer and sends it; short only at end of file.
    ///
    /// The hot path: no allocation (the worker's scratch holds the buffer,
    /// the workspace the cipher context and recent entries); the only lock
    /// is the bundle's gate, taken for reading (``MountContext/serve(_:_:)``).
    /// With `--enforce-reads` the caller is checked first (``AccessPolicy``).
    ///
    /// While locked, only a handle opened under `unless-open` reads on, with
    /// its own key (``OpenFileTable``); anything else answers ENOKEY.
    static func read(_ req: fuse_req_t?, inode: fuse_ino_t, size: Int, offset: off_t, handle: UInt64) {
        guard let context = MountContext.of(req) else { return reply(req, errno: EBADF) }
        context.serve(req, { reader in read(req, context, reader, inode: inode, size: size, offset: offset) }, whenLocked: {
            guard handle != 0, let file = context.bundle.openFiles.file(handle) else { return reply(req, errno: ENOKEY) }
            read(req, context, file, size: size, offset: offset)
        })
    }

    /// `read` of a file kept open through a lock (`unless-open`).
    private static func read(_ req: fuse_req_t?, _ context: MountContext, _ file: DetachedFile, size: Int, offset: off_t) {
        guard offset >= 0, size >= 0 else { return reply(req, errno: EINVAL) }
        if context.access.checksReads,
           let refusal = context.access.refusal(of: .read, to: file.entry, by: AccessPolicy.Caller(req)) {
            return reply(req, errno: refusal)
        }
        do {
            let scratch = context.scratch()
            var grown = false
            let buffer = size <= MountContext.maximumRead ? scratch.buffer(size: size, grown: &grown) : ReplyBuffer(capacity: size)
            let n = try file.read(fromOffset: UInt64(offset), into: UnsafeMutableRawBufferPointer(rebasing: buffer.bytes[0..<size]))
            _ = fuse_reply_buf(req, buffer.bytes.baseAddress, n)
            // Locked: the file's plaintext must not outlive its handle in
            // this thread's buffer (the unlocked path overwrites it on the
            // next read and a lock wipes it).
            SecureBytes.wipe(UnsafeMutableRawBufferPointer(rebasing: buffer.bytes[0..<n]))
        } catch {
            context.reply(req, failure: error, inode: UInt64(file.entry.position + 1))
        }
    }

    private static func read(_ req: fuse_req_t?, _ context: MountContext, _ reader: BundleReader, inode: fuse_ino_t,
                             size: Int, offset: off_t) {
        guard inode >= 1, inode <= UInt64(reader.index.count) else { return reply(req, errno: EBADF) }
        guard offset >= 0, size >= 0 else { return reply(req, errno: EINVAL) }
        let position = Int(inode - 1)
        do {
            let scratch = context.scratch()
            let workspace = try scratch.workspace(for: reader)
            // The thread's workspace remembers the files it read last, so a
            // run of reads of one file does not touch the index.
            let entry = try workspace.cachedEntry(at: position) ?? reader.index.entry(at: position)
            guard entry.kind == .file else { return reply(req, errno: EISDIR) }
            // --enforce-reads: whoever reads now, through whatever
            // descriptor, must pass the policy as if opening.
            if context.access.checksReads,
               let refusal = context.access.refusal(of: .read, to: entry, by: AccessPolicy.Caller(req)) {
                return reply(req, errno: refusal)
            }
            // On a ring, the entry's payload is the reply: decrypted there,
            // it is sent without a copy. Else max_read bounds size; a
            // larger request gets its own buffer.
            var grown = false
            var oneOff: ReplyBuffer?
            let target: UnsafeMutableRawBufferPointer
            if let payload = context.transport.payload(forReplyOf: size) {
                target = payload
            } else if size <= MountContext.maximumRead {
                target = UnsafeMutableRawBufferPointer(rebasing: scratch.buffer(size: size, grown: &grown).bytes[0..<size])
            } else {
                let own = ReplyBuffer(capacity: size)
                oneOff = own
                target = UnsafeMutableRawBufferPointer(rebasing: own.bytes[0..<size])
            }
            let n = try reader.read(entry, fromOffset: UInt64(offset), into: target, using: workspace)
            _ = fuse_reply_buf(req, target.baseAddress, n)
            withExtendedLifetime(oneOff) {}
            if grown { context.warnIfMemoryNotLocked() }
        } catch {
            context.reply(req, failure: error, inode: inode)
        }
    }
}
