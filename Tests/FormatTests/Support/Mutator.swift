import SharedTestSupport

/// Deterministic byte-string mutations for the never-crash tests: bit
/// flips, boundary integers written over fields, truncation, extension and
/// shifted ranges, each at a position drawn from a focus range.
struct Mutator {
    var generator: SeededGenerator

    init(seed: UInt64) { generator = SeededGenerator(seed: seed) }

    /// Integers that sit on the edges of the format's checks.
    private mutating func interesting(near count: Int) -> UInt64 {
        let values: [UInt64] = [0, 1, 2, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x1_0000, 0x7FFF_FFFF, 0xFFFF_FFFF, 0x1_0000_0000,
                                UInt64(Int64.max), UInt64(Int64.max) / 2, UInt64.max, UInt64.max - 15,
                                UInt64(count), UInt64(count) &- 1, UInt64(count) + 1, generator.next()]
        return values.randomElement(using: &generator)!
    }

    /// `input` changed by 1 … `maximum` mutations, positions in `focus`
    /// (clamped to the input).
    mutating func mutate(_ input: [UInt8], focus: Range<Int>? = nil, maximum: Int = 4) -> [UInt8] {
        var bytes = input
        for _ in 0..<Int.random(in: 1...maximum, using: &generator) {
            guard !bytes.isEmpty else {
                bytes = generator.bytes(Int.random(in: 1...64, using: &generator))
                continue
            }
            let range = (focus ?? 0..<bytes.count).clamped(to: 0..<bytes.count)
            let at = range.isEmpty ? Int.random(in: 0..<bytes.count, using: &generator) : Int.random(in: range, using: &generator)
            switch Int.random(in: 0..<10, using: &generator) {
            case 0, 1:
                bytes[at] ^= UInt8(1) << UInt8.random(in: 0..<8, using: &generator)
            case 2:
                bytes[at] = UInt8.random(in: 0...255, using: &generator)
            case 3:
                bytes[at] = Bool.random(using: &generator) ? 0 : 0xFF
            case 4, 5, 6:
                let width = [2, 4, 8].randomElement(using: &generator)!
                let value = interesting(near: bytes.count)
                for i in 0..<width where at + i < bytes.count { bytes[at + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(i))) }
            case 7:
                bytes.removeSubrange(at...)
            case 8:
                bytes += generator.bytes(Int.random(in: 1...64, using: &generator))
            default:
                let length = Int.random(in: 1...16, using: &generator)
                if Bool.random(using: &generator) {
                    bytes.removeSubrange(at..<min(bytes.count, at + length))
                } else {
                    bytes.insert(contentsOf: generator.bytes(length), at: at)
                }
            }
        }
        return bytes
    }
}
