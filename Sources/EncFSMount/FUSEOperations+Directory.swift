import EncFSCore
import CryptCore
import CFuse
#if canImport(Glibc)
import Glibc
#endif

extension FUSEOperations {
    /// `readdir`: names with the inode and type of each.
    static func readdir(_ req: fuse_req_t?, inode: fuse_ino_t, size: Int, offset: off_t) {
        listDirectory(req, inode: inode, size: size, offset: offset, plus: false)
    }

    /// `readdirplus`: names with full attributes, which fill the kernel's
    /// entry and attribute caches (no lookup per name after `ls -l`).
    static func readdirplus(_ req: fuse_req_t?, inode: fuse_ino_t, size: Int, offset: off_t) {
        listDirectory(req, inode: inode, size: size, offset: offset, plus: true)
    }

    /// Fills up to `size` bytes with the names from `offset` on (see
    /// ``DirectoryCursor`` for what offsets mean).
    private static func listDirectory(_ req: fuse_req_t?, inode: fuse_ino_t, size: Int, offset: off_t, plus: Bool) {
        guard let context = MountContext.of(req) else { return reply(req, errno: EIO) }
        context.serve(req) { reader in listDirectory(req, context, reader, inode: inode, size: size, offset: offset, plus: plus) }
    }

    private static func listDirectory(_ req: fuse_req_t?, _ context: MountContext, _ reader: BundleReader, inode: fuse_ino_t,
                                      size: Int, offset: off_t, plus: Bool) {
        guard let directory = entry(req, context, reader, inode: inode) else { return }
        guard directory.kind == .directory else { return reply(req, errno: ENOTDIR) }
        guard var cursor = DirectoryCursor(offset: offset, childCount: directory.children.count) else {
            return reply(req, errno: EINVAL)
        }
        // The listing and each name go through the thread's locked buffers,
        // wiped once libfuse has copied the reply: names are as secret as
        // contents. The kernel asks for a page or so at a time; a larger
        // request gets at most max_read bytes of names.
        let scratch = context.scratch()
        let capacity = min(max(size, 0), MountContext.maximumRead)
        var grown = false
        let buffer = UnsafeMutableRawBufferPointer(rebasing: scratch.buffer(size: capacity, grown: &grown).bytes[0..<capacity])
        if grown { context.warnIfMemoryNotLocked() }
        let name = scratch.name.bytes
        guard let base = buffer.baseAddress?.assumingMemoryBound(to: CChar.self),
              let cname = name.baseAddress?.assumingMemoryBound(to: CChar.self) else { return reply(req, errno: EIO) }
        var used = 0
        defer {
            SecureBytes.wipe(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<used]))
            SecureBytes.wipe(UnsafeMutableRawBufferPointer(rebasing: name[0...BundleFormat.maximumNameLength]))
        }
        do {
            while let slot = cursor.slot {
                let entry = try listedEntry(slot, of: directory, index: reader.index, name: name)
                let remaining = capacity - used
                let added: Int
                if plus {
                    var e = context.entryParameters(of: entry, in: reader)
                    added = fuse_add_direntry_plus(req, base + used, remaining, cname, &e, cursor.nextOffset)
                } else {
                    var st = context.attributes(of: entry, in: reader)
                    added = fuse_add_direntry(req, base + used, remaining, cname, &st, cursor.nextOffset)
                }
                if added > remaining { break }
                // The kernel counts a readdirplus entry as a lookup, but
                // not "." and "..".
                if plus, case .child = slot { context.bundle.seen.insert(entry.position) }
                used += added
                cursor.advance()
            }
        } catch {
            // The names already in the buffer are good; the kernel asks
            // again from the failed one.
            if used == 0 { return context.reply(req, failure: error, inode: inode) }
            _ = context.failures.errno(for: error, inode: inode)
        }
        _ = fuse_reply_buf(req, base, used)
    }

    /// The entry `slot` names in `directory`, with its name copied into
    /// `name` and NUL-terminated.
    private static func listedEntry(_ slot: DirectoryCursor.Slot, of directory: IndexEntry, index: BundleIndex,
                                    name: UnsafeMutableRawBufferPointer) throws -> IndexEntry {
        let entry: IndexEntry
        let length: Int
        switch slot {
        case .current:
            entry = directory
            name[0] = UInt8(ascii: ".")
            length = 1
        case .parent:
            entry = try index.entry(at: directory.parent)
            name[0] = UInt8(ascii: ".")
            name[1] = UInt8(ascii: ".")
            length = 2
        case .child(let k):
            entry = try index.entry(at: directory.children.lowerBound + k)
            length = try index.copyName(of: entry, into: name)
        }
        name[length] = 0
        return entry
    }
}
