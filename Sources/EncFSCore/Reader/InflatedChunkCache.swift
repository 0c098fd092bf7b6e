import CryptCore

/// The chunks of a compressed bundle that one worker opened last for a
/// read that wanted only part of them, kept whole so that the next read
/// inside the same chunk copies its bytes instead of fetching, opening and
/// inflating the chunk again.
///
/// A 4 KiB read of a 64 KiB chunk inflates 16 times the bytes it returns;
/// small reads that walk a chunk (a SQLite page at a time, `O_DIRECT`
/// readers, page faults of a mapping read at random) would inflate it once
/// per read without this. Uniformly random reads over a large file rarely
/// hit (docs/PERFORMANCE.md).
///
/// A slot is named by the body it came from: its file id and payload
/// offset (two files share both only when they share the body, so the same
/// bytes) and the chunk's index. A slot holds plaintext only after its
/// chunk authenticated and inflated to its full length; a chunk that fails
/// leaves the slot empty and wiped. The buffers are locked and wiped when
/// the cache is freed: the mount frees a worker's workspace, and with it
/// this cache, at lock. The buffers are allocated at the first fill: a
/// worker that only serves whole chunks or small files (fragment units,
/// cached by the reader) never pays for them. Not thread-safe: one per
/// workspace.
final class InflatedChunkCache {
    /// Slots per cache: two, so that two files read in turn by one worker
    /// both hit (the slot bookkeeping below is written for two).
    static let slotCount = 2

    /// What a slot holds.
    private struct Tag: Equatable {
        var fileID: IndexEntry.FileID
        var bodyOffset: UInt64
        var chunk: UInt64
    }

    /// The chunk buffers, one per slot, each a whole chunk long; empty
    /// until the first fill.
    private var buffers = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    private var buffersLocked = false
    private let chunkSize: Int
    /// Each slot's chunk and plaintext length; nil while empty.
    private var tags: (Tag?, Tag?) = (nil, nil)
    private var lengths: (Int, Int) = (0, 0)
    /// The slot the next miss fills: the one used less recently.
    private var victim = 0

    init(chunkSize: Int) {
        self.chunkSize = chunkSize
    }

    deinit {
        guard buffers.baseAddress != nil else { return }
        SecureMemory.release(buffers, locked: buffersLocked)
        buffers.deallocate()
    }

    /// Whether the slots' memory was allocated (by a fill).
    var isAllocated: Bool { buffers.baseAddress != nil }

    private func tag(_ slot: Int) -> Tag? { slot == 0 ? tags.0 : tags.1 }

    private func setTag(_ slot: Int, _ tag: Tag?, length: Int) {
        if slot == 0 { (tags.0, lengths.0) = (tag, length) } else { (tags.1, lengths.1) = (tag, length) }
    }

    private func buffer(_ slot: Int, length: Int) -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(rebasing: buffers[(slot * chunkSize)..<(slot * chunkSize + length)])
    }

    /// The plaintext of chunk `chunk` of `entry`'s body, when a slot holds
    /// it; marks that slot as used last.
    func cached(_ entry: IndexEntry, chunk: UInt64) -> UnsafeRawBufferPointer? {
        let wanted = Tag(fileID: entry.fileID, bodyOffset: entry.payloadOffset, chunk: chunk)
        for slot in 0..<Self.slotCount where tag(slot) == wanted {
            victim = 1 - slot
            return UnsafeRawBufferPointer(buffer(slot, length: slot == 0 ? lengths.0 : lengths.1))
        }
        return nil
    }

    /// Opens chunk `chunk` of `entry` into the slot used less recently:
    /// `open` fills the buffer it is given (exactly the chunk's plaintext
    /// length), and the slot names the chunk only if it returns.
    ///
    /// - Returns: the chunk's plaintext, valid until the next call.
    /// - Throws: what `open` throws; the slot is then wiped and empty.
    func fill(_ entry: IndexEntry, chunk: UInt64, length: Int,
              open: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows -> UnsafeRawBufferPointer {
        precondition(length <= chunkSize, "internal error: chunk longer than the cache's slots")
        if buffers.baseAddress == nil {
            buffers = .allocate(byteCount: chunkSize * Self.slotCount, alignment: 4096)
            buffers.initializeMemory(as: UInt8.self, repeating: 0)
            buffersLocked = SecureMemory.lock(buffers)
        }
        let slot = victim
        let target = buffer(slot, length: length)
        setTag(slot, nil, length: 0)
        do {
            try open(target)
        } catch {
            SecureBytes.wipe(target)
            throw error
        }
        setTag(slot, Tag(fileID: entry.fileID, bodyOffset: entry.payloadOffset, chunk: chunk), length: length)
        victim = 1 - slot
        return UnsafeRawBufferPointer(target)
    }
}
