extension BundleIndex {
    /// The body `entry`'s bytes lie in, and where they start in it: a
    /// fragment slice's fragment (as a file entry of its own, with its
    /// chunk table, its id and the slice's position for messages) at the
    /// slice's offset; any other file is its own body, at 0.
    ///
    /// A fragment's descriptor is checked each time it is read (the record
    /// page checked only that its head lies inside the table stream):
    /// ``IndexRules/checkFragment(_:at:slice:position:layout:dataLength:tableStreamLength:)``.
    ///
    /// - Throws: `BundleError.corruptIndex` naming the file; what reading a
    ///   page of the index throws.
    @inline(__always)
    package func body(of entry: IndexEntry) throws -> (body: IndexEntry, sliceOffset: UInt64) {
        guard entry.isFragmentSlice else { return (entry, 0) }
        return (try fragment(of: entry), entry.sliceOffset)
    }

    /// The fragment that holds slice `entry` (see ``body(of:)``).
    private func fragment(of entry: IndexEntry) throws -> IndexEntry {
        // Only a paged index of a bundle with fragments has slices: the
        // record rules refuse the flag anywhere else.
        guard case .paged(let store) = storage else { preconditionFailure("internal error: a fragment slice in a flat index") }
        var head = (UInt64(0), UInt64(0))
        try withUnsafeMutableBytes(of: &head) { try store.copyTableBytes(at: UInt64(entry.chunkTableOffset), into: $0) }
        let descriptor = withUnsafeBytes(of: head) { FragmentDescriptor($0) }
        do throws(IndexRules.Violation) {
            try IndexRules.checkFragment(descriptor, at: entry.chunkTableOffset, slice: (entry.sliceOffset, entry.fileSize),
                                         position: entry.position, layout: fragmentLayout, dataLength: dataLength,
                                         tableStreamLength: store.directory.tableStreamLength)
        } catch {
            throw BundleError.corruptIndex(error.why)
        }
        return IndexEntry(fragmentOf: entry, payloadOffset: descriptor.payloadOffset, size: descriptor.plaintextSize,
                          tableOffset: UInt32(FragmentDescriptor.tableOffset(ofDescriptorAt: entry.chunkTableOffset)))
    }
}

extension BundleIndex {
    /// The layout `entry`'s chunks follow: fragment units for a fragment's
    /// own entry (from ``body(of:)``), chunks of the chunk size for a
    /// file's.
    @inline(__always)
    package func layout(of entry: IndexEntry) -> ChunkLayout { entry.isFragmentBody ? fragmentLayout : layout }
}

extension BundleIndex {
    /// Walks every file, and every distinct non-empty body once, in the
    /// order the chunk digest covers them (docs/FORMAT.md, "Chunk digest"):
    /// files' own bodies in index order of their first file, then
    /// fragments in payload order (encfs-pack writes them after every
    /// other body). What a signature's chunk digest hashes, `verify`
    /// checks and a rekey re-seals.
    ///
    /// Memory: one entry per fragment, besides what ``SharedBodies`` keeps.
    ///
    /// - Parameters:
    ///   - file: called for each file entry, in index order.
    ///   - body: called for each distinct body with chunks, as a file entry
    ///     (a fragment's from ``body(of:)``).
    /// - Throws: what the callbacks and reading the index throw.
    package func forEachBody(file: (IndexEntry) throws -> Void, body: (IndexEntry) throws -> Void) throws {
        var seen = SharedBodies()
        var fragments: [IndexEntry] = []
        for position in 0..<count {
            let entry = try entry(at: position)
            guard entry.kind == .file else { continue }
            try file(entry)
            let own = try self.body(of: entry).body
            guard own.fileSize > 0, seen.isFirstSight(of: own) else { continue }
            if entry.isFragmentSlice { fragments.append(own) } else { try body(own) }
        }
        fragments.sort { $0.payloadOffset < $1.payloadOffset }
        for fragment in fragments { try body(fragment) }
    }
}
