import CryptCore
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Compresses and seals a compressed bundle's chunks on every core, and
/// hands them to the sink in order.
///
/// zstd costs far more than AES-GCM, and one packing thread would leave
/// the other cores idle (mksquashfs uses them all). The packer thread reads
/// chunks into slots and submits them; each slot is compressed and sealed
/// on a dispatch worker with the slot's own codec and a compressor lent to
/// the job (``ChunkCompressionPool``), a few slots per job (``jobBytes``);
/// the packer takes finished slots back strictly in submission order,
/// appends their sealed bytes to the sink and records each in its body's
/// chunk table. Chunks of several files are in flight at once, so small files
/// are compressed in parallel too; a body's `first` is set when its first
/// chunk reaches the sink.
///
/// Jobs of several chunks, whose slots are signalled together at the end:
/// with a job per chunk the packer thread slept and woke for every 32 KiB
/// chunk (ten times mksquashfs's context switches, docs/PERFORMANCE.md);
/// now it wakes once a job.
///
/// Memory: per core, two jobs' worth of slots (at least four), each with a
/// plaintext buffer (wiped after each use and when freed) and a sealed one;
/// a compressor and a frame buffer per job in flight.
final class ChunkPipeline {
    /// One chunk in flight. `@unchecked Sendable`: the packer fills it
    /// before submitting and reads it only after `done` was signalled; the
    /// worker touches it in between.
    final class Slot: @unchecked Sendable {
        let plaintext: UnsafeMutableRawBufferPointer
        let sealed: UnsafeMutableRawBufferPointer
        let codec: ChunkCodec
        let done = DispatchSemaphore(value: 0)
        // Set by the packer before submitting.
        var body: FileBody?
        var key: SymmetricKey?
        var chunk: UInt64 = 0
        var last = false
        var length = 0
        // Set by the worker.
        var sealedLength = 0
        var encoding: StoredChunkEncoding = .raw
        var failed = false

        init(chunkSize: Int, bundleID: [UInt8]) throws {
            plaintext = .allocate(byteCount: chunkSize, alignment: 4096)
            plaintext.initializeMemory(as: UInt8.self, repeating: 0)
            sealed = .allocate(byteCount: chunkSize + AESGCM.tagByteCount, alignment: 4096)
            codec = try ChunkCodec(bundleID: bundleID, compressed: true)
        }

        deinit {
            SecureBytes.wipe(plaintext)
            plaintext.deallocate()
            sealed.deallocate()
        }

        /// Compresses (when that makes the chunk shorter) with the job's
        /// compressor and seals: runs on a worker, which then signals `done`.
        func work(with lease: ChunkCompressionPool.Lease) {
            let compressor = lease.compressor, frame = lease.frame
            let piece = UnsafeRawBufferPointer(rebasing: plaintext[0..<length])
            let compressed = compressor.compress(piece, into: UnsafeMutableRawBufferPointer(rebasing: frame[0..<(length - 1)]))
            let stored = compressed.map { UnsafeRawBufferPointer(rebasing: frame[0..<$0]) } ?? piece
            encoding = compressed == nil ? .raw : .zstd
            sealedLength = stored.count + AESGCM.tagByteCount
            do {
                guard let body, let key else { preconditionFailure("internal error: slot submitted without a body") }
                try body.fileID.withUnsafeBytes { id in
                    try codec.seal(key: key, fileID: id, chunk: chunk, last: last, encoding: encoding, plaintext: stored,
                                   into: UnsafeMutableRawBufferPointer(rebasing: sealed[0..<sealedLength]))
                }
            } catch {
                failed = true
            }
            SecureBytes.wipe(UnsafeMutableRawBufferPointer(rebasing: plaintext[0..<length]))
            SecureBytes.wipe(UnsafeMutableRawBufferPointer(rebasing: frame[0..<min(length, frame.count)]))
        }
    }

    private let slots: [Slot]
    private let compressions: ChunkCompressionPool
    /// Slots submitted and not yet taken back, oldest first, as indices into `slots`.
    private var inFlight: [Int] = []
    /// Slots submitted but not yet handed to a worker: the newest of
    /// `inFlight`, in order.
    private var pending: [Int] = []
    /// Slots free to fill.
    private var free: [Int]
    private let sink: ChunkSink
    private let workers = DispatchQueue(label: "encfs-pack.compress", attributes: .concurrent)
    /// Chunks one worker job compresses and seals, one after the other:
    /// about ``jobBytes`` of plaintext.
    private let chunksPerJob: Int
    /// Plaintext bytes of one job: four chunks of the compressed default
    /// (32 KiB), one of 128 KiB or more.
    static let jobBytes = 128 << 10

    /// - Parameters:
    ///   - chunkSize: the bundle's chunk size.
    ///   - level: the zstd level.
    ///   - bundleID: the bundle id (for the chunks' associated data).
    ///   - sink: where sealed chunks go, in order.
    init(chunkSize: Int, level: Int, bundleID: [UInt8], sink: ChunkSink) throws {
        // Enough jobs in flight to keep every core busy while the packer
        // reads the next ones and writes finished ones.
        chunksPerJob = max(1, Self.jobBytes / chunkSize)
        let count = max(4, 2 * chunksPerJob) * max(1, min(Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))), 16))
        slots = try (0..<count).map { _ in try Slot(chunkSize: chunkSize, bundleID: bundleID) }
        compressions = try ChunkCompressionPool(count: (count + chunksPerJob - 1) / chunksPerJob, chunkSize: chunkSize, level: level)
        free = Array(slots.indices.reversed())
        self.sink = sink
        inFlight.reserveCapacity(count)
        pending.reserveCapacity(chunksPerJob)
    }

    deinit {
        // Workers still running hold their slots: wait for them (pending
        // slots never reached a worker).
        for index in inFlight.dropLast(pending.count) { slots[index].done.wait() }
    }

    /// A slot to fill, taking finished ones back (in order) until one is free.
    func acquire() throws -> Slot {
        while free.isEmpty { try takeOldest() }
        return slots[free.removeLast()]
    }

    /// Gives back a slot taken by ``acquire()`` unused (its plaintext
    /// wiped).
    func giveBack(_ slot: Slot) {
        guard let index = slots.firstIndex(where: { $0 === slot }) else { preconditionFailure("internal error: foreign slot") }
        SecureBytes.wipe(slot.plaintext)
        free.append(index)
    }

    /// Starts compressing and sealing `slot`, whose plaintext holds
    /// `length` bytes of chunk `chunk` of `body`.
    func submit(_ slot: Slot, body: FileBody, key: SymmetricKey, chunk: UInt64, last: Bool, length: Int) {
        guard let index = slots.firstIndex(where: { $0 === slot }) else { preconditionFailure("internal error: foreign slot") }
        slot.body = body
        slot.key = key
        slot.chunk = chunk
        slot.last = last
        slot.length = length
        slot.failed = false
        inFlight.append(index)
        pending.append(index)
        if pending.count == chunksPerJob { startPending() }
    }

    /// Takes back every slot in flight.
    func finish() throws {
        while !inFlight.isEmpty { try takeOldest() }
    }

    /// Hands the pending slots to a worker as one job, which signals them
    /// all when the last is sealed.
    private func startPending() {
        guard !pending.isEmpty else { return }
        let job = pending.map { slots[$0] }
        pending.removeAll(keepingCapacity: true)
        let compressions = compressions
        workers.async {
            let lease = compressions.take()
            for slot in job { slot.work(with: lease) }
            compressions.giveBack(lease)
            for slot in job { slot.done.signal() }
        }
    }

    /// Waits for the oldest slot, appends its sealed chunk to the sink and
    /// records it in its body.
    private func takeOldest() throws {
        // Pending slots are the newest in flight: the oldest is one of
        // them only when all are.
        if inFlight.count == pending.count { startPending() }
        let index = inFlight.removeFirst()
        let slot = slots[index]
        slot.done.wait()
        free.append(index)
        guard let body = slot.body else { preconditionFailure("internal error: slot without a body") }
        slot.body = nil
        slot.key = nil
        guard !slot.failed else { throw BundleError.crypto("chunk encryption failed") }
        if slot.chunk == 0 { body.first = sink.dataLength }
        try sink.withSpace(slot.sealedLength) { space in
            space.copyMemory(from: UnsafeRawBufferPointer(rebasing: slot.sealed[0..<slot.sealedLength]))
        }
        body.record(sealedLength: UInt64(slot.sealedLength), encoding: slot.encoding)
    }
}
