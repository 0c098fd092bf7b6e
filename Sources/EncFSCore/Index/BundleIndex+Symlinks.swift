/// The index as a tree the symlink walker can follow (`resolve(path:)`
/// and the containment check), and the check itself.
extension BundleIndex: SymlinkTree {
    func isRoot(_ node: IndexEntry) -> Bool { node.position == 0 }
    func kind(of node: IndexEntry) -> IndexEntry.Kind { node.kind }
    /// The parent of `node`, which must list `node` among its children: a
    /// paged index checks this here, where it is used, rather than at
    /// open (a flat index was checked whole at open).
    ///
    /// - Throws: `BundleError.corruptIndex` when it does not; as ``entry(at:)``.
    func parent(of node: IndexEntry) throws -> IndexEntry {
        let parent = try entry(at: node.parent)
        guard node.position == 0 || parent.children.contains(node.position) else {
            throw BundleError.corruptIndex("entry \(node.position) is not among its parent's children")
        }
        return parent
    }

    func child(named name: [UInt8], of directory: IndexEntry) throws -> IndexEntry? {
        try name.withUnsafeBytes { try lookup($0, in: directory) }
    }

    func target(of link: IndexEntry) throws -> [UInt8] { try withSymlinkTarget(of: link) { Array($0) } }
}

extension BundleIndex {
    /// The symlinks whose targets lead outside the bundle (absolute, or
    /// climbing above the root: see `SymlinkContainment`), in index order.
    ///
    /// Only the links whose targets start with '/' or hold ".." are looked
    /// at (their positions were kept at load), so a bundle without such
    /// links costs nothing here.
    ///
    /// - Parameter limit: stop after this many (1 to learn whether any).
    /// - Throws: as ``entry(at:)``.
    package func externalSymlinks(limit: Int = .max) throws -> [IndexEntry] {
        var found: [IndexEntry] = []
        for position in suspectSymlinkPositions where found.count < limit {
            let link = try entry(at: Int(position))
            if try SymlinkContainment.isExternal(link, in: self) { found.append(link) }
        }
        return found
    }

    /// Whether `entry` is a symlink that leads outside the bundle.
    ///
    /// - Throws: as ``entry(at:)``.
    package func isExternalSymlink(_ entry: IndexEntry) throws -> Bool {
        guard entry.kind == .symlink else { return false }
        // Ascending positions: a binary search, not a set.
        var low = 0
        var high = suspectSymlinkPositions.count
        while low < high {
            let mid = (low + high) / 2
            if suspectSymlinkPositions[mid] < UInt32(entry.position) { low = mid + 1 } else { high = mid }
        }
        guard low < suspectSymlinkPositions.count, suspectSymlinkPositions[low] == UInt32(entry.position) else { return false }
        return try SymlinkContainment.isExternal(entry, in: self)
    }

    /// Refuses the index when a symlink leads outside the bundle, naming
    /// the first such link.
    ///
    /// - Throws: `BundleError.externalSymlink` with the link's path (at
    ///   most `PrintableText.defaultLimit` bytes, see
    ///   ``path(of:maximumLength:)``) and target; as ``entry(at:)``.
    func refuseExternalSymlinks() throws {
        guard let link = try externalSymlinks(limit: 1).first else { return }
        throw BundleError.externalSymlink(path: try path(of: link, maximumLength: PrintableText.defaultLimit),
                                          target: try target(of: link))
    }
}
