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
/// Behind a `Mutex`: lookups and forgets are off the read path.
final class SeenInodes: Sendable {
    private let counts = Mutex<[Int: UInt64]>([:])

    /// Records one more reference the kernel takes to the entry at index
    /// `position` (a positive lookup reply, a readdirplus entry other than
    /// "." and ".."). Called before the reply is sent, so a `forget` can
    /// never come first.
    func insert(_ position: Int) {
        guard position >= 0 else { return }
        counts.withLock { $0[position, default: 0] &+= 1 }
    }

    /// Takes `count` references away from inode `inode` (a `forget`);
    /// the inode is no longer recorded once none is left.
    func forget(inode: UInt64, count: UInt64) {
        guard inode >= 1, inode <= UInt64(Int.max) else { return }
        let position = Int(inode - 1)
        counts.withLock { counts in
            guard let held = counts[position] else { return }
            if held > count { counts[position] = held - count } else { counts[position] = nil }
        }
    }

    /// The recorded positions, ascending (parents before their children:
    /// the index is in breadth-first order). They stay recorded: the
    /// kernel keeps the inodes until it forgets them.
    var positions: [Int] {
        counts.withLock { Array($0.keys) }.sorted()
    }
}
