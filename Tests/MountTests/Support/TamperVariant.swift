import SharedTestSupport

/// One damaged copy of a bundle: a flipped byte, a cut, or bytes appended,
/// with the part of the bundle it hits.
struct TamperVariant: Sendable {
    /// How the pristine bytes are changed.
    enum Change: Hashable, Sendable {
        /// XOR the byte at `offset` with `mask` (never 0).
        case flip(offset: UInt64, mask: UInt8)
        /// Keep the first `length` bytes.
        case truncate(length: UInt64)
        /// Append `count` bytes: zeros, or seeded random bytes.
        case extend(count: Int, random: Bool)
    }

    let change: Change
    /// The region a flip hits; nil for length changes.
    let part: BundleRegions.Part?

    /// Whether every open must fail: anything but damage inside a chunk.
    var refusesOpen: Bool { part?.refusesOpen ?? true }

    /// `fixed header`, `chunk tag`, `truncation`…
    var category: String {
        switch change {
        case .flip: return part?.category ?? "?"
        case .truncate: return "truncation"
        case .extend: return "extension"
        }
    }

    /// For messages: what was done where.
    var name: String {
        switch change {
        case .flip(let offset, let mask):
            return "flip byte \(offset) ^ 0x\(String(mask, radix: 16)) (\(part?.description ?? "?"))"
        case .truncate(let length): return "truncate to \(length) bytes"
        case .extend(let count, let random): return "append \(count) \(random ? "random" : "zero") bytes"
        }
    }

    /// The damaged bytes.
    func apply(to pristine: [UInt8]) -> [UInt8] {
        var bytes = pristine
        switch change {
        case .flip(let offset, let mask):
            bytes[Int(offset)] ^= mask
        case .truncate(let length):
            bytes.removeSubrange(Int(length)...)
        case .extend(let count, let random):
            var generator = SeededGenerator(seed: UInt64(count) &* 7919)
            bytes += random ? generator.bytes(count) : [UInt8](repeating: 0, count: count)
        }
        return bytes
    }

    /// The matrix for a bundle: for flips, every byte of the fixed header
    /// (masks 0x01 and 0x80), every byte of each slot's kind, reserved and
    /// length prefix and of the scrypt parameters (0x01, 0x80, 0xFF), the
    /// first, middle and last byte of every region (0x01, and 0xFF on the
    /// first), and `randomFlips` seeded positions with seeded masks; cuts
    /// at small lengths, at every region start, around the header end and
    /// the file end, and at seeded lengths; appends of 1 … 65,536 bytes.
    /// Duplicates are dropped; the order is stable for a given seed.
    static func matrix(for map: BundleRegions, seed: UInt64, randomFlips: Int = 260, randomCuts: Int = 40) -> [TamperVariant] {
        var generator = SeededGenerator(seed: seed)
        var seen = Set<Change>()
        var variants: [TamperVariant] = []
        func add(_ change: Change) {
            guard seen.insert(change).inserted else { return }
            if case .flip(let offset, _) = change {
                variants.append(TamperVariant(change: change, part: map.region(containing: offset).part))
            } else {
                variants.append(TamperVariant(change: change, part: nil))
            }
        }
        for offset in UInt64(0)..<64 {
            add(.flip(offset: offset, mask: 0x01))
            add(.flip(offset: offset, mask: 0x80))
        }
        for region in map.regions {
            guard case .slot(let kind, let field) = region.part,
                  ["kind", "reserved", "body length"].contains(field) || (kind == "passphrase" && ["log2 N", "body reserved", "r", "p"].contains(field))
            else { continue }
            for offset in region.range {
                for mask: UInt8 in [0x01, 0x80, 0xFF] { add(.flip(offset: offset, mask: mask)) }
            }
        }
        for region in map.regions {
            let range = region.range
            add(.flip(offset: range.lowerBound, mask: 0x01))
            add(.flip(offset: range.lowerBound, mask: 0xFF))
            add(.flip(offset: range.lowerBound + UInt64(range.count) / 2, mask: 0x01))
            add(.flip(offset: range.upperBound - 1, mask: 0x01))
        }
        add(.flip(offset: map.size - 1, mask: 0xFF))
        for _ in 0..<randomFlips {
            add(.flip(offset: UInt64.random(in: 0..<map.size, using: &generator), mask: UInt8.random(in: 1...255, using: &generator)))
        }
        // Another 60 inside the header, where the parsers are.
        for _ in 0..<60 {
            add(.flip(offset: UInt64.random(in: 0..<map.headerLength, using: &generator),
                      mask: UInt8.random(in: 1...255, using: &generator)))
        }

        let h = map.headerLength
        var cuts: [UInt64] = [0, 1, 7, 8, 15, 16, 17, 33, 63, 64, 65, h - 33, h - 32, h - 1, h, h + 1,
                              map.size - 17, map.size - 16, map.size - 1]
        cuts += map.regions.map(\.range.lowerBound)
        for _ in 0..<randomCuts { cuts.append(UInt64.random(in: 0..<map.size, using: &generator)) }
        for length in cuts where length < map.size { add(.truncate(length: length)) }
        for count in [1, 15, 16, 17, 4095, 4096, 4097, 65536] {
            add(.extend(count: count, random: false))
            add(.extend(count: count, random: true))
        }
        return variants
    }
}
