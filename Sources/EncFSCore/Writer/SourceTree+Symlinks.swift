/// The walked source tree as a tree the symlink walker can follow, so the
/// packer judges links exactly as a reader of the bundle will.
extension SourceTree: SymlinkTree {
    func isRoot(_ node: Int) -> Bool { node == 0 }
    func kind(of node: Int) -> IndexEntry.Kind { nodes[node].kind }
    func parent(of node: Int) -> Int { nodes[node].parent }
    func target(of link: Int) -> [UInt8] { nodes[link].symlinkTarget }

    /// Binary search: children are contiguous and sorted by name bytes.
    func child(named name: [UInt8], of directory: Int) -> Int? {
        var low = nodes[directory].firstChild
        var high = low + nodes[directory].childCount
        while low < high {
            let mid = (low + high) / 2
            if nodes[mid].name == name { return mid }
            if nodes[mid].name.lexicographicallyPrecedes(name) { low = mid + 1 } else { high = mid }
        }
        return nil
    }
}
