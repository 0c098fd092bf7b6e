import CryptCore
import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// Decrypts large response bodies ahead of libmicrohttpd, on a few
/// threads shared by every response of the server.
///
/// Without it a body is decrypted on the thread that sends it, one block
/// after the other, and one download keeps one core busy while the other
/// idles. Here a body (``BodyStream``) borrows a set of
/// ``slotsPerBody`` slots of ``slotBytes`` each; while libmicrohttpd sends
/// from one slot, the threads decrypt the next ranges into the others.
/// The sending thread never waits for a range nobody has started: it
/// takes that one itself (a range a worker is decrypting it waits for,
/// which is at most one slot's work).
///
/// Memory is bounded twice: per body (one set, whatever the file size)
/// and per server (at most ``maximumSets`` sets, made once and reused; a
/// body that finds none is decrypted on the sending thread as before).
/// Nothing is allocated per range: jobs live in an array whose capacity is
/// reserved. A set is wiped when its body ends, so plaintext stays in it
/// only while a response is being sent.
///
/// One mutex guards the queue, the free sets and every body's slot
/// states; it is taken a few times per slot (128 KiB of plaintext), never
/// while decrypting or copying.
final class ReadAhead: @unchecked Sendable {
    /// Plaintext bytes of one slot: one job of a worker, and one block
    /// libmicrohttpd sends.
    static let slotBytes = 128 * 1024
    /// Slots per body: one being sent, the others being decrypted.
    static let slotsPerBody = 4
    /// Sets of slots the server makes at most (bodies read ahead at once).
    let maximumSets: Int

    /// One range of one body to decrypt into one of its slots.
    struct Job {
        let body: BodyStream
        let slot: Int
        let range: Int
    }

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    /// Signalled when a job is queued.
    private let jobQueued = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// Broadcast when a slot leaves the `filling` state.
    private let slotFinished = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    // Guarded by `mutex`:
    private var jobs: [Job] = []
    private var freeSets: [UnsafeMutableRawBufferPointer] = []
    private var setsMade = 0

    /// Starts the threads, which live as long as the process (the server
    /// ends by exiting).
    ///
    /// - Parameters:
    ///   - threads: decrypting threads (the cores).
    ///   - maximumSets: bodies read ahead at once.
    init(threads: Int, maximumSets: Int) {
        self.maximumSets = maximumSets
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(jobQueued, nil)
        pthread_cond_init(slotFinished, nil)
        // A body has at most slotsPerBody jobs queued, and stale ones (a
        // range the sender took itself) at most as many again.
        jobs.reserveCapacity(2 * maximumSets * Self.slotsPerBody)
        freeSets.reserveCapacity(maximumSets)
        for _ in 0..<max(1, threads) {
            var made = pthread_t()
            let rc = pthread_create(&made, nil, { raw in
                guard let raw else { return nil }
                Unmanaged<ReadAhead>.fromOpaque(raw).takeRetainedValue().work()
                return nil
            }, Unmanaged.passRetained(self).toOpaque())
            // Without threads every range is decrypted by its sender.
            if rc == 0 { pthread_detach(made) } else { Unmanaged.passUnretained(self).release() }
        }
    }

    /// The threads for this machine: one fewer than the cores (the
    /// sending thread decrypts too, taking ranges no thread has started;
    /// one more thread only competed with it for the cores).
    static func forThisMachine() -> ReadAhead {
        let cores = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        return ReadAhead(threads: max(1, cores - 1), maximumSets: 16)
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }

    /// Waits, holding the lock, until some slot finishes.
    func waitForSlot() { pthread_cond_wait(slotFinished, mutex) }

    /// A set of slots, or nil when ``maximumSets`` are in use. Lock held.
    func takeSet() -> UnsafeMutableRawBufferPointer? {
        if let set = freeSets.popLast() { return set }
        guard setsMade < maximumSets else { return nil }
        setsMade += 1
        let set = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.slotBytes * Self.slotsPerBody, alignment: 4096)
        set.initializeMemory(as: UInt8.self, repeating: 0)
        return set
    }

    /// Takes back a set, wiped by the caller. Lock held.
    func giveBack(_ set: UnsafeMutableRawBufferPointer) {
        freeSets.append(set)
    }

    /// Queues a job and wakes one thread. Lock held.
    func queue(_ job: Job) {
        jobs.append(job)
        pthread_cond_signal(jobQueued)
    }

    /// Wakes whoever waits for a slot. Lock held.
    func slotDone() { pthread_cond_broadcast(slotFinished) }

    /// A thread's loop: takes the oldest job still wanted, decrypts it
    /// without the lock, records the outcome.
    private func work() {
        lock()
        while true {
            while jobs.isEmpty { pthread_cond_wait(jobQueued, mutex) }
            let job = jobs.removeFirst()
            guard job.body.startFilling(job.slot, range: job.range) else { continue }
            unlock()
            let outcome = job.body.decrypt(range: job.range, intoSlot: job.slot)
            lock()
            job.body.finishFilling(job.slot, with: outcome)
            slotDone()
        }
    }
}
