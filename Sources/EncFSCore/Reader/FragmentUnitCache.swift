import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// The fragment units a reader opened lately, shared by every thread that
/// reads through it: a small file is a slice of a unit, so the files of one
/// directory, read one after another or by several readers at once, find
/// their unit opened already and cost a copy.
///
/// A cache per worker (``InflatedChunkCache``) did not do for units: the
/// kernel hands the reads of neighbouring small files to different
/// workers, each of which opened and inflated the same 256 KiB unit again
/// (four readers of `/usr/include` took 0.61 s in 256 KiB units against
/// 0.47 s in 64 KiB units; docs/PERFORMANCE.md, "Fragment units").
///
/// A unit is fetched into a fetch buffer the cache lends its filler, opened
/// there (a zstd frame in place) and inflated into its slot. Those buffers
/// live here rather than in each worker's workspace: a mount has a
/// workspace per worker thread, but only as many fetch buffers as units
/// were ever filled at once (one, for a single reader), each a sealed unit
/// long. They hold plaintext frames for a moment, so they are locked and
/// wiped like the slots.
///
/// A slot is filled by the one thread that claimed it, outside the lock;
/// threads wanting the same unit meanwhile wait for it rather than open it
/// again. A slot holds plaintext only after its unit authenticated and
/// opened whole; one that fails is wiped and left empty. The buffers are
/// locked, and wiped when the reader (which a lock drops) frees the cache.
/// The slots are allocated at the first claim (a reader that never reads a
/// small file, such as `verify`'s, never pays for them), a fetch buffer
/// when a claim finds none free; nothing else is allocated: the tables are
/// fixed buffers.
///
/// `@unchecked Sendable`: every field but the buffers is touched under
/// `mutex` only; a slot's buffer is written only by the thread that claimed
/// it (state `filling`) and read only under `mutex` once it is `ready`; a
/// fetch buffer is used only by the thread whose claim lent it.
final class FragmentUnitCache: @unchecked Sendable {
    /// What a slot holds: the unit `unit` of the fragment body stored at
    /// `bodyOffset` (two bodies share an offset only when they are the same).
    struct Tag: Equatable {
        var bodyOffset: UInt64
        var unit: UInt64
    }

    private enum State { case empty, filling, ready }

    /// What ``lookUp(_:copying:into:)`` did.
    enum Lookup {
        /// The unit was there: the bytes were copied.
        case copied
        /// The unit was not there: the caller owns this slot until
        /// ``finish(_:length:succeeded:)`` and fills it
        /// (``buffer(_:length:)``), fetching the unit into
        /// ``fetchBuffer(_:)``.
        case claimed(Int)
    }

    /// The memory the slots may take, whatever the unit size.
    static let budgetBytes = 2 << 20
    let slotCount: Int
    private let unitSize: Int
    /// The slots' memory, `unitSize` bytes a slot; empty until the first
    /// claim.
    private var buffers = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    private var buffersLocked = false
    private let tags: UnsafeMutableBufferPointer<Tag?>
    private let states: UnsafeMutableBufferPointer<State>
    private let lengths: UnsafeMutableBufferPointer<Int>
    /// When each slot was last used (``clock`` then); the least recent
    /// ready or empty slot is the next victim.
    private let lastUse: UnsafeMutableBufferPointer<UInt64>
    private var clock: UInt64 = 0
    /// Bytes of one fetch buffer: one sealed unit.
    private let fetchBytes: Int
    /// The fetch buffers made so far (the first `fetchBufferCount`), at
    /// most one per slot: every fill holds a slot.
    private let fetchBuffers: UnsafeMutableBufferPointer<UnsafeMutableRawBufferPointer>
    private let fetchBuffersLocked: UnsafeMutableBufferPointer<Bool>
    private var fetchBufferCount = 0
    /// The fetch buffers not lent: the first `freeFetchCount` entries.
    private let freeFetch: UnsafeMutableBufferPointer<Int>
    private var freeFetchCount = 0
    /// The fetch buffer lent to each slot being filled.
    private let fetchOfSlot: UnsafeMutableBufferPointer<Int>
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// Signalled whenever a slot stops filling.
    private let filled: UnsafeMutablePointer<pthread_cond_t>

    /// - Parameter unitSize: the bundle's fragment unit size in bytes.
    /// - Parameter sealedUnitSize: the bytes a unit may take stored (its
    ///   size and the tag): what a fetch buffer holds.
    init(unitSize: Int, sealedUnitSize: Int) {
        self.unitSize = unitSize
        fetchBytes = sealedUnitSize
        // At least four, so that four readers each keep the unit they are
        // walking; at most sixteen, more than the mount's workers.
        slotCount = max(4, min(16, Self.budgetBytes / max(unitSize, 1)))
        tags = .allocate(capacity: slotCount)
        tags.initialize(repeating: nil)
        states = .allocate(capacity: slotCount)
        states.initialize(repeating: .empty)
        lengths = .allocate(capacity: slotCount)
        lengths.initialize(repeating: 0)
        lastUse = .allocate(capacity: slotCount)
        lastUse.initialize(repeating: 0)
        fetchBuffers = .allocate(capacity: slotCount)
        fetchBuffers.initialize(repeating: UnsafeMutableRawBufferPointer(start: nil, count: 0))
        fetchBuffersLocked = .allocate(capacity: slotCount)
        fetchBuffersLocked.initialize(repeating: false)
        freeFetch = .allocate(capacity: slotCount)
        freeFetch.initialize(repeating: 0)
        fetchOfSlot = .allocate(capacity: slotCount)
        fetchOfSlot.initialize(repeating: -1)
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        filled = .allocate(capacity: 1)
        pthread_cond_init(filled, nil)
    }

    deinit {
        if buffers.baseAddress != nil {
            SecureMemory.release(buffers, locked: buffersLocked)
            buffers.deallocate()
        }
        for index in 0..<fetchBufferCount {
            SecureMemory.release(fetchBuffers[index], locked: fetchBuffersLocked[index])
            fetchBuffers[index].deallocate()
        }
        fetchBuffers.deallocate()
        fetchBuffersLocked.deallocate()
        freeFetch.deallocate()
        fetchOfSlot.deallocate()
        tags.deallocate()
        states.deallocate()
        lengths.deallocate()
        lastUse.deallocate()
        pthread_cond_destroy(filled)
        pthread_mutex_destroy(mutex)
        filled.deallocate()
        mutex.deallocate()
    }

    /// Copies the bytes `range` of unit `tag` into `destination` when a
    /// slot holds it (waiting while another thread fills it); otherwise
    /// claims a slot for the caller to fill, waiting while every slot is
    /// being filled.
    func lookUp(_ tag: Tag, copying range: Range<Int>, into destination: UnsafeMutableRawBufferPointer) -> Lookup {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while true {
            if let slot = slot(holding: tag) {
                guard states[slot] == .ready else {
                    pthread_cond_wait(filled, mutex)
                    continue
                }
                clock &+= 1
                lastUse[slot] = clock
                destination.copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer(slot, length: lengths[slot])[range]))
                return .copied
            }
            if buffers.baseAddress == nil { allocateSlots() }
            guard let victim = leastRecentlyUsedIdleSlot() else {
                pthread_cond_wait(filled, mutex)
                continue
            }
            tags[victim] = tag
            states[victim] = .filling
            lengths[victim] = 0
            fetchOfSlot[victim] = lendFetchBuffer()
            return .claimed(victim)
        }
    }

    /// The first `length` bytes of a slot the caller claimed.
    func buffer(_ slot: Int, length: Int) -> UnsafeMutableRawBufferPointer {
        precondition(length <= unitSize, "internal error: unit longer than the cache's slots")
        return UnsafeMutableRawBufferPointer(rebasing: buffers[(slot * unitSize)..<(slot * unitSize + length)])
    }

    /// How many fetch buffers were made: at most as many as fills ran at
    /// once.
    var fetchBuffersMade: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return fetchBufferCount
    }

    /// The fetch buffer lent with the claim of `slot` (one sealed unit
    /// long), the caller's until ``finish(_:length:succeeded:)``.
    func fetchBuffer(_ slot: Int) -> UnsafeMutableRawBufferPointer {
        fetchBuffers[fetchOfSlot[slot]]
    }

    /// Ends the caller's fill of `slot`: it then holds `length` bytes of
    /// plaintext, or, when the unit failed to open, nothing (wiped). Takes
    /// back the fetch buffer.
    func finish(_ slot: Int, length: Int, succeeded: Bool) {
        if !succeeded { SecureBytes.wipe(buffer(slot, length: unitSize)) }
        pthread_mutex_lock(mutex)
        freeFetch[freeFetchCount] = fetchOfSlot[slot]
        freeFetchCount += 1
        fetchOfSlot[slot] = -1
        if succeeded {
            states[slot] = .ready
            lengths[slot] = length
            clock &+= 1
            lastUse[slot] = clock
        } else {
            states[slot] = .empty
            tags[slot] = nil
        }
        pthread_cond_broadcast(filled)
        pthread_mutex_unlock(mutex)
    }

    /// Called under `mutex`, once.
    private func allocateSlots() {
        buffers = .allocate(byteCount: unitSize * slotCount, alignment: 4096)
        buffers.initializeMemory(as: UInt8.self, repeating: 0)
        buffersLocked = SecureMemory.lock(buffers)
    }

    /// A free fetch buffer, made when none is. Called under `mutex`.
    private func lendFetchBuffer() -> Int {
        if freeFetchCount > 0 {
            freeFetchCount -= 1
            return freeFetch[freeFetchCount]
        }
        // Lent buffers ≤ slots being filled ≤ slotCount.
        precondition(fetchBufferCount < slotCount, "internal error: more fetch buffers lent than slots")
        let index = fetchBufferCount
        fetchBuffers[index] = .allocate(byteCount: fetchBytes, alignment: 4096)
        fetchBuffers[index].initializeMemory(as: UInt8.self, repeating: 0)
        fetchBuffersLocked[index] = SecureMemory.lock(fetchBuffers[index])
        fetchBufferCount += 1
        return index
    }

    private func slot(holding tag: Tag) -> Int? {
        for slot in 0..<slotCount where tags[slot] == tag { return slot }
        return nil
    }

    private func leastRecentlyUsedIdleSlot() -> Int? {
        var victim: Int?
        for slot in 0..<slotCount where states[slot] != .filling {
            if states[slot] == .empty { return slot }
            if victim.map({ lastUse[slot] < lastUse[$0] }) ?? true { victim = slot }
        }
        return victim
    }
}
