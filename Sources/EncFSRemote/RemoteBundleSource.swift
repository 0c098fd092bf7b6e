import EncFSCore
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A remote bundle as the reader sees it: the HTTP source below, the
/// header and (with `--prefetch index` or `all`) the sealed index held in
/// memory, and everything else fetched in fetch units through the
/// ciphertext cache, with read-ahead for sequential reads.
///
/// A unit fills a cell of a grid of whole chunks, as many as fit in
/// ``RemoteOptions/fetchSize``, on the chunk boundaries of the read that
/// needs it (``payloadCell(holding:anchor:)``; the reader asks for whole
/// sealed chunks), cut where a unit already stored or being fetched begins
/// or ends: a read's chunks are never split between two requests, units
/// never overlap, and none is longer than the fetch size (unless a chunk
/// is). The head and the pinned index are never
/// fetched twice.
///
/// A cold read is answered as soon as its own bytes have arrived: the unit
/// is fetched with up to three requests at once, the read's bytes on the
/// reader's thread, the bytes before and after them in the background,
/// and stored (whole, as one file) once all arrived.
///
/// A read waits for the network only for bytes the cache lacks; at most
/// ``RemoteOptions/maximumWaitingReads`` reads wait at once, so worker
/// threads stay free to serve what is cached.
package final class RemoteBundleSource: ByteSource {
    package let http: HTTPByteSource
    package var size: UInt64 { http.size }
    package var identity: ByteSourceIdentity { http.identity }
    package var displayName: [UInt8] { http.displayName }
    /// The header as read at open.
    package let header: BundleHeader

    private let cache: CiphertextCache?
    /// Bytes before this offset are the opening request's (``HTTPByteSource``).
    private let headEnd: UInt64
    /// Bytes from this offset on are held in ``pinned`` (`size` when not).
    private let pinnedStart: UInt64
    /// The sealed index in memory, fetched at its first read (never before
    /// the header is authenticated: see ``PinnedIndex``).
    private let pinned: PinnedIndex?
    private let unitSize: UInt64
    /// A sealed chunk's length, to end units on chunk boundaries; nil for a
    /// compressed bundle, whose sealed chunks differ in length (a unit then
    /// ends where the fetch size does, and the read that crosses its end
    /// fetches only what follows it: still one request).
    private let chunkStride: UInt64?
    /// Where the payload starts: the first file's first chunk, the anchor
    /// of units that no read started (read-ahead, `--prefetch all`).
    let payloadStart: UInt64
    /// Units being fetched (none overlaps another or a stored unit), and
    /// where units were dropped.
    private let inFlight = Mutex<Claims>(Claims())
    /// Where the sealed index starts: units there lie on a grid of
    /// ``unitSize`` from it, as the index has no chunks to align to, and
    /// is read in pieces (its tag first) that belong in one unit.
    let indexStart: UInt64
    /// Units whose last fetch failed, when and why.
    private let failures = Mutex<[Failure]>([])
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
    /// Where the unit read last starts.
    private let lastUnit = Atomic<UInt64>(UInt64.max)
    /// Where the unit that last started read-ahead starts.
    private let lastReadAhead = Atomic<UInt64>(UInt64.max)
    /// Where the stored units read into the page cache ahead of the
    /// sequential reader end (0 after a read that was not sequential):
    /// each is read ahead once, not again when it becomes the next unit.
    private let warmedUpTo = Atomic<UInt64>(0)
    /// Where the last read ended, to tell a sequential reader from random
    /// reads that happen to enter the next unit.
    private let lastEnd = Atomic<UInt64>(UInt64.max)
    /// How far a read may start from where the last one ended and still
    /// count as sequential: the worker threads answer a sequential
    /// reader's requests out of order, within the kernel's read-ahead
    /// window (1 MiB for a mount).
    static let sequentialWindow: UInt64 = 2 << 20
    /// Reads in a row that started near where the one before ended.
    private let nearStreak = Atomic<Int>(0)
    /// How many such reads in a row make a sequential reader: one alone
    /// is as likely a random read that landed near the last (1 in 16 of
    /// random reads of a 64 MiB file), and each such read started the
    /// read-ahead of two units, from the network or the disk
    /// (docs/PERFORMANCE.md, remote bundles).
    static let sequentialStreak = 2
    /// Read-ahead and the rest of a unit a read was answered from run here,
    /// units in parallel (each request still waits for one of the
    /// `--connections` connections): one unit at a time left cold
    /// sequential reads waiting on each round trip.
    private let background = DispatchQueue(label: "encfs.remote.readahead", attributes: .concurrent)
    /// `--prefetch all` walks the bundle here, one unit at a time.
    private let prefetching = DispatchQueue(label: "encfs.remote.prefetch")
    /// The payload's chunks read since opening (`encfs-ctl MNT access-log`).
    let accessed: AccessLog
    /// `--prefetch-list`: fetched first once the reader is open.
    let prefetchList: [PrefetchItem]?
    /// `--connections`: how many list ranges are fetched at once.
    let connectionCount: Int
    /// Units fetched ahead of a sequential reader.
    static let readAheadUnits = 2
    /// The least rest of a unit worth a request of its own after the
    /// bytes of the read that needs the unit: less arrives in about the
    /// time a request takes to start (the sealed index's tag, read on its
    /// own after the index, is not worth one).
    static let smallestRest = 64 << 10

    /// A unit being fetched; its group is left when it is stored (or not).
    private struct Flight {
        var range: Range<UInt64>
        var done: DispatchGroup
        /// The bytes handed to the reader that claimed it, before the rest
        /// arrived.
        var handedOut: Range<UInt64> = 0..<0
        /// The thread of that reader: only it can find those bytes
        /// corrupt (other readers get the unit from its file, once stored).
        /// Another reader that finds the same chunk corrupt read it from
        /// the file this unit replaces, before it was dropped: that must
        /// not keep these fresh bytes out of the cache.
        var handedTo: pthread_t = 0
        /// Some of ``handedOut`` failed authentication
        /// (``discardCopies(atOffset:count:)``): it is not stored.
        var discarded = false
    }

    private struct Claims {
        var flights: [Flight] = []
        /// Units dropped because bytes of them failed authentication: the
        /// next read inside one fetches it again from its start, so that
        /// bytes already read from it before are not lost to the cache.
        var holes: [Range<UInt64>] = []
        /// Most holes remembered.
        static let holeLimit = 64
    }

    private struct Failure {
        var range: Range<UInt64>
        var at: DispatchTime
        var error: RemoteError
    }

    /// Opens the bundle at `location`: one request for the head (size,
    /// ETag, header), then the cache directory of its bundle id. Unless
    /// `prefetch` is `none`, the sealed index is fetched whole at its first
    /// read (``PinnedIndex``), once the reader has authenticated the header.
    ///
    /// - Throws: `RemoteError` (network, cache), `BundleError` (header).
    package convenience init(location: RemoteLocation, options: RemoteOptions) throws {
        try self.init(http: try HTTPByteSource(location: location, options: options), options: options)
    }

    /// Opens a remote bundle over `http` (already opened, or handed over
    /// by the mount command), then the cache directory of its bundle id;
    /// nothing is fetched.
    ///
    /// - Throws: `RemoteError` (network, cache), `BundleError` (header).
    package init(http: HTTPByteSource, options: RemoteOptions) throws {
        self.http = http
        header = try BundleReader.readHeader(source: http).header
        guard header.bundleLength == http.size else {
            throw RemoteError.notThisBundle("the object has \(http.size) bytes, its header says \(header.bundleLength)")
        }
        headEnd = UInt64(min(HTTPByteSource.headRange, Int(clamping: http.size)))
        if options.prefetch != .none {
            let start = min(max(UInt64(header.headerLength) + header.indexOffset, headEnd), http.size)
            pinnedStart = start
            pinned = PinnedIndex(start: start, length: http.size - start, piece: max(options.fetchSize, PinnedIndex.smallestPiece))
        } else {
            pinnedStart = http.size
            pinned = nil
        }
        unitSize = UInt64(max(options.fetchSize, 4096))
        chunkStride = header.features.isCompressed ? nil : header.layout.sealedChunkSize
        payloadStart = UInt64(header.headerLength)
        indexStart = UInt64(header.headerLength) + header.indexOffset
        waitingSlots = DispatchSemaphore(value: max(1, options.maximumWaitingReads))
        accessed = AccessLog(payload: payloadStart..<max(payloadStart, indexStart), granule: chunkStride ?? unitSize)
        prefetchList = options.prefetchList
        connectionCount = options.connections
        if let root = options.cacheDirectory, options.cacheSize > 0 {
            let version = Array("\(http.size)\n".utf8) + (http.etag ?? [])
            cache = try CiphertextCache(root: root, bundleID: header.bundleID, version: version, limit: options.cacheSize,
                                        fetchable: headEnd..<max(headEnd, pinnedStart), cellSize: unitSize)
        } else {
            cache = nil
        }
        if options.prefetch == .all { prefetchEverything() }
    }

    /// Bytes the cache holds now.
    package var cachedBytes: UInt64 { cache?.totalBytes ?? 0 }

    package func read(into buffer: UnsafeMutableRawBufferPointer, atOffset offset: UInt64) throws -> Int {
        guard offset < size, buffer.count > 0 else { return 0 }
        let count = Int(min(UInt64(buffer.count), size - offset))
        if offset < indexStart, offset + UInt64(count) > payloadStart {
            accessed.record((max(offset, payloadStart) - payloadStart)..<(min(offset + UInt64(count), indexStart) - payloadStart))
        }
        // One deadline for the whole read, however many units it spans.
        let deadline = http.deadline()
        let previousEnd = lastEnd.exchange(offset + UInt64(count), ordering: .relaxed)
        let near = previousEnd != UInt64.max
            && max(offset, previousEnd) - min(offset, previousEnd) <= Self.sequentialWindow
        let sequential: Bool
        if near {
            sequential = nearStreak.wrappingAdd(1, ordering: .relaxed).newValue >= Self.sequentialStreak
        } else {
            nearStreak.store(0, ordering: .relaxed)
            // Loaded first: random reads leave the shared line alone.
            if warmedUpTo.load(ordering: .relaxed) != 0 { warmedUpTo.store(0, ordering: .relaxed) }
            sequential = false
        }
        var done = 0
        while done < count {
            let position = offset + UInt64(done)
            let target = UnsafeMutableRawBufferPointer(rebasing: buffer[done..<count])
            done += try readPiece(at: position, into: target, anchor: offset, sequential: sequential, deadline: deadline)
        }
        return count
    }

    /// Reads what `position` starts of `buffer`: from the head, the pinned
    /// index, or one unit.
    ///
    /// - Parameter anchor: where the read began: a chunk's start when the
    ///   reader reads chunks, from which a new unit's end is counted.
    /// - Returns: bytes read (at least 1).
    private func readPiece(at position: UInt64, into buffer: UnsafeMutableRawBufferPointer, anchor: UInt64, sequential: Bool,
                           deadline: DispatchTime) throws -> Int {
        if position < headEnd {
            let n = Int(min(UInt64(buffer.count), headEnd - position))
            return try http.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n]), atOffset: position)
        }
        if position >= pinnedStart, let pinned {
            let n = try pinned.read(at: position, into: buffer, over: http)
            guard n > 0 else { throw RemoteError.notThisBundle("the index ends early") }
            return n
        }
        let piece = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<Int(min(UInt64(buffer.count), pinnedStart - position))])
        guard let cache else {
            try waitingForNetwork(until: deadline) { () throws(RemoteError) in
                try http.fetch(offset: position, count: piece.count, into: piece, deadline: deadline)
            }
            return piece.count
        }
        if let hit = cache.read(at: position, into: piece) {
            noteRead(of: hit.unit, sequential: sequential)
            return hit.count
        }
        let hit = try fetchPiece(at: position, into: piece, anchor: anchor, cache: cache, deadline: deadline)
        noteRead(of: hit.unit, sequential: sequential)
        return hit.count
    }

    /// Where a unit that starts at `start` ends: ``unitSize`` bytes on, cut
    /// to a chunk boundary counted from `anchor` (or extended to the first
    /// one, when a chunk is longer than a unit), never past the pinned
    /// index. The caller cuts it further at the next unit.
    private func plannedEnd(from start: UInt64, anchor: UInt64) -> UInt64 {
        var end = start + unitSize
        if let stride = chunkStride, anchor <= start {
            let chunks = (end - anchor) / stride
            end = anchor + chunks * stride
            if end <= start { end = anchor + (chunks + 1) * stride }
        }
        return min(end, pinnedStart)
    }

    /// The cell that holds `position` of a grid of units of whole chunks,
    /// on the chunk boundaries of the read that began at `anchor` (a
    /// chunk's start): as many chunks as fit in ``unitSize`` (at least
    /// one); cells of ``unitSize`` from ``payloadStart`` for a compressed
    /// bundle. A cold read fetches its cell (as far as no other unit holds
    /// it), so that random reads fill a cell with one unit.
    ///
    /// Why a grid: units that started at each cold read and ran to the next
    /// unit left gaps that each cost a round trip of their own (twice as
    /// many cold misses as cells for 200 random reads of a 64 MiB file;
    /// docs/PERFORMANCE.md, remote bundles).
    private func payloadCell(holding position: UInt64, anchor: UInt64) -> Range<UInt64> {
        var origin = payloadStart
        var span = unitSize
        if let stride = chunkStride, stride > 0 {
            origin = anchor % stride
            span = max(1, unitSize / stride) * stride
        }
        guard position >= origin else { return position..<(position + span) }
        let start = origin + (position - origin) / span * span
        return start..<(start + span)
    }

    /// Who fetches the bytes at an offset.
    private enum Claim {
        /// A stored unit holds them (or is being written: look again).
        case stored(Range<UInt64>)
        /// Another reader fetches the unit that holds them.
        case waitFor(Range<UInt64>, DispatchGroup)
        /// This reader fetches `range`; it calls ``release(_:_:)`` after.
        case owned(Range<UInt64>, DispatchGroup)
    }

    /// Makes this reader the one that fetches a unit that holds
    /// `position`, unless a unit already holds it: checked and registered
    /// under one lock, so that no two readers fetch the same bytes.
    ///
    /// The unit starts at `position`, or before it: at the start of its
    /// cell (``payloadCell(holding:anchor:)``, or the index's grid), or of a
    /// dropped unit (``Claims/holes``); never inside bytes held.
    ///
    /// Lock order: ``inFlight``, then the cache's.
    ///
    /// - Parameter within: bytes the unit must not leave (a start-up
    ///   list's range: ``prefetch(_:exactly:)``); nil: its cell.
    private func claim(at position: UInt64, anchor: UInt64, in cache: CiphertextCache, within: Range<UInt64>? = nil) -> Claim {
        inFlight.withLock { claims in
            if let flight = claims.flights.first(where: { $0.range.contains(position) }) { return .waitFor(flight.range, flight.done) }
            if case .stored(let range) = cache.coverage(at: position, before: position + 1) { return .stored(range) }
            var start: UInt64
            var end: UInt64
            if position >= indexStart {
                start = max(headEnd, indexStart + (position - indexStart) / unitSize * unitSize)
                end = 0
            } else {
                let cell = payloadCell(holding: position, anchor: anchor)
                start = max(headEnd, cell.lowerBound)
                end = min(cell.upperBound, pinnedStart)
            }
            if let hole = claims.holes.first(where: { $0.contains(position) }) { start = min(start, max(hole.lowerBound, headEnd)) }
            // From a dropped unit's start in the cell before: still no
            // longer than a unit, so that the cache's bound holds.
            if end > start, end - start > unitSize { end = plannedEnd(from: start, anchor: start) }
            if start < position {
                let before = start..<position
                start = max(start, cache.lastEnd(overlapping: before) ?? start)
                for flight in claims.flights where flight.range.overlaps(before) { start = max(start, flight.range.upperBound) }
            }
            if end <= position { end = plannedEnd(from: start, anchor: start < position ? start : anchor) }
            if end <= position {
                start = position
                end = plannedEnd(from: start, anchor: anchor)
            }
            if let within, within.contains(position) {
                // A list range is one request however the cells lie: a
                // coalesced one spans several files (``coalesced(_:)``
                // keeps it within a unit).
                start = max(start, within.lowerBound)
                end = min(within.upperBound, start + unitSize, pinnedStart)
            }
            for flight in claims.flights where flight.range.lowerBound > start && flight.range.lowerBound < end {
                end = flight.range.lowerBound
            }
            var gap = cache.coverage(at: start, before: end)
            if case .stored = gap, start < position {
                // Not expected (the bytes before `position` were checked
                // under this lock); then the unit starts at `position`.
                start = position
                end = plannedEnd(from: start, anchor: anchor)
                for flight in claims.flights where flight.range.lowerBound > start && flight.range.lowerBound < end {
                    end = flight.range.lowerBound
                }
                gap = cache.coverage(at: start, before: end)
            }
            guard case .gap(let until) = gap, until > position else { return .stored(position..<position) }
            end = until
            let unit = start..<end
            claims.holes.removeAll { $0.overlaps(unit) }
            let group = DispatchGroup()
            group.enter()
            claims.flights.append(Flight(range: unit, done: group))
            return .owned(unit, group)
        }
    }

    /// Ends a fetch that ``claim(at:anchor:in:)`` gave this reader; wakes
    /// its waiters.
    private func release(_ unit: Range<UInt64>, _ group: DispatchGroup) {
        inFlight.withLock { claims in claims.flights.removeAll { $0.range == unit } }
        group.leave()
    }

    /// Reads the bytes at `position`, which the cache lacked: waits for the
    /// unit another reader fetches, or fetches a new one.
    private func fetchPiece(at position: UInt64, into buffer: UnsafeMutableRawBufferPointer, anchor: UInt64,
                            cache: CiphertextCache, deadline: DispatchTime) throws -> CiphertextCache.Hit {
        var result = CiphertextCache.Hit(count: 0, unit: position..<position)
        try waitingForNetwork(until: deadline) { () throws(RemoteError) in
            while true {
                try failIfRecentlyFailed(position)
                switch claim(at: position, anchor: anchor, in: cache) {
                case .stored:
                    if let hit = cache.read(at: position, into: buffer) {
                        result = hit
                        return
                    }
                    // Being renamed into place, or dropped just now.
                    guard DispatchTime.now() < deadline else { throw .gaveUp(last: "the cache did not keep the bytes") }
                    usleep(1000)
                case .waitFor(_, let running):
                    guard running.wait(timeout: deadline) == .success else {
                        throw .gaveUp(last: "another read is still fetching the same bytes")
                    }
                    if let hit = cache.read(at: position, into: buffer) {
                        result = hit
                        return
                    }
                    // Not stored (a failure, or a cache too small for it): fetch it.
                case .owned(let unit, let group):
                    result = try fetchFirst(of: unit, group: group, at: position, into: buffer, cache: cache, deadline: deadline)
                    return
                }
            }
        }
        return result
    }

    /// Fetches `unit` (claimed by the caller) in up to three requests at
    /// once: the bytes `buffer` wants at `position` on this thread, the
    /// bytes before and after them in the background; copies the wanted
    /// bytes into `buffer` as soon as they arrived and returns. Whichever
    /// request finishes last stores the unit whole and releases it
    /// (``finishPiece(of:_:assembly:bytes:group:cache:)``). A piece before
    /// or after under ``smallestRest`` comes with the read's own request.
    private func fetchFirst(of unit: Range<UInt64>, group: DispatchGroup, at position: UInt64,
                            into buffer: UnsafeMutableRawBufferPointer, cache: CiphertextCache,
                            deadline: DispatchTime) throws(RemoteError) -> CiphertextCache.Hit {
        let bytes = UnitBuffer(count: Int(unit.count))
        let lead = Int(position - unit.lowerBound)
        let handed = min(buffer.count, bytes.count - lead)
        let first = lead > Self.smallestRest ? lead : 0
        let last = bytes.count - lead - handed > Self.smallestRest ? lead + handed : bytes.count
        let others = [0..<first, last..<bytes.count].filter { !$0.isEmpty }
        let assembly = UnitAssembly(pieces: 1 + others.count)
        for piece in others {
            background.async { [self] in
                var failure: RemoteError?
                do throws(RemoteError) {
                    try http.fetch(offset: unit.lowerBound + UInt64(piece.lowerBound), count: piece.count,
                                   into: bytes.slice(piece))
                } catch {
                    failure = error
                }
                finishPiece(of: unit, failure, assembly: assembly, bytes: bytes, group: group, cache: cache)
            }
        }
        do {
            try http.fetch(offset: unit.lowerBound + UInt64(first), count: last - first, into: bytes.slice(first..<last),
                           deadline: deadline)
        } catch {
            finishPiece(of: unit, error, assembly: assembly, bytes: bytes, group: group, cache: cache)
            throw error
        }
        inFlight.withLock { claims in
            if let at = claims.flights.firstIndex(where: { $0.range == unit }) {
                claims.flights[at].handedOut = position..<(position + UInt64(handed))
                claims.flights[at].handedTo = pthread_self()
            }
        }
        UnsafeMutableRawBufferPointer(rebasing: buffer[0..<handed])
            .copyMemory(from: UnsafeRawBufferPointer(bytes.slice(lead..<(lead + handed))))
        finishPiece(of: unit, nil, assembly: assembly, bytes: bytes, group: group, cache: cache)
        return CiphertextCache.Hit(count: handed, unit: unit)
    }

    /// Records that one request of `unit` ended (`failure` nil: its bytes
    /// are in `bytes`); after the last one, stores the unit whole unless a
    /// piece failed or handed-out bytes failed authentication, and
    /// releases it. A failure is left to a reader that needs the unit.
    private func finishPiece(of unit: Range<UInt64>, _ failure: RemoteError?, assembly: UnitAssembly, bytes: UnitBuffer,
                             group: DispatchGroup, cache: CiphertextCache) {
        guard let outcome = assembly.finish(failure) else { return }
        defer { release(unit, group) }
        if case .failure(let error) = outcome {
            noteFailure(of: unit, error)
            return
        }
        clearFailure(of: unit)
        guard !inFlight.withLock({ $0.flights.contains { $0.range == unit && $0.discarded } }) else { return }
        cache.store(at: unit.lowerBound, bytes: UnsafeRawBufferPointer(bytes.slice(0..<bytes.count)))
    }

    /// Fetches `unit` (claimed by the caller) whole in one request, stores
    /// it and releases it: read-ahead and `--prefetch all`.
    private func fetchWhole(_ unit: Range<UInt64>, group: DispatchGroup, cache: CiphertextCache,
                            priority: ConnectionSlots.Priority = .read) {
        let bytes = UnitBuffer(count: Int(unit.count))
        var failure: RemoteError?
        do throws(RemoteError) {
            try http.fetch(offset: unit.lowerBound, count: bytes.count, into: bytes.slice(0..<bytes.count), priority: priority)
        } catch {
            failure = error
        }
        finishPiece(of: unit, failure, assembly: UnitAssembly(pieces: 1), bytes: bytes, group: group, cache: cache)
    }

    /// Records that fetching `unit` failed with `error`.
    private func noteFailure(of unit: Range<UInt64>, _ error: RemoteError) {
        let now = DispatchTime.now()
        failures.withLock { failures in
            failures.removeAll { $0.range.overlaps(unit) || now.uptimeNanoseconds - $0.at.uptimeNanoseconds >= Self.failFastNanoseconds }
            failures.append(Failure(range: unit, at: now, error: error))
        }
    }

    private func clearFailure(of unit: Range<UInt64>) {
        failures.withLock { failures in failures.removeAll { $0.range.overlaps(unit) } }
    }

    /// Throws the error of the last fetch of the unit that held `position`
    /// if it failed less than ``failFastNanoseconds`` ago.
    private func failIfRecentlyFailed(_ position: UInt64) throws(RemoteError) {
        let recent = failures.withLock { failures -> RemoteError? in
            guard let at = failures.firstIndex(where: { $0.range.contains(position) }) else { return nil }
            guard DispatchTime.now().uptimeNanoseconds - failures[at].at.uptimeNanoseconds < Self.failFastNanoseconds else {
                failures.remove(at: at)
                return nil
            }
            return failures[at].error
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

    /// Starts read-ahead when a `sequential` read enters a unit after the
    /// one read before it (random reads start none: each would cost two
    /// units of transfer, or of disk reads for cached units; and worker
    /// threads answering a reader out of order, back and forth across a
    /// unit's end, start it once).
    private func noteRead(of unit: Range<UInt64>, sequential: Bool) {
        let previous = lastUnit.exchange(unit.lowerBound, ordering: .relaxed)
        guard sequential, previous != UInt64.max, unit.lowerBound > previous, let cache,
              lastReadAhead.exchange(unit.lowerBound, ordering: .relaxed) != unit.lowerBound else { return }
        readAhead(after: unit.upperBound, cache: cache)
    }

    /// Makes sure the ``readAheadUnits`` units after `end` are coming:
    /// fetched in the background when not stored, or read from their
    /// files into the kernel's page cache when stored (each once while the
    /// reads stay sequential, ``warmedUpTo``).
    private func readAhead(after end: UInt64, cache: CiphertextCache) {
        var position = end
        for _ in 0..<Self.readAheadUnits where position < pinnedStart {
            let from = position
            defer { if position <= from { position = pinnedStart } }
            switch claim(at: position, anchor: position, in: cache) {
            case .stored(let unit):
                // The unit after the one being read was read ahead as the
                // second of the last call: only the new one is. Reading it
                // again cost a libdispatch thread's wake-up and a mapping
                // made and torn down, for pages already cached
                // (docs/PERFORMANCE.md, remote bundles).
                if unit.upperBound > warmedUpTo.load(ordering: .relaxed) {
                    warmedUpTo.store(unit.upperBound, ordering: .relaxed)
                    background.async { cache.readAhead(unitAt: unit.lowerBound) }
                }
                position = unit.upperBound
            case .waitFor(let unit, _):
                position = unit.upperBound
            case .owned(let unit, let group):
                background.async { [self] in fetchWhole(unit, group: group, cache: cache) }
                position = unit.upperBound
            }
        }
    }

    /// `--prefetch all`: every unit, in order, until the cache is full.
    private func prefetchEverything() { prefetch([headEnd..<pinnedStart]) }

    /// Fetches the units holding `ranges` into the cache in the background,
    /// until the cache is full: in order for one range (`--prefetch all`),
    /// else over as many requests at once as there are connections (a
    /// start-up list is many small files: one at a time, each would cost a
    /// round trip).
    ///
    /// - Parameter exactly: fetch only the bytes of `ranges` (a start-up
    ///   list: the chunks read, chunk-aligned), not the whole cells that
    ///   hold them, and the first unit of every range before the rest of
    ///   any: a list of small files scattered over the bundle otherwise
    ///   fetched a fetch unit per file, most of the bundle
    ///   (docs/PERFORMANCE.md, remote bundles), and a long file listed
    ///   early held back the first bytes of those after it. First units
    ///   close together in the bundle go in one request
    ///   (``coalesced(_:)``).
    func prefetch(_ ranges: [Range<UInt64>], exactly: Bool = false) {
        guard let cache else { return }
        let firsts = exactly ? ranges.map { $0.lowerBound..<min($0.upperBound, plannedEnd(from: $0.lowerBound, anchor: $0.lowerBound)) } : []
        let order = !exactly ? ranges
            : coalesced(firsts) + zip(ranges, firsts).compactMap { $1.upperBound < $0.upperBound ? $1.upperBound..<$0.upperBound : nil }
        let workers = max(1, min(connectionCount, order.count))
        prefetching.async { [self] in
            // One thread per connection (``PrefetchThread``), each taking
            // the next range in list order.
            let next = PrefetchCursor()
            let done = DispatchGroup()
            for _ in 0..<workers {
                done.enter()
                let work: @Sendable () -> Void = { [self] in
                    defer { done.leave() }
                    while let index = next.take(below: order.count) {
                        prefetch(order[index], cache: cache, within: exactly ? order[index] : nil)
                    }
                }
                if !PrefetchThread.start(work) { work() }
            }
            done.wait()
        }
    }

    /// Joins `ranges` that lie at most ``smallestRest`` apart in the bundle
    /// into one range no longer than a unit, fetched in one request: a
    /// start-up list names many small files packed side by side, and one
    /// request each cost a round trip each over the few connections
    /// (docs/PERFORMANCE.md, remote bundles). The bytes between them come
    /// along; they arrive in less time than a request takes to start.
    /// Joined ranges keep the list's order: by their earliest member.
    private func coalesced(_ ranges: [Range<UInt64>]) -> [Range<UInt64>] {
        var joined: [(range: Range<UInt64>, first: Int)] = []
        for (index, range) in ranges.enumerated().sorted(by: { $0.element.lowerBound < $1.element.lowerBound }) {
            if let last = joined.last, range.lowerBound <= last.range.upperBound + UInt64(Self.smallestRest),
               max(range.upperBound, last.range.upperBound) - last.range.lowerBound <= unitSize {
                joined[joined.count - 1] = (last.range.lowerBound..<max(range.upperBound, last.range.upperBound),
                                            min(last.first, index))
            } else {
                joined.append((range, index))
            }
        }
        return joined.sorted { $0.first < $1.first }.map(\.range)
    }

    private func prefetch(_ range: Range<UInt64>, cache: CiphertextCache, within: Range<UInt64>?) {
        var position = max(range.lowerBound, headEnd)
        while position < min(range.upperBound, pinnedStart) {
            guard cache.totalBytes + unitSize <= cache.limit, !http.replaced else { return }
            let from = position
            defer { if position <= from { position = range.upperBound } }
            switch claim(at: position, anchor: position == headEnd ? payloadStart : position, in: cache, within: within) {
            case .stored(let unit), .waitFor(let unit, _):
                position = unit.upperBound
            case .owned(let unit, let group):
                // Behind every read that waits for a connection: the
                // application's reads go first (``ConnectionSlots``).
                fetchWhole(unit, group: group, cache: cache, priority: .background)
                position = unit.upperBound
            }
        }
    }

    /// Drops the cached units that hold any of `count` bytes at `offset`,
    /// which failed authentication: the reader reads them once more, fresh
    /// from the server (without a cache, too: a body damaged on the way
    /// may arrive whole the second time); the pinned index too is fetched
    /// again at its next read. The head (fetched at open) is not.
    package func discardCopies(atOffset offset: UInt64, count: Int) -> Bool {
        guard count > 0 else { return false }
        if let pinned, offset + UInt64(count) > pinnedStart {
            pinned.discard()
            if offset >= pinnedStart { return true }
        }
        guard offset < pinnedStart, offset + UInt64(count) > headEnd else { return false }
        let bytes = max(offset, headEnd)..<min(offset + UInt64(count), pinnedStart)
        // A unit whose first bytes were handed to this thread while the
        // rest arrives.
        let thread = pthread_self()
        inFlight.withLock { claims in
            for at in claims.flights.indices
            where claims.flights[at].handedOut.overlaps(bytes) && pthread_equal(claims.flights[at].handedTo, thread) != 0 {
                claims.flights[at].discarded = true
            }
        }
        guard let dropped = cache?.discard(overlapping: bytes), !dropped.isEmpty else { return true }
        inFlight.withLock { claims in
            claims.holes.append(contentsOf: dropped)
            claims.holes.removeFirst(max(0, claims.holes.count - Claims.holeLimit))
        }
        return true
    }
}

extension RemoteBundleSource: StatusReportingSource {
    /// `sources=N`, then for each source `source.I.address` (as shown:
    /// no query string), `.state`, `.bytes`, `.errors`, `.last_error`.
    package var statusFields: [(String, String)] {
        let sources = http.sourceStatus
        var fields = [("sources", String(sources.count))]
        for (index, source) in sources.enumerated() {
            func line(_ text: String) -> String { String(text.map { $0 == "\n" ? "?" : $0 }) }
            fields += [("source.\(index).address", line(String(decoding: source.address, as: UTF8.self))),
                       ("source.\(index).state", source.state),
                       ("source.\(index).bytes", String(source.bytes)),
                       ("source.\(index).errors", String(source.errors)),
                       ("source.\(index).last_error", line(source.lastError ?? ""))]
        }
        return fields
    }
}

/// The next range of a start-up list to fetch, shared by its workers.
private final class PrefetchCursor: Sendable {
    private let next = Atomic<Int>(0)

    /// The next index, or nil once `count` were taken.
    func take(below count: Int) -> Int? {
        let index = next.wrappingAdd(1, ordering: .relaxed).oldValue
        return index < count ? index : nil
    }
}
