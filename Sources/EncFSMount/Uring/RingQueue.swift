import CUring
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One FUSE ring queue: the kernel sends it the requests issued on CPU
/// `qid`. Its entries are served by two threads (``RingServer``), each
/// with an io_uring of its own:
/// - the **pinned** server runs on CPU `qid`, so that a request is served
///   on the CPU that issued it (no cross-CPU wake-up, the dearest part of
///   a small read on these machines); it registers every entry;
/// - the **helper** runs on any CPU but `qid` (when there is another), so
///   that what it takes over runs beside the reader and the pinned server,
///   not behind them.
///
/// Read-ahead sends several requests at once, all on the reader's CPU. A
/// server that gets two or more while the other idles hands every other
/// one over; whoever serves a request commits it on its own ring, as soon
/// as it is answered. The kernel copies a reply into the page cache inside
/// the committing thread's `io_uring_enter` (the largest cost of a large
/// read after the decryption), so both the decryption and that copy run
/// on two cores, and nobody waits for a batch.
///
/// An entry belongs to the ring of its last command: the kernel sends its
/// next request there. The kernel gives a request to the entry made
/// available last, so after a burst a lone request may land on the
/// helper's ring; the helper hands a request back to the pinned server
/// whenever that one idles, and its commit brings the entry home. Small
/// reads thus stay on the reader's CPU.
///
/// Which server owns an entry (the ring of its last command) and which
/// entries were handed over is kept here, behind one lock: a lock wipes
/// each entry from its owner's thread, the only one the kernel writes
/// that entry's buffers for (rings defer task work to their thread).
final class RingQueue: @unchecked Sendable {
    // @unchecked: `entries` and `servers` are set before the threads
    // start and never change; the book is behind its lock.
    let qid: Int
    let entries: [RingEntry]
    /// The pinned server (0) and the helper (1).
    private(set) var servers: [RingServer] = []
    /// Entries not yet ended by the kernel (unmount ends them all).
    private let alive: Atomic<Int>
    /// Set once the kernel handed over a first request: a failure before
    /// that means the registration was refused.
    let registered = Atomic<Bool>(false)
    /// Per entry: its owner, and whether it waits in that owner's inbox.
    private let book: Mutex<EntryBook>
    /// When the servers poll for the next request (`--poll-us`), nil
    /// when they never do: one policy for the queue, whose requests come
    /// from one CPU's readers.
    let pollingPolicy: PollingPolicy?
    /// Set while the queue's requests come one at a time (a lone reader):
    /// the helper, back from serving one, polls before it sleeps.
    let polling = Atomic<Bool>(false)
    /// Set when polling starts: the pinned server may hand the next small
    /// request to the helper even though it is not polling yet (it starts
    /// once it has served one).
    let helperInvited = Atomic<Bool>(false)

    static let pinned = 0
    static let helper = 1

    /// Maps the entries and opens both servers' rings; no thread yet.
    ///
    /// - Parameters:
    ///   - qid: the queue (the CPU whose requests it gets).
    ///   - depth: the entries of the queue.
    ///   - payloadBytes: each entry's payload buffer.
    ///   - pollMicroseconds: `--poll-us`, 0 for never.
    /// - Throws: `RingSetupError` when io_uring or memory refuses.
    init(qid: Int, depth: Int, payloadBytes: Int, pollMicroseconds: Int = 0) throws(RingSetupError) {
        self.qid = qid
        pollingPolicy = pollMicroseconds > 0 ? PollingPolicy(microseconds: pollMicroseconds) : nil
        var made: [RingEntry] = []
        for index in 0..<depth {
            guard let entry = RingEntry(index: index, payloadBytes: payloadBytes) else { throw RingSetupError.noMemory }
            made.append(entry)
        }
        entries = made
        alive = Atomic(depth)
        book = Mutex(EntryBook(depth: depth))
        servers = [try RingServer(queue: self, role: Self.pinned, payloadBytes: payloadBytes),
                   try RingServer(queue: self, role: Self.helper, payloadBytes: payloadBytes)]
    }

    /// The other server of the queue.
    func peer(of role: Int) -> RingServer { servers[1 - role] }

    /// Whether unmount (or a refused registration) ended every entry.
    var allEnded: Bool { alive.load(ordering: .acquiring) <= 0 }

    /// Counts an entry the kernel ended; the last one wakes both servers.
    func entryEnded() {
        if alive.subtract(1, ordering: .acquiringAndReleasing).newValue <= 0 {
            for server in servers { server.wake() }
        }
    }

    /// Notes that `role` submitted a command for entry `index` (its
    /// registration or commit): the kernel's next request for it goes to
    /// that server's ring.
    func own(_ index: Int, by role: Int) {
        book.withLock { $0.owner[index] = role }
    }

    /// Hands entry `index`, whose request has arrived, to the other server.
    func hand(_ index: Int, from role: Int) {
        book.withLock {
            $0.owner[index] = 1 - role
            $0.handed[index] = true
        }
        peer(of: role).wake()
    }

    /// Moves the entries handed to `role` into `ready` from `count` on.
    ///
    /// - Returns: the new count.
    func collectHanded(for role: Int, into ready: UnsafeMutableBufferPointer<Int>, from count: Int) -> Int {
        book.withLock { book in
            var count = count
            for index in 0..<book.handed.count where book.handed[index] && book.owner[index] == role && count < ready.count {
                book.handed[index] = false
                ready[count] = index
                count += 1
            }
            return count
        }
    }

    /// Wipes the read replies of the entries `role` owns, sparing the
    /// request part of those that hold a request not yet served.
    ///
    /// - Parameter hasArrived: whether an entry's request completion is
    ///   waiting on the owner's ring.
    func wipeReplies(ownedBy role: Int, hasArrived: (Int) -> Bool) {
        book.withLock { book in
            for entry in entries where book.owner[entry.index] == role {
                let pending = book.handed[entry.index] || hasArrived(entry.index)
                entry.wipeReplyPart(from: pending ? Int(entry.headers.pointee.ring_ent_in_out.payload_sz) : 0)
            }
        }
    }

    /// Requests the queue's servers answered since mount.
    var served: Int { servers.reduce(0) { $0 + $1.served.load(ordering: .relaxed) } }

    /// Requests the queue's servers found by polling since mount.
    var polledRequests: Int { servers.reduce(0) { $0 + $1.polledRequests.load(ordering: .relaxed) } }
}

/// Who owns each entry of a queue and what was handed over: two small
/// buffers allocated once (serving a request allocates nothing).
struct EntryBook: ~Copyable {
    let owner: UnsafeMutableBufferPointer<Int>
    let handed: UnsafeMutableBufferPointer<Bool>

    init(depth: Int) {
        owner = .allocate(capacity: depth)
        owner.initialize(repeating: RingQueue.pinned)
        handed = .allocate(capacity: depth)
        handed.initialize(repeating: false)
    }

    deinit {
        owner.deallocate()
        handed.deallocate()
    }
}

/// Why a ring could not be set up.
enum RingSetupError: Error {
    case noMemory
    case ioUring(errno: Int32)

    var message: String {
        switch self {
        case .noMemory: return "cannot map ring buffers"
        case .ioUring(let code): return "io_uring_setup: \(String(cString: strerror(code)))"
        }
    }
}
