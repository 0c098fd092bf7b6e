import CryptCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The index plaintext: either all of it in wiping memory, or left sealed
/// in the bundle and decrypted one page at a time into a bounded cache.
///
/// A mounted bundle uses the sealed form, so the daemon's memory does not
/// grow with the number of entries (the index plaintext grows with them,
/// see docs/PERFORMANCE.md; the cache holds 4 MiB by default).
///
/// How a page is trusted without its own tag (the format seals the index as
/// one AES-GCM message, see docs/FORMAT.md): at open the whole message is
/// decrypted and its tag checked (``sealed(source:start:length:tag:key:nonce:aad:cacheBytes:)``),
/// and a GMAC tag of each 16 KiB page of *ciphertext* is kept, under a
/// random key made for this index that never leaves the process (AES-GCM
/// with the page as associated data and nonce = page number; the tags are
/// never shown, so a forgery is a blind guess). When a page is read again
/// from the bundle its ciphertext must give the same tag, and only then is
/// it decrypted (AES-CTR from the page's own block, which is exactly GCM's
/// keystream: `AESCTR`). A bundle changed after the mount therefore gives a
/// "changed after the bundle was verified" error, never other plaintext.
/// GMAC runs at GHASH speed, several times SHA-256's here.
///
/// Invariant: every check of page N reuses the tag key and nonce N. That
/// nonce reuse is safe only because no tag ever leaves the process (never
/// logged, returned, compared anywhere an attacker can time, or stored):
/// whoever sees two tags under one nonce can recover the GHASH key and
/// forge pages. Never expose a page tag (docs/SECURITY.md).
package final class IndexPages: Sendable {
    /// Bytes per page: a multiple of 16 (AES blocks) and of nothing else in
    /// the layout, so records and names may straddle two pages.
    package static let pageSize = 16 << 10
    /// Default cache: 256 pages.
    package static let defaultCacheBytes = 4 << 20
    /// The smallest cache accepted (4 pages).
    package static let minimumCacheBytes = 4 * pageSize

    /// Plaintext length in bytes.
    let count: Int
    private let backing: Backing

    private enum Backing: Sendable {
        case resident(SecureBytes)
        case sealed(SealedPages)
    }

    /// The sealed form's page tags and cache, owned by one class so the
    /// enum can hold the (non-copyable) mutex.
    private final class SealedPages: Sendable {
        let tags: [UInt8]
        let cache: Mutex<PageCache>

        init(tags: [UInt8], cache: PageCache) {
            self.tags = tags
            self.cache = Mutex(cache)
        }
    }

    /// All of the plaintext in memory (tests, tools, the fuzzer).
    init(resident plaintext: SecureBytes) {
        count = plaintext.count
        backing = .resident(plaintext)
    }

    private init(count: Int, tags: [UInt8], cache: PageCache) {
        self.count = count
        backing = .sealed(SealedPages(tags: tags, cache: cache))
    }

    /// Whether the plaintext is read from the bundle page by page.
    var isPaged: Bool {
        if case .sealed = backing { return true }
        return false
    }

    /// Pages the cache can hold (0 when resident).
    var cachedPageLimit: Int {
        switch backing {
        case .resident: return 0
        case .sealed(let sealed): return sealed.cache.withLock { $0.slotCount }
        }
    }

    /// The pages in the cache now, ascending (for tests and diagnostics).
    var cachedPages: [Int] {
        switch backing {
        case .resident: return []
        case .sealed(let sealed): return sealed.cache.withLock { $0.cachedPages }
        }
    }

    /// Decrypts and authenticates a sealed index once, keeping per page the
    /// tag of its ciphertext, and as many decrypted pages as the cache
    /// holds.
    ///
    /// - Parameters:
    ///   - source: the bundle's bytes (kept: pages are read again on demand).
    ///   - start: file offset of the sealed index.
    ///   - length: plaintext length (the tag follows it).
    ///   - tag: the index's GCM tag.
    ///   - key, nonce, aad: how the index was sealed.
    ///   - cacheBytes: cache size, at least ``minimumCacheBytes``.
    ///   - hasher: when given, receives the ciphertext as it is read (for
    ///     a signature check, without a second pass over the index).
    /// - Throws: `BundleError.corruptIndex` when the tag fails or the file is
    ///   short, `.io`, `.crypto`.
    static func sealed(source: any ByteSource, start: UInt64, length: Int, tag: UnsafeRawBufferPointer,
                       key: SymmetricKey, nonce: [UInt8], aad: [UInt8], cacheBytes: Int,
                       hashing hasher: SHA256.Hasher? = nil) throws -> IndexPages {
        precondition(length >= 0 && cacheBytes >= minimumCacheBytes, "internal error: index pages \(length), cache \(cacheBytes)")
        let pageCount = (length + pageSize - 1) / pageSize
        let cache = try PageCache(source: source, start: start, length: length, key: key, nonce: nonce,
                                  slotCount: min(cacheBytes / pageSize, max(pageCount, 1)), pageCount: pageCount)
        var tags = [UInt8](repeating: 0, count: pageCount * PageCache.tagSize)
        let gcm: AESGCM
        do { gcm = try AESGCM() } catch { throw BundleError.crypto("index decryption failed") }
        // 1 MiB of ciphertext per pread; each page is hashed, then decrypted
        // into a free cache slot (or a scratch page once the cache is full).
        let batchBytes = 64 * pageSize
        let sealed = UnsafeMutableRawBufferPointer.allocate(byteCount: min(max(length, 1), batchBytes), alignment: 4096)
        defer { sealed.deallocate() }
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: pageSize, alignment: 4096)
        let scratchLocked = SecureMemory.lock(scratch)
        defer {
            SecureMemory.release(scratch, locked: scratchLocked)
            scratch.deallocate()
        }
        do {
            try nonce.withUnsafeBytes { n in
                try aad.withUnsafeBytes { a in
                    try gcm.open(key: key, nonce: n, aad: a, tag: tag) { decrypt in
                        var done = 0
                        while done < length {
                            let want = min(length - done, batchBytes)
                            let got = try source.read(into: UnsafeMutableRawBufferPointer(rebasing: sealed[0..<want]),
                                                      atOffset: start + UInt64(done))
                            guard got == want else { throw BundleError.corruptIndex("index is truncated") }
                            hasher?.update(UnsafeRawBufferPointer(rebasing: sealed[0..<want]))
                            var at = 0
                            while at < want {
                                let page = (done + at) / pageSize
                                let pageBytes = min(pageSize, want - at)
                                let ciphertext = UnsafeRawBufferPointer(rebasing: sealed[at..<(at + pageBytes)])
                                try tags.withUnsafeMutableBytes { t in
                                    try cache.tag(ofPage: page, ciphertext: ciphertext, into: UnsafeMutableRawBufferPointer(
                                        rebasing: t[(page * PageCache.tagSize)..<((page + 1) * PageCache.tagSize)]))
                                }
                                let target = cache.adoptFreeSlot(forPage: page, byteCount: pageBytes)
                                    ?? UnsafeMutableRawBufferPointer(rebasing: scratch[0..<pageBytes])
                                try decrypt(ciphertext, target)
                                at += pageBytes
                            }
                            done += want
                        }
                    }
                }
            }
        } catch CryptError.authenticationFailure {
            throw BundleError.corruptIndex("index failed authentication")
        } catch let error as BundleError {
            throw error
        } catch {
            throw BundleError.crypto("index decryption failed")
        }
        return IndexPages(count: length, tags: tags, cache: cache)
    }

    /// Calls `body` with the plaintext bytes `offset ..< offset + byteCount`.
    ///
    /// For a paged index `body` runs with the cache locked: it must not call
    /// back into this index. A range that straddles pages is assembled in a
    /// temporary buffer, wiped afterwards.
    ///
    /// - Throws: `BundleError.corruptIndex` when a page no longer matches
    ///   the bundle that was verified, `.io`, `.crypto`, or what `body` throws.
    func withBytes<R: Sendable>(at offset: Int, count byteCount: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        precondition(offset >= 0 && byteCount >= 0 && offset <= count - byteCount,
                     "internal error: index bytes \(offset)+\(byteCount) of \(count)")
        // Nothing to read (the root's empty name, possibly at the very end
        // of the index): no page is touched.
        if byteCount == 0 { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        switch backing {
        case .resident(let bytes):
            return try bytes.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + byteCount)])) }
        case .sealed(let sealed):
            let tags = sealed.tags
            return try sealed.cache.withLock { cache -> R in
                let page = offset / Self.pageSize
                let within = offset - page * Self.pageSize
                if within + byteCount <= Self.pageSize {
                    let bytes = try cache.page(page, tags: tags)
                    return try body(UnsafeRawBufferPointer(rebasing: bytes[within..<(within + byteCount)]))
                }
                return try withUnsafeTemporaryAllocation(byteCount: byteCount, alignment: 16) { joined -> R in
                    defer { SecureBytes.wipe(joined) }
                    try cache.copy(at: offset, into: joined, tags: tags)
                    return try body(UnsafeRawBufferPointer(joined))
                }
            }
        }
    }

    /// Copies the plaintext bytes at `offset` into `buffer` (any length up
    /// to the end of the index).
    ///
    /// - Throws: as ``withBytes(at:count:_:)``.
    func copyBytes(at offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws {
        precondition(offset >= 0 && offset <= count - buffer.count, "internal error: index bytes \(offset)+\(buffer.count) of \(count)")
        if buffer.isEmpty { return }
        switch backing {
        case .resident(let bytes):
            bytes.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<(offset + buffer.count)])) }
        case .sealed(let sealed):
            let tags = sealed.tags
            try sealed.cache.withLock { cache in try cache.copy(at: offset, into: buffer, tags: tags) }
        }
    }
}

/// The decrypted pages of a sealed index and what it takes to load more:
/// used only with `IndexPages`' lock held.
///
/// Eviction is CLOCK (second chance): cheap, and good for the scans the
/// index sees (validation, `find`, reading every file in tree order).
/// Slots are one locked allocation, wiped before it is freed.
/// `@unchecked Sendable`: its creator fills it before sharing it, and from
/// then on it is touched only inside `IndexPages`' mutex.
private final class PageCache: @unchecked Sendable {
    var slotCount: Int { clock.slotCount }
    private let slots: UnsafeMutableRawBufferPointer
    private let slotsLocked: Bool
    private var clock: PageSlotClock
    /// Slots handed out while the index was first decrypted.
    private var adopted = 0
    /// Ciphertext of the page being loaded (not secret).
    private let sealed: UnsafeMutableRawBufferPointer
    /// Bytes of one page tag.
    static let tagSize = AESGCM.tagByteCount
    /// The tag of the page being loaded.
    private let loadedTag = UnsafeMutableRawBufferPointer.allocate(byteCount: PageCache.tagSize, alignment: 16)
    /// Key of the page tags: random, made for this index, never stored.
    private let tagKey: SymmetricKey
    private let tagger: AESGCM
    private let ctr: AESCTR
    private let source: any ByteSource
    private let start: UInt64
    private let length: Int
    private let key: SymmetricKey
    private let nonce: [UInt8]

    init(source: any ByteSource, start: UInt64, length: Int, key: SymmetricKey, nonce: [UInt8],
         slotCount: Int, pageCount: Int) throws {
        do {
            ctr = try AESCTR()
            tagger = try AESGCM()
            tagKey = try SymmetricKey.random()
        } catch {
            throw BundleError.crypto("index decryption failed")
        }
        clock = PageSlotClock(slotCount: slotCount, pageCount: pageCount)
        slots = .allocate(byteCount: slotCount * IndexPages.pageSize, alignment: 4096)
        slots.initializeMemory(as: UInt8.self, repeating: 0)
        slotsLocked = SecureMemory.lock(slots)
        sealed = .allocate(byteCount: IndexPages.pageSize, alignment: 4096)
        self.source = source
        self.start = start
        self.length = length
        self.key = key
        self.nonce = nonce
    }

    deinit {
        SecureMemory.release(slots, locked: slotsLocked)
        slots.deallocate()
        sealed.deallocate()
        loadedTag.deallocate()
    }

    var cachedPages: [Int] { clock.cachedPages }

    /// Writes the GMAC tag of a page's ciphertext into `tag` (16 bytes):
    /// AES-GCM under ``tagKey`` with nonce = page number, the ciphertext as
    /// associated data and nothing to encrypt.
    func tag(ofPage page: Int, ciphertext: UnsafeRawBufferPointer, into tag: UnsafeMutableRawBufferPointer) throws {
        var nonce: (UInt64, UInt32) = (UInt64(page).littleEndian, 0)
        do {
            try withUnsafeBytes(of: &nonce) { n in
                try tagger.seal(key: tagKey, nonce: UnsafeRawBufferPointer(rebasing: n[0..<AESGCM.nonceByteCount]), aad: ciphertext,
                                plaintext: UnsafeRawBufferPointer(start: nil, count: 0),
                                into: UnsafeMutableRawBufferPointer(start: nil, count: 0), tag: tag)
            }
        } catch {
            throw BundleError.crypto("index page authentication failed")
        }
    }

    /// While the index is first decrypted: the next free slot, now holding
    /// `page` (its first `byteCount` bytes are about to be written), or nil
    /// when every slot is taken.
    func adoptFreeSlot(forPage page: Int, byteCount: Int) -> UnsafeMutableRawBufferPointer? {
        guard adopted < slotCount else { return nil }
        let slot = adopted
        adopted += 1
        clock.place(page, in: slot)
        return UnsafeMutableRawBufferPointer(rebasing: slots[(slot * IndexPages.pageSize)..<(slot * IndexPages.pageSize + byteCount)])
    }

    /// The plaintext of `page`, loaded on a miss.
    func page(_ page: Int, tags: [UInt8]) throws -> UnsafeRawBufferPointer {
        let pageBytes = min(IndexPages.pageSize, length - page * IndexPages.pageSize)
        let slot: Int
        if let cached = clock.slot(holding: page) {
            slot = cached
        } else {
            slot = clock.victim()
            try load(page, into: slot, byteCount: pageBytes, tags: tags)
        }
        clock.touch(slot)
        let base = slot * IndexPages.pageSize
        return UnsafeRawBufferPointer(rebasing: slots[base..<(base + pageBytes)])
    }

    /// Copies plaintext at `offset` into `buffer`, page by page.
    func copy(at offset: Int, into buffer: UnsafeMutableRawBufferPointer, tags: [UInt8]) throws {
        var done = 0
        while done < buffer.count {
            let at = offset + done
            let bytes = try page(at / IndexPages.pageSize, tags: tags)
            let within = at % IndexPages.pageSize
            let take = min(bytes.count - within, buffer.count - done)
            UnsafeMutableRawBufferPointer(rebasing: buffer[done..<(done + take)])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[within..<(within + take)]))
            done += take
        }
    }

    /// Reads `page`'s ciphertext, checks it against the tag taken when
    /// the index was authenticated, and decrypts it into `slot`.
    ///
    /// A page that does not match is read once more when the source may
    /// give other bytes (a remote bundle's cached copy, dropped by
    /// `discardCopies`), as a chunk is.
    private func load(_ page: Int, into slot: Int, byteCount: Int, tags: [UInt8]) throws {
        let ciphertext = UnsafeMutableRawBufferPointer(rebasing: sealed[0..<byteCount])
        let at = start + UInt64(page * IndexPages.pageSize)
        var matches = try readMatching(page, at: at, into: ciphertext, tags: tags)
        if !matches && source.discardCopies(atOffset: at, count: byteCount) {
            matches = try readMatching(page, at: at, into: ciphertext, tags: tags)
        }
        guard matches else { throw BundleError.corruptIndex("index page \(page) changed after the bundle was verified") }
        let base = slot * IndexPages.pageSize
        let target = UnsafeMutableRawBufferPointer(rebasing: slots[base..<(base + byteCount)])
        do {
            try nonce.withUnsafeBytes { n in
                try ctr.decryptSegment(key: key, nonce: n, messageOffset: page * IndexPages.pageSize,
                                       ciphertext: UnsafeRawBufferPointer(ciphertext), into: target)
            }
        } catch {
            SecureBytes.wipe(target)
            throw BundleError.crypto("index decryption failed")
        }
        clock.place(page, in: slot)
    }

    /// Reads `page`'s ciphertext at `at` into `ciphertext`: whether it
    /// matches the tag taken when the index was authenticated.
    private func readMatching(_ page: Int, at: UInt64, into ciphertext: UnsafeMutableRawBufferPointer, tags: [UInt8]) throws -> Bool {
        let got = try source.read(into: ciphertext, atOffset: at)
        guard got == ciphertext.count else {
            throw BundleError.corruptIndex("index page \(page) is truncated (the bundle changed after it was verified)")
        }
        try tag(ofPage: page, ciphertext: UnsafeRawBufferPointer(ciphertext), into: loadedTag)
        return tags.withUnsafeBytes { all in
            ConstantTime.equal(UnsafeRawBufferPointer(loadedTag),
                               UnsafeRawBufferPointer(rebasing: all[(page * Self.tagSize)..<((page + 1) * Self.tagSize)]))
        }
    }
}
