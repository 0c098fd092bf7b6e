#if canImport(Glibc)
import Glibc
#endif

/// Where a directory listing stands, in the offsets `readdir` trades with
/// the kernel.
///
/// Every name in a listing has a position: 0 is ".", 1 is "..", 2 + k is
/// child k. The offset handed to the kernel with each name is the position
/// of the name after it, and the kernel passes the offset of the last name
/// it kept back with the next `readdir` (or from `telldir` / `seekdir`).
/// So the offset a call gets is the position to list from: 0 starts the
/// listing, and an offset at or past the end (the directory cannot have
/// grown; a program may seek anywhere) lists nothing. A negative offset
/// is refused: `init` returns nil and the caller answers EINVAL.
///
/// Pure arithmetic, no index access, so it is tested without a mount.
struct DirectoryCursor: Sendable, Equatable {
    /// What a position names.
    enum Slot: Sendable, Equatable {
        /// ".", the directory itself.
        case current
        /// "..", its parent (the root is its own parent).
        case parent
        /// Child `k` of the directory, 0-based, in index order.
        case child(Int)
    }

    /// One past the last position: 2 + the number of children.
    let end: Int
    /// The position of the next name to list; ``end`` when done.
    private(set) var position: Int

    /// A cursor at `offset` of a directory with `childCount` children.
    ///
    /// - Returns: nil for a negative offset or child count.
    init?(offset: off_t, childCount: Int) {
        guard offset >= 0, childCount >= 0 else { return nil }
        // An index holds far fewer than Int.max entries; clamp rather than
        // trap if that ever stopped being true.
        let (end, overflow) = childCount.addingReportingOverflow(2)
        self.end = overflow ? Int.max : end
        position = offset >= off_t(self.end) ? self.end : Int(offset)
    }

    /// What the current position names; nil at the end.
    var slot: Slot? {
        switch position {
        case end...: return nil
        case 0: return .current
        case 1: return .parent
        default: return .child(position - 2)
        }
    }

    /// The offset to hand the kernel with the current name: where listing
    /// resumes after it.
    var nextOffset: off_t { off_t(position) + 1 }

    /// Moves to the next name (stays at the end once there).
    mutating func advance() {
        if position < end { position += 1 }
    }
}
