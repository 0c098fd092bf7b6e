import Synchronization

/// The inodes the kernel holds from this mount (handed out by lookup or
/// readdirplus and not yet forgotten), so that every lock invalidates
/// each of them: the kernel can hold cached names, attributes and pages
/// of no other.
///
/// Kept across locks, by the kernel's own lookup count: a file opened
/// before one lock and read again after the unlock needs no new lookup
/// (its descriptor holds the inode), yet its pages are plaintext again at
/// the next lock. An inode leaves only when `forget` brings its count to
/// zero, which the kernel sends once it has evicted the inode (and its
/// pages with it). Counting a reply the kernel then dropped only costs an
/// invalidation that finds nothing.
///
/// The counts are one dense array indexed by index position, grown to the
/// highest position handed out: 4 bytes an entry, where a dictionary's
/// keys, values and growth broke the 100,000-file memory gate of
/// `Scripts/test.sh` (docs/PERFORMANCE.md, "Memory"). A count
/// that reaches `UInt32.max` stays there: that inode is then invalidated
/// at every lock, which is harmless.
///
/// Behind a `Mutex`: lookups and forgets are off the read path.
package final class SeenInodes: Sendable {
    private let counts = Mutex<[UInt32]>([])

    /// Records one more reference the kernel takes to the entry at index
    /// `position` (a positive lookup reply, a readdirplus entry other than
    /// "." and ".."). Called before the reply is sent, so a `forget` can
    /// never come first.
    package func insert(_ position: Int) {
        guard position >= 0 else { return }
        counts.withLock { counts in
            if counts.count <= position {
                let grown = max(position + 1, counts.count * 2)
                counts.append(contentsOf: repeatElement(0, count: grown - counts.count))
            }
            if counts[position] < UInt32.max { counts[position] += 1 }
        }
    }

    /// Takes `count` references away from inode `inode` (a `forget`);
    /// the inode is no longer recorded once none is left.
    package func forget(inode: UInt64, count: UInt64) {
        guard inode >= 1, inode <= UInt64(Int.max) else { return }
        let position = Int(inode - 1)
        counts.withLock { counts in
            guard position < counts.count, counts[position] != 0, counts[position] < UInt32.max else { return }
            counts[position] = count >= UInt64(counts[position]) ? 0 : counts[position] - UInt32(count)
        }
    }

    /// The recorded positions, ascending (parents before their children:
    /// the index is in breadth-first order). They stay recorded: the
    /// kernel keeps the inodes until it forgets them.
    package var positions: [Int] {
        counts.withLock { counts in counts.indices.filter { counts[$0] != 0 } }
    }
}
