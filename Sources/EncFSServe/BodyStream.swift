import CryptCore
import EncFSCore
import EncFSService

/// One response body, decrypted as libmicrohttpd asks for it, each call
/// filling the response's send block (``HTTPEndpoint/blockSize``): from
/// slots the ``ReadAhead`` threads decrypted ahead when the body spans
/// more than one slot and a set of slots is free, else straight from the
/// reader on the sending thread. Memory does not grow with the file.
///
/// A chunk that fails authentication after the headers went out ends the
/// response with an error: libmicrohttpd closes the connection short of
/// `Content-Length`, the client sees a truncated body, never a wrong
/// byte, and the log names inode and chunk as the mount does. A range
/// decrypted ahead keeps its failure until the sender reaches it, so the
/// bytes before the damaged chunk still go out.
///
/// A lock wipes it (``wipe()``, registered with the bundle unless the
/// protection is `unless-open`): the slots are wiped, the reader and the
/// file key go, and the next fill ends the response short.
/// `@unchecked Sendable`: `reader` and `key` change only in ``wipe()``,
/// which runs holding the bundle's gate for writing, while every fill
/// holds it for reading; the read-ahead threads, which do not take the
/// gate, use them only while a slot is `filling`, and ``wipe()`` waits
/// for those to finish (and lets no new one start) before it drops them.
final class BodyStream: WipedAtLock, @unchecked Sendable {
    private let bundle: LockableBundle
    private var reader: BundleReader?
    private let entry: IndexEntry
    private var key: SymmetricKey?
    private let start: UInt64
    private let length: UInt64
    private let log: ServeLog
    private let readAhead: ReadAhead?

    /// What a slot holds; every field below is guarded by the read-ahead
    /// lock.
    enum SlotState {
        /// Nothing wanted (past the end, or the body ended).
        case empty
        /// Its range waits for a thread (or the sender).
        case queued
        /// A thread decrypts its range.
        case filling
        /// Its range is decrypted: this many bytes.
        case ready(Int)
        /// Its range did not decrypt.
        case failed(any Error)
    }

    private var set: UnsafeMutableRawBufferPointer?
    private var slots: [SlotState] = []
    /// The range each slot holds or will hold (range r: body bytes
    /// r × slotBytes ..< (r + 1) × slotBytes).
    private var slotRanges: [Int] = []
    private var triedSet = false
    private var ended = false

    init(bundle: LockableBundle, reader: BundleReader, entry: IndexEntry, key: SymmetricKey, start: UInt64, length: UInt64,
         log: ServeLog, readAhead: ReadAhead?) {
        self.bundle = bundle
        self.reader = reader
        self.entry = entry
        self.key = key
        self.start = start
        self.length = length
        self.log = log
        // One slot's body gains nothing from another thread.
        self.readAhead = length > UInt64(ReadAhead.slotBytes) ? readAhead : nil
    }

    /// Fills `buffer` with the body from `position` (relative to the
    /// body's start).
    ///
    /// - Returns: the bytes written; -1 at the end; -2 (the response is
    ///   aborted) on any error.
    func fill(from position: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        bundle.withGate { _ in fillHoldingGate(from: position, into: buffer) }
    }

    private func fillHoldingGate(from position: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard position < length else { return -1 }
        guard let reader, let key else {
            log.log("info", "inode \(entry.position + 1): the server locked, response aborted")
            return -2
        }
        // Sending a body is use, as a mount's reads are (`--idle-lock`).
        bundle.activity.touch()
        let count = Int(min(UInt64(buffer.count), length - position))
        let wanted = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count])
        if let readAhead, let copied = fillAhead(from: position, into: wanted, pool: readAhead) {
            return copied
        }
        do {
            let n = try reader.read(entry, key: key, fromOffset: start + position, into: wanted)
            guard n > 0 else { return endedEarly() }
            return n
        } catch {
            return failed(error)
        }
    }

    /// Copies from the slot holding `position`, starting the read-ahead
    /// at the first call; nil when this body has no set (none was free)
    /// or was asked out of order: read it directly then.
    private func fillAhead(from position: UInt64, into buffer: UnsafeMutableRawBufferPointer, pool: ReadAhead) -> Int? {
        let slotBytes = UInt64(ReadAhead.slotBytes)
        let range = Int(position / slotBytes)
        let slot = range % ReadAhead.slotsPerBody
        pool.lock()
        if !triedSet {
            triedSet = true
            begin(pool)
        }
        guard let set, slotRanges[slot] == range else {
            pool.unlock()
            return nil
        }
        var ready = -1
        while ready < 0 {
            switch slots[slot] {
            case .queued:
                // Nobody started it: faster to decrypt it here than to wait.
                slots[slot] = .filling
                pool.unlock()
                let outcome = decrypt(range: range, intoSlot: slot)
                pool.lock()
                finishFilling(slot, with: outcome)
                pool.slotDone()
            case .filling:
                pool.waitForSlot()
            case .ready(let n):
                ready = n
            case .failed(let error):
                pool.unlock()
                return failed(error)
            case .empty:
                pool.unlock()
                return nil
            }
        }
        pool.unlock()
        // The slot is the sender's until it moves on: copied without the lock.
        let rangeStart = UInt64(range) * slotBytes
        let offset = Int(position - rangeStart)
        guard ready > offset else { return endedEarly() }
        let count = min(buffer.count, ready - offset)
        let slotBase = slot * ReadAhead.slotBytes
        buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: set[(slotBase + offset)..<(slotBase + offset + count)]))
        if offset + count == ready {
            // The range is sent: its slot takes the range slotsPerBody on.
            pool.lock()
            queue(range: range + ReadAhead.slotsPerBody, inSlot: slot, pool: pool)
            pool.unlock()
        }
        return count
    }

    /// Takes a set of slots and queues the first ranges. Lock held.
    private func begin(_ pool: ReadAhead) {
        guard let taken = pool.takeSet() else { return }
        set = taken
        slots = Array(repeating: .empty, count: ReadAhead.slotsPerBody)
        slotRanges = Array(repeating: -1, count: ReadAhead.slotsPerBody)
        for slot in 0..<ReadAhead.slotsPerBody {
            queue(range: slot, inSlot: slot, pool: pool)
        }
    }

    /// Queues `range` into `slot`, or empties the slot past the end. Lock held.
    private func queue(range: Int, inSlot slot: Int, pool: ReadAhead) {
        slotRanges[slot] = range
        guard !ended, UInt64(range) * UInt64(ReadAhead.slotBytes) < length else {
            slots[slot] = .empty
            return
        }
        slots[slot] = .queued
        pool.queue(ReadAhead.Job(body: self, slot: slot, range: range))
    }

    /// Whether a thread may decrypt `range` into `slot` (the job is not
    /// stale), marking it taken. Lock held.
    func startFilling(_ slot: Int, range: Int) -> Bool {
        guard !ended, slotRanges[slot] == range, case .queued = slots[slot] else { return false }
        slots[slot] = .filling
        return true
    }

    /// Records a decrypted (or failed) range. Lock held.
    func finishFilling(_ slot: Int, with outcome: SlotState) {
        slots[slot] = outcome
    }

    /// Decrypts `range` into `slot`; called without the lock by the one
    /// thread that marked the slot `filling`.
    func decrypt(range: Int, intoSlot slot: Int) -> SlotState {
        guard let set, let reader, let key else { return .empty }
        let rangeStart = UInt64(range) * UInt64(ReadAhead.slotBytes)
        let count = Int(min(UInt64(ReadAhead.slotBytes), length - rangeStart))
        let slotBase = slot * ReadAhead.slotBytes
        do {
            let n = try reader.read(entry, key: key, fromOffset: start + rangeStart,
                                    into: UnsafeMutableRawBufferPointer(rebasing: set[slotBase..<(slotBase + count)]))
            return .ready(n)
        } catch {
            return .failed(error)
        }
    }

    /// At lock (holding the gate for writing): the slots wiped, the
    /// reader and key dropped.
    func wipe() {
        releaseSlots()
        reader = nil
        key = nil
    }

    /// Called when libmicrohttpd is done with the body: the lock need no
    /// longer wipe it, and its slots go back to the pool.
    func finish() {
        bundle.unregister(self)
        releaseSlots()
    }

    /// Ends the read-ahead: waits for the ranges being decrypted, wipes
    /// the set and gives it back; no range is decrypted after.
    private func releaseSlots() {
        guard let pool = readAhead else { return }
        pool.lock()
        ended = true
        while slots.contains(where: { if case .filling = $0 { return true } else { return false } }) {
            pool.waitForSlot()
        }
        let taken = set
        set = nil
        for slot in slots.indices { slots[slot] = .empty }
        pool.unlock()
        guard let taken else { return }
        SecureBytes.wipe(taken)
        pool.lock()
        pool.giveBack(taken)
        pool.unlock()
    }

    private func endedEarly() -> Int {
        log.log("error", "inode \(entry.position + 1) ended early, response aborted")
        return -2
    }

    private func failed(_ error: any Error) -> Int {
        Self.logFailure(error, entry: entry, log: log, outcome: "response aborted")
        return -2
    }

    /// The log line for a body that cannot be sent: inode and chunk for a
    /// damaged chunk, as the mount names them.
    static func logFailure(_ error: any Error, entry: IndexEntry, log: ServeLog, outcome: String) {
        if case BundleError.corruptChunk(let position, let chunk) = error {
            log.log("error", "chunk \(chunk) of inode \(position + 1) failed authentication, \(outcome)")
        } else {
            log.log("error", "read of inode \(entry.position + 1) failed: \((error as? BundleError)?.message ?? "\(error)"), \(outcome)")
        }
    }
}
