/// The head of one fragment's descriptor in the table stream of a paged
/// index (format version 2 with fragments): the only type that knows where
/// its fields lie.
///
/// Layout (little-endian; docs/FORMAT.md, "Fragments"):
/// ```
///  0 u64  payload offset of the fragment's first chunk
///  8 u64  the fragment's plaintext length F (≥ 1)
/// 16 8·⌈F / CS⌉  the fragment's chunk table (``ChunkTableWindow``), always
///        present, raw chunks included
/// ```
/// The slices that name one descriptor share its body, its id (their
/// records' file id) and its table.
struct FragmentDescriptor {
    /// Bytes before the chunk table.
    static let headSize = 16

    /// Where the fragment's chunks start in the payload.
    let payloadOffset: UInt64
    /// The fragment's plaintext length.
    let plaintextSize: UInt64

    /// Decodes the head in `bytes` (at least ``headSize`` bytes).
    init(_ bytes: UnsafeRawBufferPointer) {
        payloadOffset = bytes.le64(at: 0)
        plaintextSize = bytes.le64(at: 8)
    }

    init(payloadOffset: UInt64, plaintextSize: UInt64) {
        self.payloadOffset = payloadOffset
        self.plaintextSize = plaintextSize
    }

    /// Where the chunk table of the descriptor at `offset` starts.
    static func tableOffset(ofDescriptorAt offset: UInt32) -> UInt64 { UInt64(offset) + UInt64(headSize) }

    /// Appends the head, then the table entries, to `out`.
    func append(table: [UInt64], to out: inout [UInt8]) {
        out.appendLE(payloadOffset)
        out.appendLE(plaintextSize)
        for entry in table { out.appendLE(entry) }
    }
}
