import CryptCore
import Synchronization

/// A paged index (format version 2) as a reader holds it: page 0 in
/// memory, every other page left sealed in the bundle and opened when it
/// is first used, into a bounded cache.
///
/// Opening reads and authenticates page 0 only; the root's page is loaded
/// by the first lookup. Each time a page is loaded it is authenticated
/// (its own AES-GCM tag, bound to its number and the page count), inflated
/// into a buffer of exactly the length page 0 gives, and, for a record
/// page, checked (``RecordPage/validate(_:page:positions:rules:)``) before
/// anything in it is used. A damaged page therefore surfaces as
/// `BundleError.corruptIndex` at its first use (EIO on a mount), never as
/// other data; `encfs-inspect verify` loads every page.
final class PagedIndexStore: Sendable {
    let directory: IndexDirectory
    private let cache: Mutex<PagedIndexCache>

    private init(directory: IndexDirectory, cache: PagedIndexCache) {
        self.directory = directory
        self.cache = Mutex(cache)
    }

    /// Reads and authenticates page 0.
    ///
    /// - Parameters:
    ///   - source: the bundle's bytes (kept: pages are read on demand).
    ///   - start: file offset of the index region.
    ///   - length: the index region's length.
    ///   - headLength: page 0's sealed length (from the header).
    ///   - baseAAD: the index associated data (`IndexBuilder.associatedData`).
    ///   - cacheBytes: memory for pages, in bytes: the decrypted pages kept and
    ///     the two buffers of the page being loaded (at least four pages are kept).
    /// - Throws: `BundleError.corruptIndex`, `.io`, `.crypto`.
    static func open(source: any ByteSource, start: UInt64, length: UInt64, headLength: UInt32, key: SymmetricKey,
                     baseAAD: [UInt8], layout: ChunkLayout, dataLength: UInt64, features: BundleFeatures,
                     cacheBytes: Int) throws -> PagedIndexStore {
        guard headLength > UInt32(AESGCM.tagByteCount), UInt64(headLength) <= length else {
            throw BundleError.corruptIndex("index page 0 has length \(headLength)")
        }
        let gcm: AESGCM
        do { gcm = try AESGCM() } catch { throw BundleError.crypto("index decryption failed") }
        var sealed = [UInt8](repeating: 0, count: Int(headLength))
        let got = try sealed.withUnsafeMutableBytes { try source.read(into: $0, atOffset: start) }
        guard got == sealed.count else { throw BundleError.corruptIndex("index page 0 is truncated") }
        let plain = try SecureBytes(count: sealed.count - AESGCM.tagByteCount) { (out: UnsafeMutableRawBufferPointer) throws in
            try sealed.withUnsafeBytes {
                try IndexPageSeal.open($0, page: 0, aad: IndexPageSeal.associatedData(base: baseAAD, page: 0, pageCount: nil),
                                       key: key, gcm: gcm, into: out)
            }
        }
        let directory = try plain.withUnsafeBytes { try IndexDirectory($0, remainingLength: length - UInt64(headLength)) }
        let rules = RecordPage.Rules(layout: layout, dataLength: dataLength, features: features, entryCount: directory.entryCount,
                                     tableStreamLength: directory.tableStreamLength, suspectSymlinks: directory.suspectSymlinks)
        // Every slot holds the largest page (64 KiB, or 16 KiB for a bundle
        // whose chunk tables are small: PagedIndexWriter.recordPageBytes).
        // The budget keeps two 64 KiB pages' worth for the buffers of the
        // page being loaded whatever the page size, so slots take the same
        // memory for small pages as for 64 KiB ones (the daemon's peak RSS
        // is gated in CI), four times as many of them.
        let pageBytes = (directory.largestPageLength + 4095) / 4096 * 4096
        let slots = max(4, min((cacheBytes - 2 * IndexDirectory.pageSize) / pageBytes, directory.pageCount - 1))
        let cache = try PagedIndexCache(source: source, pagesStart: start + UInt64(headLength), directory: directory,
                                        key: key, baseAAD: baseAAD, rules: rules, gcm: gcm, slotCount: slots,
                                        slotBytes: pageBytes)
        return PagedIndexStore(directory: directory, cache: cache)
    }

    /// Pages the cache can hold.
    var cachedPageLimit: Int { cache.withLock { $0.slotCount } }

    /// The pages in the cache now, ascending (tests and diagnostics).
    var cachedPages: [Int] { cache.withLock { $0.cachedPages } }

    /// Calls `body` with the record of entry `position` (under the
    /// cache's lock: `body` must not call back into the index).
    func withRecord<R>(at position: Int, _ body: (IndexRecord) throws -> R) throws -> R {
        let page = directory.recordPage(holding: position)
        let within = position - Int(directory.firstPositions[page - 1])
        return try cache.withLock { cache in
            try body(IndexRecord(in: try cache.page(page), at: within, from: RecordPage.headerSize))
        }
    }

    /// Calls `body` with `count` string bytes at `offset` of the page that
    /// holds entry `position` (a name or target its record gives, which
    /// the page's check bounded).
    func withStrings<R>(ofEntryAt position: Int, offset: Int, count: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        let page = directory.recordPage(holding: position)
        let records = directory.positions(ofRecordPage: page).count
        return try cache.withLock { cache in
            let bytes = try cache.page(page)
            let at = RecordPage.headerSize + records * IndexEntry.recordSize + offset
            // The page's check bounded every name and target of its records;
            // an entry read before the bundle file was replaced in place (by
            // whoever holds its key) may not fit the page read again.
            guard offset >= 0, count >= 0, at <= bytes.count - count else {
                throw BundleError.corruptIndex("index page \(page) changed after it was first read")
            }
            return try body(UnsafeRawBufferPointer(rebasing: bytes[at..<(at + count)]))
        }
    }

    /// Copies table stream bytes at `offset` into `buffer`, page by page.
    ///
    /// - Precondition: the range lies inside the table stream (a record
    ///   page's check bounds every table).
    func copyTableBytes(at offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws {
        precondition(offset <= directory.tableStreamLength && UInt64(buffer.count) <= directory.tableStreamLength - offset,
                     "internal error: chunk table bytes out of the table stream")
        try cache.withLock { cache in
            var done = 0
            while done < buffer.count {
                let (page, within) = directory.tablePage(holding: offset + UInt64(done))
                let bytes = try cache.page(page)
                let take = min(bytes.count - within, buffer.count - done)
                UnsafeMutableRawBufferPointer(rebasing: buffer[done..<(done + take)])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[within..<(within + take)]))
                done += take
            }
        }
    }

    /// How many of the entries `positions` are directories (a directory's
    /// st_nlink), one lock per page.
    func countDirectories(in positions: Range<Int>) throws -> Int {
        var count = 0
        var position = positions.lowerBound
        while position < positions.upperBound {
            let page = directory.recordPage(holding: position)
            let pagePositions = directory.positions(ofRecordPage: page)
            let end = min(positions.upperBound, pagePositions.upperBound)
            count += try cache.withLock { cache in
                let bytes = try cache.page(page)
                var n = 0
                for p in position..<end
                    where IndexRecord(in: bytes, at: p - pagePositions.lowerBound, from: RecordPage.headerSize).kind == .directory {
                    n += 1
                }
                return n
            }
            position = end
        }
        return count
    }
}

/// The opened pages of a paged index: used only under
/// `PagedIndexStore`'s lock. Eviction is CLOCK (second chance), as for a
/// flat index (`IndexPages`). Slots are one allocation, each slot locked
/// when it is first filled (so opening costs no page faults and memory
/// grows with the pages used), and wiped before it is freed.
/// `@unchecked Sendable`: touched only inside the mutex.
private final class PagedIndexCache: @unchecked Sendable {
    var slotCount: Int { clock.slotCount }
    /// Bytes of one slot: the largest page, rounded up to whole memory pages.
    private let slotBytes: Int
    private let slots: UnsafeMutableRawBufferPointer
    /// Per slot: nil until first filled, then whether `mlock` took.
    private var slotLocked: [Bool?]
    private var clock: PageSlotClock
    /// Sealed bytes of the page being loaded (not secret).
    private let sealed: UnsafeMutableRawBufferPointer
    /// The decrypted zstd frame of the page being loaded; wiped after each load.
    private let frame: UnsafeMutableRawBufferPointer
    private let frameLocked: Bool
    private let gcm: AESGCM
    private let decompressor: ChunkDecompressor
    private let source: any ByteSource
    private let pagesStart: UInt64
    private let directory: IndexDirectory
    private let key: SymmetricKey
    private let baseAAD: [UInt8]
    private let rules: RecordPage.Rules

    init(source: any ByteSource, pagesStart: UInt64, directory: IndexDirectory, key: SymmetricKey, baseAAD: [UInt8],
         rules: RecordPage.Rules, gcm: AESGCM, slotCount: Int, slotBytes: Int) throws {
        decompressor = try ChunkDecompressor()
        clock = PageSlotClock(slotCount: slotCount, pageCount: directory.pageCount)
        self.slotBytes = slotBytes
        slots = .allocate(byteCount: slotCount * slotBytes, alignment: 4096)
        slotLocked = Array(repeating: nil, count: slotCount)
        // A page's stored frame is never longer than its plaintext, and
        // its sealed bytes that plus the tag (page 0 checked both).
        frame = .allocate(byteCount: slotBytes, alignment: 4096)
        frame.initializeMemory(as: UInt8.self, repeating: 0)
        frameLocked = SecureMemory.lock(frame)
        sealed = .allocate(byteCount: slotBytes + AESGCM.tagByteCount, alignment: 4096)
        self.gcm = gcm
        self.source = source
        self.pagesStart = pagesStart
        self.directory = directory
        self.key = key
        self.baseAAD = baseAAD
        self.rules = rules
    }

    deinit {
        for (slot, locked) in slotLocked.enumerated() {
            if let locked { SecureMemory.release(bytes(ofSlot: slot), locked: locked) }
        }
        SecureMemory.release(frame, locked: frameLocked)
        slots.deallocate()
        frame.deallocate()
        sealed.deallocate()
    }

    var cachedPages: [Int] { clock.cachedPages }

    /// All of slot `slot`'s bytes.
    private func bytes(ofSlot slot: Int) -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(rebasing: slots[(slot * slotBytes)..<((slot + 1) * slotBytes)])
    }

    /// The plaintext of `page` (1 … N−1), loaded on a miss.
    func page(_ page: Int) throws -> UnsafeRawBufferPointer {
        let length = Int(directory.plainLengths[page - 1])
        let slot: Int
        if let cached = clock.slot(holding: page) {
            slot = cached
        } else {
            slot = clock.victim()
            try load(page, into: slot, length: length)
        }
        clock.touch(slot)
        let base = slot * slotBytes
        return UnsafeRawBufferPointer(rebasing: slots[base..<(base + length)])
    }

    /// Reads, authenticates, inflates and (record pages) checks `page`.
    private func load(_ page: Int, into slot: Int, length: Int) throws {
        let sealedLength = Int(directory.sealedLengths[page - 1])
        let storedLength = sealedLength - AESGCM.tagByteCount
        let input = UnsafeMutableRawBufferPointer(rebasing: sealed[0..<sealedLength])
        let got = try source.read(into: input, atOffset: pagesStart + directory.pageOffsets[page - 1])
        guard got == sealedLength else { throw BundleError.corruptIndex("index page \(page) is truncated") }
        if slotLocked[slot] == nil { slotLocked[slot] = SecureMemory.lock(bytes(ofSlot: slot)) }
        let base = slot * slotBytes
        let target = UnsafeMutableRawBufferPointer(rebasing: slots[base..<(base + length)])
        let aad = IndexPageSeal.associatedData(base: baseAAD, page: page, pageCount: directory.pageCount)
        do {
            if storedLength == length {
                try IndexPageSeal.open(UnsafeRawBufferPointer(input), page: page, aad: aad, key: key, gcm: gcm, into: target)
            } else {
                let stored = UnsafeMutableRawBufferPointer(rebasing: frame[0..<storedLength])
                defer { SecureBytes.wipe(stored) }
                try IndexPageSeal.open(UnsafeRawBufferPointer(input), page: page, aad: aad, key: key, gcm: gcm, into: stored)
                guard decompressor.decompress(UnsafeRawBufferPointer(stored), into: target) else {
                    throw BundleError.corruptIndex("index page \(page) does not inflate to its length")
                }
            }
            if page <= directory.recordPageCount {
                try RecordPage.validate(UnsafeRawBufferPointer(target), page: page, positions: directory.positions(ofRecordPage: page),
                                        rules: rules)
            }
        } catch {
            SecureBytes.wipe(target)
            throw error
        }
        clock.place(page, in: slot)
    }
}
