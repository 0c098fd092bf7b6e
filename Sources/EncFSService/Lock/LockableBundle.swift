import EncFSCore
import CryptCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The unlocked bundle a mount serves, and the lock that takes it away.
///
/// Every request that needs a key or a name holds the gate (a read lock)
/// for as long as it uses the reader or its thread's scratch
/// (``withReader(_:)``); locking takes the gate for writing, so it waits
/// for the requests in flight, then drops the reader and wipes every
/// worker's scratch while no request can touch them. Dropping the last
/// reference to the reader wipes the content key, the derived keys, the
/// index page cache and its pooled workspaces (each is self-wiping
/// storage); the scratch holds the rest (file keys, decrypted chunks, the
/// last reply), wiped by its ``WipedAtLock/wipe()``; a server registers
/// each response body it is sending the same way.
///
/// The gate prefers writers, so a stream of reads cannot starve a lock; a
/// request therefore never takes it twice (a waiting writer would
/// deadlock it).
///
/// `@unchecked Sendable`: `reader` is guarded by the gate; the rest is
/// immutable or behind its own `Mutex` or atomic.
package final class LockableBundle: @unchecked Sendable {
    private let gate: UnsafeMutablePointer<pthread_rwlock_t>
    /// Guarded by `gate`; nil while locked.
    private var reader: BundleReader?
    /// Guarded by `gate`: how many times ``takeReader()`` ran, locked or
    /// not. An unlock that started before a lock must not undo it.
    private var locks = 0
    /// Where unlock re-reads the bundle from.
    package let source: any ByteSource
    /// How unlock opens it again (origin, symlinks, scrypt memory).
    package let options: OpenOptions
    package let indexCacheBytes: Int
    /// What holds keys or plaintext outside the reader (a mount's worker
    /// scratch, a server's response in progress), wiped at lock.
    private let scratches = Mutex<[ObjectIdentifier: any WipedAtLock]>([:])
    /// Inodes the kernel holds (until it forgets them), invalidated at
    /// every lock.
    package let seen = SeenInodes()
    /// When a request last read, opened, looked up or listed.
    package let activity = ActivityClock()
    /// Handles open now (files and directories), when opens are answered.
    package let openHandles = Atomic<Int>(0)
    /// Failed unlocks of the last minute.
    package let unlockAttempts = Mutex(UnlockRateLimit())
    /// Files that read on after a lock (`unless-open`).
    package let openFiles = OpenFileTable()

    /// - Parameters:
    ///   - reader: the opened bundle, or nil to start locked.
    ///   - source: the bundle's bytes (the reader's own source when given).
    package init(reader: BundleReader?, source: any ByteSource, options: OpenOptions, indexCacheBytes: Int) {
        self.reader = reader
        self.source = source
        self.options = options
        self.indexCacheBytes = indexCacheBytes
        gate = .allocate(capacity: 1)
        var attributes = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attributes)
        defer { pthread_rwlockattr_destroy(&attributes) }
        pthread_rwlockattr_setkind_np(&attributes, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
        pthread_rwlock_init(gate, &attributes)
    }

    deinit {
        pthread_rwlock_destroy(gate)
        gate.deallocate()
    }

    /// How many locks there have been so far: an unlock takes it when it
    /// is asked for, and a lock asked for after that wins over it
    /// (``unlock(with:unlessLockedSince:stillWanted:)``).
    package var lockCount: Int {
        pthread_rwlock_rdlock(gate)
        defer { pthread_rwlock_unlock(gate) }
        return locks
    }

    /// Whether the mount is locked now (for status; requests learn it from
    /// ``withReader(_:)``).
    package var isLocked: Bool {
        pthread_rwlock_rdlock(gate)
        defer { pthread_rwlock_unlock(gate) }
        return reader == nil
    }

    /// Runs `body` with the reader, holding the gate; nil without running
    /// it when locked.
    ///
    /// `body` must not call back into this bundle's gate (see the type).
    package func withReader<R>(_ body: (BundleReader) throws -> R) rethrows -> R? {
        try withGate { reader in try reader.map(body) }
    }

    /// Runs `body` holding the gate, with the reader or nil when locked
    /// (a locked request may still use its thread's scratch meanwhile).
    package func withGate<R>(_ body: (BundleReader?) throws -> R) rethrows -> R {
        pthread_rwlock_rdlock(gate)
        defer { pthread_rwlock_unlock(gate) }
        return try body(reader)
    }

    /// See ``readerWithinRequest``.
    fileprivate var unsafeReader: BundleReader? { reader }

    /// Registers `scratch` so that a lock wipes it, until
    /// ``unregister(_:)``.
    package func register(_ scratch: any WipedAtLock) {
        scratches.withLock { $0[ObjectIdentifier(scratch)] = scratch }
    }

    /// Forgets `scratch` (it wiped itself, or goes).
    package func unregister(_ scratch: any WipedAtLock) {
        _ = scratches.withLock { $0.removeValue(forKey: ObjectIdentifier(scratch)) }
    }

    /// Locks: waits for the requests in flight, takes the reader away and
    /// wipes every worker's scratch.
    ///
    /// - Returns: the reader taken away, for the caller to invalidate the
    ///   kernel's caches with (it needs the names) and then drop, which
    ///   wipes it; nil when already locked.
    package func takeReader() -> BundleReader? {
        pthread_rwlock_wrlock(gate)
        defer { pthread_rwlock_unlock(gate) }
        let taken = reader
        reader = nil
        locks += 1
        scratches.withLock { all in all.values.forEach { $0.wipe() } }
        return taken
    }

    /// What an unlock did.
    package enum UnlockOutcome: Equatable {
        case unlocked
        /// Nothing was tried.
        case alreadyUnlocked
        /// The key opened the bundle, but a lock came while it was tried:
        /// the lock wins, the reader is dropped (and wiped).
        case lockedMeanwhile
        /// The key opened the bundle, but `stillWanted` said no.
        case abandoned
    }

    /// Unlocks with `materials`: opens the bundle again from its source
    /// (the header is authenticated, the index read and checked, the
    /// origin checked, as at mount) and serves the new reader, unless a
    /// lock came after ``lockCount`` was `locksBefore` or `stillWanted`
    /// (asked last, holding the gate) says no.
    ///
    /// - Throws: what `BundleReader.open` throws (a wrong key is
    ///   `BundleError.wrongKey`).
    package func unlock(with materials: [KeyMaterial], unlessLockedSince locksBefore: Int,
                stillWanted: () -> Bool) throws -> UnlockOutcome {
        guard isLocked else { return .alreadyUnlocked }
        let opened = try BundleReader.open(source: source, materials: materials, indexCacheBytes: indexCacheBytes,
                                           options: options)
        pthread_rwlock_wrlock(gate)
        defer { pthread_rwlock_unlock(gate) }
        guard reader == nil else { return .alreadyUnlocked }
        guard locks == locksBefore else { return .lockedMeanwhile }
        guard stillWanted() else { return .abandoned }
        reader = opened
        return .unlocked
    }
}

extension LockableBundle {
    /// The reader, read without taking the gate: only for code that runs
    /// inside ``withReader(_:)`` on this thread (the failure policy naming
    /// an entry while answering a request), where the gate is already held
    /// and taking it again could deadlock behind a waiting lock.
    package var readerWithinRequest: BundleReader? { unsafeReader }
}

/// Something that holds keys or plaintext of the unlocked bundle outside
/// the reader, and wipes them when the bundle locks
/// (``LockableBundle/register(_:)``).
package protocol WipedAtLock: AnyObject, Sendable {
    /// Wipes what it holds; called at lock, holding the gate for writing,
    /// so that no request uses it meanwhile.
    func wipe()
}
