import Synchronization

/// The inodes a mount has handed to the kernel (by lookup or
/// readdirplus), so that a lock invalidates exactly those: the kernel can
/// hold cached names, attributes and pages of no other.
///
/// One bit per index position behind a `Mutex`: a name is looked up once
/// and then cached by the kernel, so this is off the read path.
final class SeenInodes: Sendable {
    private let bits = Mutex<[UInt64]>([])

    /// Records the entry at index `position`.
    func insert(_ position: Int) {
        guard position >= 0 else { return }
        let word = position / 64
        let bit = UInt64(1) << UInt64(position % 64)
        bits.withLock { bits in
            if bits.count <= word { bits += Array(repeating: 0, count: word + 1 - bits.count) }
            bits[word] |= bit
        }
    }

    /// The recorded positions, ascending, and forgets them all.
    func removeAll() -> [Int] {
        bits.withLock { bits in
            var positions: [Int] = []
            for (word, value) in bits.enumerated() where value != 0 {
                for bit in 0..<64 where value & (UInt64(1) << UInt64(bit)) != 0 {
                    positions.append(word * 64 + bit)
                }
            }
            bits = []
            return positions
        }
    }
}
