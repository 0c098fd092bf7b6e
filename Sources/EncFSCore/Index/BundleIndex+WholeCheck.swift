extension BundleIndex {
    /// Checks the rules of a paged index that span pages, which a reader
    /// does not check at open (`encfs-inspect verify` runs this; a flat
    /// index was checked whole at open, so this does nothing for one).
    ///
    /// Loading every page checks each one on its own
    /// (`RecordPage.validate`); on top of that, the rules across records
    /// (``IndexRules``): directory child ranges tile records 1 … n−1 in
    /// order, every entry lies in its parent's range, siblings are in name
    /// order across page breaks, file bodies do not overlap unless they are
    /// one shared body (format version 2; a fragment is one body that all
    /// its slices share), the slices of a fragment do not overlap unless
    /// they are one; and page 0 lists exactly the
    /// symlinks that may lead outside, and its counts and sums are right.
    /// Memory: about 56 bytes per file with a body.
    ///
    /// - Throws: `BundleError.corruptIndex` naming the first violation; what
    ///   loading a page throws.
    package func checkWholeIndex() throws {
        guard case .paged(let store) = storage else { return }
        do {
            try checkAcrossRecords(store.directory)
        } catch let violation as IndexRules.Violation {
            throw BundleError.corruptIndex(violation.why)
        }
    }

    private func checkAcrossRecords(_ directory: IndexDirectory) throws {
        var tiling = IndexRules.ChildTiling()
        var parent = try entry(at: 0)
        var previous: (parent: Int, name: [UInt8]) = (-1, [])
        var suspects: [UInt32] = []
        var (files, plaintext) = (0, UInt64(0))
        var bodies: [(body: BodyRecord, end: UInt64)] = []
        // Each fragment's slices, by the fragment's payload offset.
        var slices: [UInt64: [(offset: UInt64, size: UInt64)]] = [:]
        for position in 0..<count {
            let entry = try entry(at: position)
            if position > 0 {
                if parent.position != entry.parent { parent = try self.entry(at: entry.parent) }
                try IndexRules.checkMembership(position, parentIsDirectory: parent.kind == .directory,
                                               parentChildren: (UInt64(parent.children.lowerBound), UInt64(parent.children.count)))
                let name = try self.name(of: entry)
                if previous.parent == entry.parent {
                    try previous.name.withUnsafeBytes { p in
                        try name.withUnsafeBytes { n in try IndexRules.checkNameOrder(p, n, position: position) }
                    }
                }
                previous = (entry.parent, name)
            }
            switch entry.kind {
            case .directory:
                let children = entry.children
                try tiling.add(directory: position, children: (UInt64(children.lowerBound), UInt64(children.count)))
            case .file:
                files += 1
                plaintext &+= entry.fileSize
                let (body, sliceOffset) = try self.body(of: entry)
                if entry.isFragmentSlice { slices[body.payloadOffset, default: []].append((sliceOffset, entry.fileSize)) }
                let stored = try storedSize(of: body)
                if stored > 0 { bodies.append((BodyRecord(body), body.payloadOffset + stored)) }
            case .symlink:
                if try withSymlinkTarget(of: entry, { SymlinkContainment.isSuspect($0) }) { suspects.append(UInt32(position)) }
            }
        }
        try tiling.checkComplete(entryCount: count)
        guard suspects == directory.suspectSymlinks else {
            throw IndexRules.Violation("page 0 lists other symlinks than the index holds")
        }
        let (stored, distinct) = try IndexRules.distinctBodies(&bodies, sharesAllowed: features.allowsSharedBodies)
        for (start, var list) in slices { try IndexRules.checkSlicesDisjoint(&list, fragmentAt: start) }
        guard files == directory.fileCount, plaintext == directory.totalFileBytes, stored == directory.storedFileBytes,
              distinct == directory.distinctFileBytes else {
            throw IndexRules.Violation("page 0's file counts or sizes do not match the records")
        }
    }
}
