extension BundleIndex {
    /// Checks the rules of a paged index that span pages, which a reader
    /// does not check at open (`encfs-inspect verify` runs this; a flat
    /// index was checked whole at open, so this does nothing for one).
    ///
    /// Loading every page checks each one on its own
    /// (`RecordPage.validate`); on top of that: directory child ranges tile
    /// records 1 … n−1 in order, every entry lies in its parent's range,
    /// siblings are in name order across page breaks, file bodies do not
    /// overlap unless they are one shared body (format version 2), page 0
    /// lists exactly the symlinks that may lead outside, and its counts and
    /// sums are right. Memory: about 56 bytes per file with a body.
    ///
    /// - Throws: `BundleError.corruptIndex` naming the first violation; what
    ///   loading a page throws.
    package func checkWholeIndex() throws {
        guard case .paged(let store) = storage else { return }
        func bad(_ why: String) -> BundleError { .corruptIndex(why) }
        var nextChild = 1
        var childTotal = 0
        var parent = try entry(at: 0)
        var previous: (parent: Int, name: [UInt8]) = (-1, [])
        var suspects: [UInt32] = []
        var files = 0
        var plaintext: UInt64 = 0
        var bodies: [(record: BodyKey, end: UInt64)] = []
        for position in 0..<count {
            let entry = try entry(at: position)
            if position > 0 {
                if parent.position != entry.parent { parent = try self.entry(at: entry.parent) }
                guard parent.kind == .directory, parent.children.contains(position) else {
                    throw bad("entry \(position) is not among its parent's children")
                }
                let name = try self.name(of: entry)
                if previous.parent == entry.parent {
                    guard previous.name.lexicographicallyPrecedes(name) else {
                        throw bad("entries \(position - 1) and \(position) are not in name order")
                    }
                }
                previous = (entry.parent, name)
            }
            switch entry.kind {
            case .directory:
                if entry.size > 0 {
                    guard entry.first == UInt64(nextChild) else { throw bad("directory \(position) has an invalid child range") }
                    nextChild += Int(entry.size)
                }
                childTotal += Int(entry.size)
            case .file:
                files += 1
                plaintext &+= entry.size
                let stored = try storedSize(of: entry)
                if stored > 0 { bodies.append((BodyKey(entry), entry.first + stored)) }
            case .symlink:
                if try withSymlinkTarget(of: entry, { SymlinkContainment.isSuspect($0) }) { suspects.append(UInt32(position)) }
            }
        }
        guard childTotal == count - 1, nextChild == count else { throw bad("directory child ranges do not cover every entry") }
        guard suspects == store.directory.suspectSymlinks else { throw bad("page 0 lists other symlinks than the index holds") }
        bodies.sort { $0.record.start < $1.record.start }
        var stored: UInt64 = 0
        var distinct: UInt64 = 0
        for i in bodies.indices {
            if i > 0 {
                if bodies[i].record == bodies[i - 1].record && features.allowsSharedBodies { continue }
                guard bodies[i].record.start >= bodies[i - 1].end else { throw bad("file data ranges overlap") }
            }
            stored &+= bodies[i].end - bodies[i].record.start
            distinct &+= bodies[i].record.size
        }
        let directory = store.directory
        guard files == directory.fileCount, plaintext == directory.totalFileBytes, stored == directory.storedFileBytes,
              distinct == directory.distinctFileBytes else {
            throw bad("page 0's file counts or sizes do not match the records")
        }
    }
}

/// The fields that make two file records one body (as `BodyRecord`, from a
/// decoded entry).
private struct BodyKey: Equatable {
    let start: UInt64
    let size: UInt64
    let id: IndexEntry.FileID
    let flags: UInt8
    let table: UInt32

    init(_ entry: IndexEntry) {
        start = entry.first
        size = entry.size
        id = entry.fileID
        flags = entry.flags
        table = entry.chunkTableOffset
    }
}
