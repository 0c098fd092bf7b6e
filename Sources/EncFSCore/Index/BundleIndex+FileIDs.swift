extension BundleIndex {
    /// Files that share a file id with an earlier file (in index order),
    /// each with the first file that has it.
    ///
    /// encfs-pack draws every file id at random, so a shared one means the
    /// index was not written by it: two files with one id have one file key
    /// and the same chunk nonces, and the index is wrong about one of them.
    /// Readers do not look (a mount would need 16 bytes per file for it);
    /// `encfs-inspect verify` does, and reports each as damage.
    ///
    /// - Returns: (first file, later file) pairs, ordered by the later one.
    /// - Throws: as ``entry(at:)``.
    package func filesSharingIDs() throws -> [(first: IndexEntry, duplicate: IndexEntry)] {
        var ids: [(id: IndexEntry.FileID, position: Int)] = []
        ids.reserveCapacity(fileCount)
        for position in 0..<count {
            let entry = try entry(at: position)
            if entry.kind == .file { ids.append((entry.fileID, position)) }
        }
        ids.sort { ($0.id.high, $0.id.low, $0.position) < ($1.id.high, $1.id.low, $1.position) }
        var pairs: [(first: IndexEntry, duplicate: IndexEntry)] = []
        var runStart = 0
        for i in ids.indices.dropFirst() {
            if ids[i].id != ids[runStart].id {
                runStart = i
                continue
            }
            pairs.append((try entry(at: ids[runStart].position), try entry(at: ids[i].position)))
        }
        return pairs.sorted { $0.duplicate.position < $1.duplicate.position }
    }
}
