import EncFSCore
import Dispatch
import Synchronization

/// A remote bundle as the reader sees it: the HTTP source below, the
/// header and (with `--prefetch index` or `all`) the sealed index held in
/// memory, and everything else fetched in fetch units through the
/// ciphertext cache, with read-ahead for sequential reads.
///
/// Units are ``RemoteOptions/fetchSize`` bytes of the bundle at multiples
/// of it, clipped to what is not held in memory (the head and the index
/// are never fetched twice). A read waits for the network only for units
/// the cache lacks; at most ``RemoteOptions/maximumWaitingReads`` reads
/// wait at once, so worker threads stay free to serve what is cached.
public final class RemoteBundleSource: ByteSource {
    public let http: HTTPByteSource
    public var size: UInt64 { http.size }
    public var identity: ByteSourceIdentity { http.identity }
    public var displayName: [UInt8] { http.displayName }
    /// The header as read at open.
    public let header: BundleHeader

    private let cache: CiphertextCache?
    /// Bytes before this offset are the opening request's (``HTTPByteSource``).
    private let headEnd: UInt64
    /// Bytes from this offset on are held in ``pinned`` (`size` when not).
    private let pinnedStart: UInt64
    private let pinned: [UInt8]
    private let unitSize: UInt64
    private let inFlight = Mutex<[UInt64: DispatchGroup]>([:])
    /// Units whose last fetch failed, when and why.
    private let failures = Mutex<[UInt64: (at: DispatchTime, error: RemoteError)]>([:])
    /// How long a failed unit fails at once: the kernel asks again for the
    /// pages of a failed read-ahead right away, and the reader waiting
    /// for them must not wait a second deadline.
    static let failFastNanoseconds: UInt64 = 1_000_000_000
    /// Counts the reads that may still wait for the network
    /// (``RemoteOptions/maximumWaitingReads``).
    private let waitingSlots: DispatchSemaphore
    /// How long a read waits for one of those before it is refused: a
    /// busy server frees one within milliseconds, a stalled one not at
    /// all, and the workers must stay free for listings and cached data.
    static let waitingGrace: DispatchTimeInterval = .seconds(2)
    private let lastUnit = Atomic<UInt64>(UInt64.max)
    /// Where the last read ended, to tell a sequential reader from random
    /// reads that happen to enter the next unit.
    private let lastEnd = Atomic<UInt64>(UInt64.max)
    /// How far a read may start from where the last one ended and still
    /// count as sequential: the worker threads answer a sequential
    /// reader's requests out of order, within the kernel's read-ahead
    /// window (1 MiB for a mount).
    static let sequentialWindow: UInt64 = 2 << 20
    /// Read-ahead runs here, units in parallel (each request still waits
    /// for one of the `--connections` connections): one unit at a time
    /// left cold sequential reads waiting on each round trip.
    private let background = DispatchQueue(label: "encfs.remote.readahead", attributes: .concurrent)
    /// `--prefetch all` walks the bundle here, one unit at a time.
    private let prefetching = DispatchQueue(label: "encfs.remote.prefetch")
    /// Units fetched ahead of a sequential reader.
    static let readAheadUnits: UInt64 = 2

    /// Opens the bundle at `location`: one request for the head (size,
    /// ETag, header), one for the sealed index unless `prefetch` is
    /// `none`, then the cache directory of its bundle id.
    ///
    /// - Throws: `RemoteError` (network, cache), `BundleError` (header).
    public convenience init(location: RemoteLocation, options: RemoteOptions) throws {
        try self.init(http: try HTTPByteSource(location: location, options: options), options: options)
    }

    /// Opens a remote bundle over `http` (already opened, or handed over
    /// by the mount command): the index unless `prefetch` is `none`, then
    /// the cache directory of its bundle id.
    ///
    /// - Throws: `RemoteError` (network, cache), `BundleError` (header).
    public init(http: HTTPByteSource, options: RemoteOptions) throws {
        self.http = http
        header = try BundleReader.readHeader(source: http).header
        guard header.bundleLength == http.size else {
            throw RemoteError.notThisBundle("the object has \(http.size) bytes, its header says \(header.bundleLength)")
        }
        headEnd = UInt64(min(HTTPByteSource.headRange, Int(clamping: http.size)))
        if options.prefetch != .none {
            let start = max(UInt64(header.headerLength) + header.indexOffset, headEnd)
            var index = [UInt8](repeating: 0, count: Int(http.size - min(start, http.size)))
            if !index.isEmpty {
                try index.withUnsafeMutableBytes { try http.fetch(offset: start, count: $0.count, into: $0) }
            }
            pinnedStart = start
            pinned = index
        } else {
            pinnedStart = http.size
            pinned = []
        }
        unitSize = UInt64(max(options.fetchSize, 4096))
        waitingSlots = DispatchSemaphore(value: max(1, options.maximumWaitingReads))
        if let root = options.cacheDirectory, options.cacheSize > 0 {
            let version = Array("\(http.size)\n".utf8) + (http.etag ?? [])
            cache = try CiphertextCache(root: root, bundleID: header.bundleID, version: version, limit: options.cacheSize)
        } else {
            cache = nil
        }
        if options.prefetch == .all { prefetchEverything() }
    }

    /// Bytes the cache holds now.
    public var cachedBytes: UInt64 { cache?.totalBytes ?? 0 }

    public func read(fromAbsoluteOffset offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        guard offset < size, buffer.count > 0 else { return 0 }
        let count = Int(min(UInt64(buffer.count), size - offset))
        // One deadline for the whole read, however many units it spans.
        let deadline = http.deadline()
        let previousEnd = lastEnd.exchange(offset + UInt64(count), ordering: .relaxed)
        let sequential = previousEnd != UInt64.max
            && max(offset, previousEnd) - min(offset, previousEnd) <= Self.sequentialWindow
        var done = 0
        while done < count {
            let position = offset + UInt64(done)
            let target = UnsafeMutableRawBufferPointer(rebasing: buffer[done..<count])
            done += try readPiece(at: position, into: target, sequential: sequential, deadline: deadline)
        }
        return count
    }

    /// Reads what `position` starts of `buffer`: from the head, the pinned
    /// index, or one unit.
    ///
    /// - Returns: bytes read (at least 1).
    private func readPiece(at position: UInt64, into buffer: UnsafeMutableRawBufferPointer, sequential: Bool,
                           deadline: DispatchTime) throws -> Int {
        if position < headEnd {
            let n = Int(min(UInt64(buffer.count), headEnd - position))
            return try http.read(fromAbsoluteOffset: position, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n]))
        }
        if position >= pinnedStart {
            let start = Int(position - pinnedStart)
            let n = min(buffer.count, pinned.count - start)
            pinned.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[start..<(start + n)])) }
            return n
        }
        let unit = position / unitSize
        let range = unitRange(unit)
        let n = Int(min(UInt64(buffer.count), range.upperBound - position))
        let piece = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n])
        try readUnit(unit, range: range, at: Int(position - range.lowerBound), into: piece, deadline: deadline)
        noteRead(of: unit, sequential: sequential)
        return n
    }

    /// The bytes of unit `unit` that are fetched: its span clipped to
    /// between the head and the pinned index.
    private func unitRange(_ unit: UInt64) -> Range<UInt64> {
        let start = max(unit * unitSize, headEnd)
        let end = min((unit + 1) * unitSize, pinnedStart)
        return start..<max(start, end)
    }

    /// Copies from unit `unit`: from the cache, or fetched (once, however
    /// many readers want it) and stored.
    private func readUnit(_ unit: UInt64, range: Range<UInt64>, at offset: Int,
                          into buffer: UnsafeMutableRawBufferPointer, deadline: DispatchTime) throws {
        guard let cache else {
            try waitingForNetwork(until: deadline) { () throws(RemoteError) in
                try http.fetch(offset: range.lowerBound + UInt64(offset), count: buffer.count, into: buffer, deadline: deadline)
            }
            return
        }
        let length = Int(range.count)
        if cache.read(unit: unit, length: length, at: offset, into: buffer) { return }
        try waitingForNetwork(until: deadline) { () throws(RemoteError) in
            try failIfRecentlyFailed(unit)
            var fetching = claim(unit)
            if case .waitFor(let running) = fetching {
                // Another reader fetches it: wait for that, then look again.
                _ = running.wait(timeout: deadline)
                if cache.read(unit: unit, length: length, at: offset, into: buffer) { return }
                try failIfRecentlyFailed(unit)
                fetching = claim(unit)
            }
            guard case .owned(let group) = fetching else { throw .gaveUp(last: "another read is still fetching the same bytes") }
            defer { release(unit, group) }
            // Stored between the miss above and the claim.
            if cache.read(unit: unit, length: length, at: offset, into: buffer) { return }
            let bytes = try fetchUnit(unit, range: range, into: cache, deadline: deadline)
            bytes.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + buffer.count)])) }
        }
    }

    /// Who fetches a unit: this reader, or another one it waits for.
    private enum Claim {
        /// This reader fetches; it calls ``release(_:_:)`` after.
        case owned(DispatchGroup)
        case waitFor(DispatchGroup)
    }

    /// Makes this reader the one that fetches `unit`, unless another
    /// already is (checked and registered under one lock, so no two
    /// readers fetch the same unit).
    private func claim(_ unit: UInt64) -> Claim {
        inFlight.withLock { running in
            if let group = running[unit] { return .waitFor(group) }
            let group = DispatchGroup()
            group.enter()
            running[unit] = group
            return .owned(group)
        }
    }

    /// Ends a fetch that ``claim(_:)`` gave this reader; wakes its waiters.
    private func release(_ unit: UInt64, _ group: DispatchGroup) {
        inFlight.withLock { _ = $0.removeValue(forKey: unit) }
        group.leave()
    }

    /// Fetches unit `unit` (claimed by the caller) and stores it in `cache`.
    ///
    /// - Returns: its bytes.
    private func fetchUnit(_ unit: UInt64, range: Range<UInt64>, into cache: CiphertextCache,
                           deadline: DispatchTime? = nil) throws(RemoteError) -> [UInt8] {
        let out = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(range.count), alignment: 16)
        defer { out.deallocate() }
        do {
            try http.fetch(offset: range.lowerBound, count: out.count, into: out, deadline: deadline)
        } catch {
            failures.withLock { $0[unit] = (.now(), error) }
            throw error
        }
        failures.withLock { _ = $0.removeValue(forKey: unit) }
        cache.store(unit: unit, bytes: UnsafeRawBufferPointer(out))
        return Array(out)
    }

    /// Fetches `unit` in the background unless it is cached or already
    /// being fetched; failures are left to a reader that needs the unit.
    private func fetchAhead(_ unit: UInt64, into cache: CiphertextCache) {
        guard !cache.contains(unit), case .owned(let group) = claim(unit) else { return }
        defer { release(unit, group) }
        if !cache.contains(unit) { _ = try? fetchUnit(unit, range: unitRange(unit), into: cache) }
    }

    /// Throws the error of unit `unit`'s last fetch if it failed less than
    /// ``failFastNanoseconds`` ago.
    private func failIfRecentlyFailed(_ unit: UInt64) throws(RemoteError) {
        let recent = failures.withLock { failures -> RemoteError? in
            guard let failure = failures[unit] else { return nil }
            guard DispatchTime.now().uptimeNanoseconds - failure.at.uptimeNanoseconds < Self.failFastNanoseconds else {
                failures[unit] = nil
                return nil
            }
            return failure.error
        }
        if let recent { throw recent }
    }

    /// Runs `body` as one of at most ``RemoteOptions/maximumWaitingReads``
    /// reads waiting for the network, waiting ``waitingGrace`` (at most
    /// until `deadline`) for a turn.
    ///
    /// - Throws: ``RemoteError/busy`` when no turn came: the reads already
    ///   waiting are stuck on a stalled server.
    private func waitingForNetwork(until deadline: DispatchTime, _ body: () throws(RemoteError) -> Void) throws(RemoteError) {
        guard waitingSlots.wait(timeout: min(.now() + Self.waitingGrace, deadline)) == .success else { throw .busy }
        defer { waitingSlots.signal() }
        try body()
    }

    /// Starts read-ahead when a `sequential` read enters `unit` from the
    /// unit read before it (random reads that happen to land in the next
    /// unit start none: each would cost two units of transfer, or of disk
    /// reads for cached units).
    private func noteRead(of unit: UInt64, sequential: Bool) {
        let previous = lastUnit.exchange(unit, ordering: .relaxed)
        guard cache != nil, sequential, previous != unit, previous &+ 1 == unit else { return }
        for next in (unit + 1)...(unit + Self.readAheadUnits) { fetchInBackground(next) }
    }

    /// Queues unit `unit` for a background fetch unless it is being
    /// fetched or outside the units that are fetched; a cached unit is
    /// read ahead from its file instead (``CiphertextCache/readAhead(unit:length:)``).
    private func fetchInBackground(_ unit: UInt64) {
        let range = unitRange(unit)
        guard let cache, !range.isEmpty else { return }
        if cache.contains(unit) {
            background.async { cache.readAhead(unit: unit, length: Int(range.count)) }
        } else {
            background.async { [self] in fetchAhead(unit, into: cache) }
        }
    }

    /// `--prefetch all`: every unit, in order, until the cache is full.
    private func prefetchEverything() {
        guard let cache else { return }
        let units = (pinnedStart + unitSize - 1) / unitSize
        prefetching.async { [self] in
            for unit in 0..<units where !unitRange(unit).isEmpty {
                guard cache.totalBytes + unitSize <= cache.limit, !http.replaced else { return }
                fetchAhead(unit, into: cache)
            }
        }
    }

    /// Drops the cached units under `count` bytes at `offset` that failed
    /// authentication: the reader reads them once more, fresh from the
    /// server (without a cache, too: a body damaged on the way may arrive
    /// whole the second time). The head and the pinned index were
    /// fetched once at open and are not fetched again.
    public func discardCopies(fromAbsoluteOffset offset: UInt64, count: Int) -> Bool {
        guard count > 0, offset < pinnedStart, offset + UInt64(count) > headEnd else { return false }
        if let cache {
            let first = max(offset, headEnd) / unitSize
            let last = (min(offset + UInt64(count), pinnedStart) - 1) / unitSize
            for unit in first...last { cache.discard(unit) }
        }
        return true
    }
}
