import EncFSCore

/// The `index-page` target: one record page of a paged index, as a key
/// holder could seal it, checked the way a reader checks a page it loads.
///
/// Input framing:
/// ```
/// 0  1  bit 0: a compressed bundle (files may have chunk tables);
///       bit 1: what follows is a zstd frame of the page, whose length is
///       bytes 1 … 2 (u16 LE) + 1, inflated as the reader inflates a page;
///       bit 2 (with bit 0): a bundle with fragments (files may be
///       fragment slices)
/// …     the page (or the length and the frame)
/// ```
/// Whatever the check accepts must keep its promises: every name but the
/// root's is 1 … 255 bytes without '/' or NUL and not "." or "..", parents
/// come before their entries, and siblings that follow each other are in
/// strictly increasing byte order.
enum IndexPageFuzzing {
    nonisolated(unsafe) static var decompressor: ChunkDecompressor?

    static func run(_ input: UnsafeRawBufferPointer) {
        guard input.count >= 1 else { return }
        let compressed = input[0] & 1 != 0
        let fragments = compressed && input[0] & 4 != 0
        guard input[0] & 2 != 0 else {
            check(UnsafeRawBufferPointer(rebasing: input[1...]), compressed: compressed, fragments: fragments)
            return
        }
        guard input.count >= 3,
              let decompressor = FuzzTarget.attempt("ChunkDecompressor()", { try decompressor ?? ChunkDecompressor() }) else { return }
        Self.decompressor = decompressor
        let length = (Int(input[1]) | Int(input[2]) << 8) + 1
        var page = [UInt8](repeating: 0, count: length)
        let inflated = page.withUnsafeMutableBytes { decompressor.decompress(UnsafeRawBufferPointer(rebasing: input[3...]), into: $0) }
        guard inflated else { return }
        page.withUnsafeBytes { check($0, compressed: compressed, fragments: fragments) }
    }

    private static func check(_ page: UnsafeRawBufferPointer, compressed: Bool, fragments: Bool) {
        guard let records = FuzzTarget.attempt("RecordPage.checkedRecords", {
            try RecordPage.checkedRecords(ofPage: page, compressed: compressed, fragments: fragments)
        }) else { return }
        var previous: (parent: Int, name: [UInt8])?
        for record in records {
            if record.position == 0 {
                FuzzTarget.require(record.name.isEmpty && record.parent == 0, "the root has a name or a parent")
            } else {
                let name = record.name
                FuzzTarget.require(!name.isEmpty && name.count <= 255 && !name.contains(0) && !name.contains(UInt8(ascii: "/"))
                                   && name != [0x2E] && name != [0x2E, 0x2E], "an accepted name is invalid")
                FuzzTarget.require(record.parent < record.position, "an accepted entry comes before its parent")
                if let previous, previous.parent == record.parent {
                    FuzzTarget.require(previous.name.lexicographicallyPrecedes(name), "accepted siblings are out of order")
                }
            }
            previous = (record.parent, record.name)
        }
    }
}
