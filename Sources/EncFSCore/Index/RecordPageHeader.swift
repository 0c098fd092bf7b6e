/// The 16-byte header of a record page (layout in ``RecordPage``): the one
/// place that knows its bytes.
///
/// ```
///  0  4  first position
///  4  4  record count m
///  8  4  strings length S
/// 12  4  reserved (0)
/// ```
struct RecordPageHeader {
    static let size = 16

    let firstPosition: Int
    let recordCount: Int
    let stringsLength: Int
    let reservedIsZero: Bool

    /// Decodes the first ``size`` bytes of `b` (the caller checked the length).
    init(_ b: UnsafeRawBufferPointer) {
        firstPosition = Int(b.le32(at: 0))
        recordCount = Int(b.le32(at: 4))
        stringsLength = Int(b.le32(at: 8))
        reservedIsZero = b.le32(at: 12) == 0
    }

    /// Appends a header.
    static func append(firstPosition: Int, recordCount: Int, stringsLength: Int, to out: inout [UInt8]) {
        out.appendLE(UInt32(firstPosition))
        out.appendLE(UInt32(recordCount))
        out.appendLE(UInt32(stringsLength))
        out.appendLE(UInt32(0))
    }
}
