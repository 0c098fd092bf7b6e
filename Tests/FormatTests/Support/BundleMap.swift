import EncFSCore

/// Where things sit in a bundle file, worked out from the byte layout
/// documented on `BundleHeader`, `KeySlot` and `ChunkLayout`, by hand, so a
/// tamper test hits the byte it means to.
struct BundleMap {
    /// Header length H (u32 at 12).
    let headerLength: Int
    /// Offset of each key slot's 4-byte slot header (slots start at 64).
    let slotOffsets: [Int]
    /// Kind byte of each slot.
    let slotKinds: [UInt8]
    /// Absolute offset and length of the sealed index.
    let indexOffset: Int
    let indexLength: Int
    /// Chunk size (2 ^ byte 32).
    let chunkSize: Int

    init(_ b: [UInt8]) {
        func le(_ at: Int, _ n: Int) -> Int { (0..<n).reduce(0) { $0 | Int(b[at + $1]) << (8 * $1) } }
        headerLength = le(12, 4)
        chunkSize = 1 << Int(b[32])
        var offsets: [Int] = []
        var kinds: [UInt8] = []
        var at = 64
        for _ in 0..<Int(b[33]) {
            offsets.append(at)
            kinds.append(b[at])
            at += 4 + le(at + 2, 2)
        }
        slotOffsets = offsets
        slotKinds = kinds
        indexOffset = headerLength + le(48, 8)
        indexLength = le(56, 8)
    }

    /// Offset of the header MAC.
    var macOffset: Int { headerLength - 32 }

    /// Offset of a slot's body (after kind, reserved, length).
    func slotBody(_ slot: Int) -> Int { slotOffsets[slot] + 4 }

    /// Absolute offset of the sealed chunk `chunk` of a file entry: every
    /// chunk before it is chunk size + 16 bytes.
    func chunkOffset(_ entry: IndexEntry, chunk: Int) -> Int {
        headerLength + Int(entry.payloadOffset) + chunk * (chunkSize + 16)
    }

    /// Sealed length of chunk `chunk` of a file entry (plaintext + 16-byte tag).
    func sealedLength(_ entry: IndexEntry, chunk: Int) -> Int {
        min(chunkSize, Int(entry.fileSize) - chunk * chunkSize) + 16
    }
}
