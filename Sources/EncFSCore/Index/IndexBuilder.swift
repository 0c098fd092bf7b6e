import CryptCore

/// Serializes the walked tree into index plaintext (layout in `BundleIndex`).
enum IndexBuilder {
    /// The index key is unique per bundle and seals exactly one message.
    static let zeroNonce = [UInt8](repeating: 0, count: 12)

    /// Associated data of the sealed index: bundle id ‖ chunk size log2 ‖
    /// payload length ‖ index offset, so the index cannot be moved to
    /// another bundle or position.
    static func associatedData(_ header: BundleHeader) -> [UInt8] {
        var aad = header.bundleID
        aad.append(header.layout.chunkSizeLog2)
        aad.appendLE(header.payloadLength)
        aad.appendLE(header.indexOffset)
        return aad
    }

    /// - Throws: `BundleError.limitExceeded` when names and targets exceed
    ///   the 4 GiB a u32 name offset can address.
    static func serialize(_ nodes: [SourceTree.Node], fileIDs: [UInt8], dataOffsets: [UInt64], creationTime: Int64) throws -> [UInt8] {
        // Sized up front so the arrays never reallocate: a reallocation would
        // leave an unwiped copy of the names in freed memory.
        let stringsLength = nodes.reduce(0) { $0 + $1.name.count + $1.symlinkTarget.count }
        guard stringsLength <= Int(UInt32.max) else { throw BundleError.limitExceeded("names take more than 4 GiB") }
        var strings: [UInt8] = []
        strings.reserveCapacity(stringsLength)
        defer { strings.withUnsafeMutableBytes { SecureBytes.wipe($0) } }
        var out: [UInt8] = []
        out.reserveCapacity(BundleIndex.headerSize + nodes.count * IndexEntry.recordSize + stringsLength)
        out += BundleIndex.magic
        out.appendLE(UInt32(nodes.count))
        out.appendLE(UInt32(0))
        let stringsLengthAt = out.count
        out.appendLE(UInt64(0))
        out.appendLE(creationTime)
        for (position, node) in nodes.enumerated() {
            out.appendLE(UInt32(node.parent))
            out.append(node.kind.rawValue)
            out.append(0)
            out.appendLE(node.mode)
            out.appendLE(UInt32(strings.count))
            out.appendLE(UInt16(node.name.count))
            out.appendLE(UInt16(0))
            strings += node.name
            out.appendLE(node.mtimeSeconds)
            out.appendLE(node.mtimeNanoseconds)
            out.appendLE(UInt32(0))
            switch node.kind {
            case .directory:
                out.appendLE(UInt64(node.childCount))
                out.appendLE(UInt64(node.firstChild))
                out += [UInt8](repeating: 0, count: 16)
            case .file:
                out.appendLE(node.size)
                out.appendLE(dataOffsets[position])
                out += fileIDs[(position * 16)..<(position * 16 + 16)]
            case .symlink:
                out.appendLE(UInt64(node.symlinkTarget.count))
                out.appendLE(UInt64(strings.count))
                strings += node.symlinkTarget
                out += [UInt8](repeating: 0, count: 16)
            }
        }
        out.storeLE(UInt64(strings.count), at: stringsLengthAt)
        out += strings
        return out
    }
}
