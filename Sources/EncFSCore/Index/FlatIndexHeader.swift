/// The 32-byte header of flat index plaintext (layout in ``BundleIndex``):
/// the one place that knows its bytes.
///
/// ```
///  0  8  magic "ENCFSIDX"
///  8  4  entry count n
/// 12  4  reserved (0)
/// 16  8  string table length S
/// 24  8  creation time, seconds since the epoch
/// ```
struct FlatIndexHeader {
    static let magic: [UInt8] = Array("ENCFSIDX".utf8)
    static let size = 32

    let magicMatches: Bool
    let entryCount: Int
    let reservedIsZero: Bool
    let stringsLength: UInt64
    let creationTime: Int64

    /// Decodes the first ``size`` bytes of `b` (the caller checked the length).
    init(_ b: UnsafeRawBufferPointer) {
        magicMatches = b.starts(with: Self.magic)
        entryCount = Int(b.le32(at: 8))
        reservedIsZero = b.le32(at: 12) == 0
        stringsLength = b.le64(at: 16)
        creationTime = Int64(bitPattern: b.le64(at: 24))
    }

    /// Appends a header whose string table length is still to come
    /// (``setStringsLength(_:in:)``).
    static func append(entryCount: Int, creationTime: Int64, to out: inout [UInt8]) {
        out += magic
        out.appendLE(UInt32(entryCount))
        out.appendLE(UInt32(0))
        out.appendLE(UInt64(0))
        out.appendLE(creationTime)
    }

    /// Stores the string table length into the header at the start of `out`.
    static func setStringsLength(_ length: UInt64, in out: inout [UInt8]) { out.storeLE(length, at: 16) }
}
