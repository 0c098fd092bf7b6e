extension BundleIndex {
    /// Files that share a file id with an earlier file (in index order)
    /// without sharing its body, each with the first file that has it.
    ///
    /// encfs-pack draws every file id at random, and gives one id to two
    /// files only when they have one body (deduplication, format version 2:
    /// same payload offset, size and chunk table, so one ciphertext under
    /// one key and nonce sequence). Any other sharing means the index was
    /// not written by it: two bodies under one id have one file key and
    /// the same chunk nonces, and the index is wrong about one of them.
    /// Readers do not look (a mount would need 16 bytes per file for it);
    /// `encfs-inspect verify` does, and reports each as damage.
    ///
    /// - Returns: (first file, later file) pairs, ordered by the later one.
    /// - Throws: as ``entry(at:)``.
    package func filesSharingIDs() throws -> [(first: IndexEntry, duplicate: IndexEntry)] {
        // The body fields are kept beside each id, so only the pairs found
        // are read again: a paged index loads a page per random read.
        var ids: [(id: IndexEntry.FileID, position: Int, body: SharedBody)] = []
        ids.reserveCapacity(fileCount)
        for position in 0..<count {
            let entry = try entry(at: position)
            if entry.kind == .file { ids.append((entry.fileID, position, SharedBody(entry))) }
        }
        ids.sort { ($0.id.high, $0.id.low, $0.position) < ($1.id.high, $1.id.low, $1.position) }
        var pairs: [(first: IndexEntry, duplicate: IndexEntry)] = []
        var runStart = 0
        for i in ids.indices.dropFirst() {
            if ids[i].id != ids[runStart].id {
                runStart = i
                continue
            }
            if features.allowsSharedBodies, ids[i].body == ids[runStart].body { continue }
            pairs.append((try entry(at: ids[runStart].position), try entry(at: ids[i].position)))
        }
        return pairs.sorted { $0.duplicate.position < $1.duplicate.position }
    }
}

/// The fields that make two files with one id one body: payload offset,
/// size, flags and chunk table; for fragment slices, the fragment's
/// descriptor (its slices share its id, at different offsets).
private struct SharedBody: Equatable {
    let first: UInt64
    let size: UInt64
    let flags: UInt8
    let table: UInt32

    init(_ entry: IndexEntry) {
        (first, size) = entry.isFragmentSlice ? (0, 0) : (entry.payloadOffset, entry.fileSize)
        flags = entry.flags
        table = entry.chunkTableOffset
    }
}
