import EncFSCore
import Synchronization

/// The unit files of a ``CiphertextCache`` kept open between reads, a few
/// at a time, least recently used closed first.
///
/// Why: the kernel keeps its read-ahead state per open file. A unit file
/// opened afresh for every read looked like a random reader to it, so a
/// warm sequential read went to disk in small synchronous pieces (5–6× as
/// many requests as a local bundle file; docs/PERFORMANCE.md); kept open,
/// the kernel sees a sequential reader and reads ahead. It also saves the
/// `open`, `fstat` and `close` of every read.
///
/// Entries are keyed by unit and by the cache's generation of that unit
/// (when it was stored), so a descriptor of a file that was since
/// discarded and stored again is never used for the new one, without
/// sharing a lock with the cache's table.
///
/// A read of a unit already open is served from here alone
/// (``file(holding:)``), without the cache's table and its lock: with
/// sixteen workers on two CPUs, a worker preempted while holding that lock
/// made the others wait on every warm read (docs/PERFORMANCE.md, remote
/// bundles). The cache removes a unit from here before it deletes its file.
final class OpenUnitFiles: Sendable {
    private struct Slot {
        var unit: UInt64
        /// The unit's length in bytes.
        var length: Int
        var generation: UInt64
        var file: FileDescriptor
        var lastUse: UInt64
    }

    private struct State {
        var slots: [Slot] = []
        var clock: UInt64 = 0
    }

    /// Most files kept open.
    let capacity: Int
    private let state: Mutex<State>

    init(capacity: Int) {
        self.capacity = max(1, capacity)
        var initial = State()
        initial.slots.reserveCapacity(self.capacity)
        state = Mutex(initial)
    }

    /// The open file of `unit` as stored at `generation`, or nil.
    ///
    /// The caller holds the returned reference while it reads: a file
    /// closed by ``remove(_:)`` meanwhile stays open until then.
    func file(of unit: UInt64, generation: UInt64) -> FileDescriptor? {
        state.withLock { state in
            guard let at = state.slots.firstIndex(where: { $0.unit == unit && $0.generation == generation }) else { return nil }
            state.clock += 1
            state.slots[at].lastUse = state.clock
            return state.slots[at].file
        }
    }

    /// The open file of the unit that holds `offset`, with the bytes the
    /// unit holds, or nil when none is open.
    ///
    /// The caller holds the returned reference while it reads, as with
    /// ``file(of:generation:)``.
    func file(holding offset: UInt64) -> (FileDescriptor, Range<UInt64>)? {
        state.withLock { state in
            guard let at = state.slots.firstIndex(where: { $0.unit <= offset && offset - $0.unit < UInt64($0.length) }) else {
                return nil
            }
            state.clock += 1
            state.slots[at].lastUse = state.clock
            let slot = state.slots[at]
            return (slot.file, slot.unit..<(slot.unit + UInt64(slot.length)))
        }
    }

    /// Keeps `file` open as `unit`'s (`length` bytes) at `generation`,
    /// closing the least recently used file when full.
    ///
    /// - Returns: the file to read: `file`, or the one another reader kept
    ///   first; and the unit whose file was closed to make room, if any.
    func keep(_ file: FileDescriptor, of unit: UInt64, length: Int, generation: UInt64) -> (file: FileDescriptor, closed: UInt64?) {
        // A replaced file is returned out of the lock and closed (once no
        // reader holds it) after.
        let (kept, _, closed) = state.withLock { state -> (FileDescriptor, FileDescriptor?, UInt64?) in
            state.clock += 1
            let slot = Slot(unit: unit, length: length, generation: generation, file: file, lastUse: state.clock)
            if let at = state.slots.firstIndex(where: { $0.unit == unit }) {
                if state.slots[at].generation == generation {
                    state.slots[at].lastUse = state.clock
                    return (state.slots[at].file, nil, nil)
                }
                defer { state.slots[at] = slot }
                return (file, state.slots[at].file, nil)
            }
            guard state.slots.count == capacity,
                  let oldest = state.slots.indices.min(by: { state.slots[$0].lastUse < state.slots[$1].lastUse }) else {
                state.slots.append(slot)
                return (file, nil, nil)
            }
            defer { state.slots[oldest] = slot }
            return (file, state.slots[oldest].file, state.slots[oldest].unit)
        }
        return (kept, closed)
    }

    /// The units open now: the most recently used ones, whose uses the
    /// cache's table does not see (``file(holding:)``).
    func openUnits() -> [UInt64] {
        state.withLock { state in state.slots.map(\.unit) }
    }

    /// Closes the files of units that hold any of `bytes`, once no reader
    /// holds them.
    func remove(overlapping bytes: Range<UInt64>) {
        // Returned out of the lock, closed (when no reader holds them) after.
        _ = state.withLock { state -> [Slot] in
            let dropped = state.slots.filter { bytes.overlaps($0.unit..<($0.unit + UInt64($0.length))) }
            state.slots.removeAll { bytes.overlaps($0.unit..<($0.unit + UInt64($0.length))) }
            return dropped
        }
    }

    /// Closes `unit`'s file (it was evicted or discarded), once no reader
    /// holds it.
    func remove(_ unit: UInt64) {
        // Returned out of the lock, closed (when no reader holds it) after.
        _ = state.withLock { state -> FileDescriptor? in
            guard let at = state.slots.firstIndex(where: { $0.unit == unit }) else { return nil }
            return state.slots.remove(at: at).file
        }
    }
}
