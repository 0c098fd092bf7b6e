import CryptCore
@testable import EncFSCore
import XCTest
import SharedTestSupport

/// The paged index (format version 2): when it is written, that it answers
/// exactly as the flat index of the same tree, that opening reads page 0
/// only, and what a key holder's damaged pages run into: an error where the
/// page is first used (never other data), and `verify` for the rules that
/// span pages.
final class PagedIndexTests: XCTestCase {
    private var tmp: TemporaryDirectory!
    private let key = TestSecrets.key(21)

    override func setUpWithError() throws { tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp") }
    override func tearDown() { tmp = nil }

    /// The trees of ``makeTree(perDirectory:climbingLink:)`` and the
    /// bundles packed from them, made once for the class: writing and
    /// packing 2,500 files was most of each test's time. A test gets its
    /// own copy of a bundle (``pack(_:layout:compression:name:)``), so
    /// the damage one test does is not seen by the next. XCTest runs the
    /// tests of a class one after another, on one thread.
    nonisolated(unsafe) private static var shared: TemporaryDirectory?
    /// When the shared directory was made: every shared bundle was packed
    /// after it, so its creation time lies between this and now.
    nonisolated(unsafe) private static var sharedSince: Int64 = 0
    private static func sharedDirectory() throws -> TemporaryDirectory {
        if let shared { return shared }
        let made = try TemporaryDirectory(prefix: "encfs-format-tests-shared", under: "/tmp")
        shared = made
        sharedSince = Int64(time(nil))
        return made
    }
    override class func tearDown() {
        shared = nil
        super.tearDown()
    }

    /// Sibling names of this length: records and names of about 2,500
    /// files fill several 64 KiB record pages.
    private func fileName(_ i: Int) -> String { "file-\(String(i + 100_000).dropFirst())-with-a-longer-name.txt" }

    /// Five directories of `perDirectory` small files (every seventh a copy
    /// of an earlier one: shared bodies), an empty directory, two symlinks,
    /// and a compressible 300 KiB text file with a copy. `d0/link` climbs
    /// with "..", so opening checks it (loading pages) unless left out.
    private func makeTree(perDirectory: Int = 500, climbingLink: Bool = true) throws -> [UInt8] {
        let source = try Self.sharedDirectory().appending("source-\(perDirectory)-\(climbingLink)")
        if FileTree.exists(source) { return source }
        try FileTree.makeDirectory(source)
        var generator = SeededGenerator(seed: 21)
        for d in 0..<5 {
            let directory = join(source, bytes("d\(d)"))
            try FileTree.makeDirectory(directory)
            for i in 0..<perDirectory {
                let contents = i % 7 == 0 ? bytes("shared \(i % 3)\n") : generator.bytes(1 + i % 300)
                try FileTree.writeFile(join(directory, bytes(fileName(i))), contents)
            }
        }
        try FileTree.makeDirectory(join(source, bytes("empty")))
        if climbingLink { try FileTree.makeSymlink(join(source, bytes("d0/link")), target: bytes("../d1/\(fileName(1))")) }
        try FileTree.makeSymlink(join(source, bytes("top")), target: bytes("d4"))
        let text = Array(repeating: Array("{\"word\": \"alpha\", \"n\": 12345},\n".utf8), count: 10_000).flatMap { $0 }
        try FileTree.writeFile(join(source, bytes("big.json")), text)
        try FileTree.writeFile(join(source, bytes("d2/big-copy.json")), text)
        return source
    }

    private func pack(_ source: [UInt8], layout: IndexLayout, compression: CompressionMethod = .zstd,
                      name: String = "bundle") throws -> [UInt8] {
        let path = tmp.appending("\(name)-\(layout)-\(compression.name).bundle")
        // A shared tree's bundle is packed once and copied.
        let shared = try Self.sharedDirectory()
        guard source.starts(with: shared.path + [UInt8(ascii: "/")]) else { return try pack(source, layout: layout, compression: compression, to: path) }
        let pristine = shared.appending("\(name)-\(layout)-\(compression.name)-\(String(decoding: source.split(separator: 0x2F).last ?? [], as: UTF8.self)).bundle")
        if !FileTree.exists(pristine) { _ = try pack(source, layout: layout, compression: compression, to: pristine) }
        try FileTree.writeFile(path, try FileTree.readFile(pristine))
        return path
    }

    private func pack(_ source: [UInt8], layout: IndexLayout, compression: CompressionMethod, to path: [UInt8]) throws -> [UInt8] {
        var options = PackOptions()
        options.chunkSizeLog2 = 12
        options.keys = [.rawKey(key)]
        options.scrypt = .testing
        options.compression = compression
        options.indexLayout = layout
        // The same bodies under both layouts: fragments (FragmentTests)
        // would change the paged bundle's.
        options.fragmentThreshold = 0
        _ = try BundleWriter.pack(source: source, destination: path, options: options) { message, path in
            XCTFail("unexpected warning: \(message) (\(path.debugPath))")
        }
        return path
    }

    private func open(_ path: [UInt8], cacheBytes: Int = IndexPages.defaultCacheBytes) throws -> BundleReader {
        try BundleReader.open(path: path, materials: [.rawKey(key)], indexCacheBytes: cacheBytes)
    }

    /// Every entry in index order: path, kind, mode, mtime, size, and the
    /// target or a digest of the contents and the stored size.
    private func describe(_ reader: BundleReader) throws -> [String] {
        let index = reader.index
        return try (0..<index.count).map { position in
            let entry = try index.entry(at: position)
            var line = "\(String(decoding: try index.path(of: entry), as: UTF8.self)) \(entry.kind) \(entry.mode) "
                + "\(entry.mtimeSeconds).\(entry.mtimeNanoseconds) \(entry.children.count) \(entry.fileSize) \(entry.targetLength) subdirs \(index.subdirectoryCount(of: entry))"
            switch entry.kind {
            case .directory:
                line += " children \(entry.children.count)"
            case .file:
                line += " \(try reader.contents(of: entry).withUnsafeBytes { SHA256.hash($0) }.hexString)"
                line += " stored \(try index.storedSize(of: entry))"
            case .symlink:
                line += " -> \(String(decoding: try index.withSymlinkTarget(of: entry) { Array($0) }, as: UTF8.self))"
            }
            XCTAssertEqual(try reader.entry(index.path(of: entry)).position, position, "lookup of \(line)")
            return line
        }
    }

    private func store(_ reader: BundleReader) throws -> PagedIndexStore {
        guard case .paged(let store) = reader.index.storage else { throw BundleError.corruptIndex("the index is not paged") }
        return store
    }

    // MARK: - What is written

    func testPagedAndFlat_SameTree_AnswerTheSame() throws {
        let source = try makeTree()
        let flat = try open(try pack(source, layout: .flat))
        let paged = try open(try pack(source, layout: .paged), cacheBytes: IndexPages.minimumCacheBytes)
        XCTAssertFalse(flat.index.isPaged)
        XCTAssertTrue(paged.index.isPaged)
        let directory = try store(paged).directory
        XCTAssertGreaterThanOrEqual(directory.recordPageCount, 3, "the tree must take several record pages")
        XCTAssertEqual(directory.pageCount - 1 - directory.recordPageCount, 1, "one table page")
        let expected = try describe(flat)
        XCTAssertEqual(expected.count, 1 + 1 + 5 + 1 + 1 + 5 * 500 + 2)
        // Twice: the second pass runs on a cache the first one churned.
        XCTAssertEqual(try describe(paged), expected)
        XCTAssertEqual(try describe(paged), expected)
        XCTAssertEqual(paged.index.fileCount, flat.index.fileCount)
        XCTAssertEqual(paged.index.totalFileBytes, flat.index.totalFileBytes)
        XCTAssertEqual(paged.index.storedFileBytes, flat.index.storedFileBytes)
        XCTAssertEqual(paged.index.distinctFileBytes, flat.index.distinctFileBytes)
        // Packed at different moments of the class (the bundles are shared),
        // so each creation time is checked against when it could have been.
        let now = Int64(time(nil))
        for bundle in [flat, paged] {
            XCTAssertGreaterThanOrEqual(bundle.index.creationTime, Self.sharedSince)
            XCTAssertLessThanOrEqual(bundle.index.creationTime, now)
        }
        XCTAssertTrue(try BundleVerifier.verify(paged).damaged.isEmpty)
        try paged.index.checkWholeIndex()
        XCTAssertLessThan(paged.header.indexLength, flat.header.indexLength / 2, "compressed pages")
    }

    func testPack_Automatic_PagedForVersion2AndLargeTrees() throws {
        // No compression, no duplicates, few entries: version 1, flat.
        let small = tmp.appending("small")
        try FileTree.makeDirectory(small)
        try FileTree.writeFile(join(small, bytes("a")), bytes("a\n"))
        let plain = try open(try pack(small, layout: .automatic, compression: .none, name: "small"))
        XCTAssertEqual(plain.header.features, .version1)
        XCTAssertFalse(plain.index.isPaged)
        // Shared bodies: version 2 anyway, so paged.
        try FileTree.writeFile(join(small, bytes("b")), bytes("a\n"))
        let shared = try pack(small, layout: .automatic, compression: .none, name: "shared")
        let file = try FileTree.readFile(shared)
        XCTAssertEqual(Array(file[8..<10]), [2, 0])
        XCTAssertNotEqual(Array(file[36..<40]), [0, 0, 0, 0], "page 0's sealed length")
        XCTAssertTrue(try open(shared).index.isPaged)
        // More entries than the threshold: paged although nothing else needs version 2.
        let large = tmp.appending("large")
        try FileTree.makeDirectory(large)
        for d in 0...(PagedIndexWriter.entryThreshold / 1000) {
            let directory = join(large, bytes("d\(d)"))
            try FileTree.makeDirectory(directory)
            for s in 0..<1000 { try FileTree.makeDirectory(join(directory, bytes("s\(s)"))) }
        }
        let many = try open(try pack(large, layout: .automatic, compression: .none, name: "large"))
        XCTAssertGreaterThan(many.index.count, PagedIndexWriter.entryThreshold)
        XCTAssertTrue(many.index.isPaged)
        XCTAssertEqual(many.header.features.formatVersion, 2)
        XCTAssertEqual(many.index.subdirectoryCount(of: try many.entry(bytes("d7"))), 1000)
    }

    /// Opening reads page 0 only; a lookup loads the pages it passes.
    func testOpen_ReadsPageZeroOnly() throws {
        let reader = try open(try pack(try makeTree(climbingLink: false), layout: .paged))
        let store = try store(reader)
        XCTAssertEqual(store.cachedPages, [])
        let entry = try reader.entry(bytes("d3/\(fileName(499))"))
        // The root's page, and pages of d3's children the name search
        // passed (record pages may be 16 KiB: d3's children take several).
        let children = try reader.entry(bytes("d3")).children
        let childPages = store.directory.recordPage(holding: children.lowerBound)...store.directory.recordPage(holding: children.upperBound - 1)
        let cached = store.cachedPages
        XCTAssertEqual(cached.first, 1)
        XCTAssertTrue(cached.contains(store.directory.recordPage(holding: entry.position)))
        XCTAssertTrue(cached.dropFirst().allSatisfy { childPages.contains($0) }, "\(cached) outside \(childPages)")
        XCTAssertLessThan(cached.count, store.directory.recordPageCount, "not every page")
    }

    /// A chunk table that spans two table pages (8,300 entries of 8 bytes)
    /// reads right across the page break.
    func testChunkTableAcrossTablePages_ReadsEveryChunk() throws {
        let source = tmp.appending("huge")
        try FileTree.makeDirectory(source)
        let line = Array("a line of text that compresses, number 0123456789\n".utf8)
        let text = Array(Array(repeating: line, count: 8300 * 4096 / line.count + 1).joined().prefix(8300 * 4096 - 7))
        try FileTree.writeFile(join(source, bytes("huge.txt")), text)
        let reader = try open(try pack(source, layout: .paged), cacheBytes: IndexPages.minimumCacheBytes)
        let store = try store(reader)
        XCTAssertEqual(store.directory.pageCount - 1 - store.directory.recordPageCount, 2, "two table pages")
        XCTAssertEqual(try reader.contents(of: bytes("huge.txt")), text)
        XCTAssertTrue(try BundleVerifier.verify(reader).damaged.isEmpty)
    }

    func testSigned_PagedIndexCoveredWhole() throws {
        let signed = try SignedBundles()
        // Four identical files: shared bodies, so version 2 and paged.
        for name in ["c1", "c2"] { try FileTree.writeFile(join(signed.source, bytes(name)), bytes("same\n")) }
        let path = try signed.pack("signed.bundle", signedBy: signed.ci)
        let reader = try signed.open(path, origin: SignedBundles.signed(by: signed.ci))
        XCTAssertTrue(reader.index.isPaged)
        XCTAssertEqual(try reader.contents(of: bytes("c2")), bytes("same\n"))
        // The last byte of the last page: the signature fails at open,
        // before any page but page 0 would be used.
        var file = try FileTree.readFile(path)
        file[file.count - 1] ^= 1
        try FileTree.writeFile(path, file)
        XCTAssertThrowsBundleError(.badSignature) { try signed.open(path, origin: SignedBundles.signed(by: signed.ci)) }
    }

    // MARK: - Damaged pages (key holder)

    /// Packs the tree, lets `edit` change the image and write it back, and
    /// checks that the bundle opens (no symlink climbs, so opening reads
    /// page 0 only), that using `failing` gives a corrupt index error, and
    /// that verify reports it.
    private func checkDamage(failing: String, file: StaticString = #filePath, line: UInt = #line,
                             _ edit: (PagedIndexImage, [UInt8], BundleReader) throws -> Void) throws {
        let path = try pack(try makeTree(climbingLink: false), layout: .paged)
        let before = try open(path)
        try edit(try PagedIndexImage(path, reader: before), path, before)
        let reader = try open(path, cacheBytes: IndexPages.minimumCacheBytes)
        XCTAssertThrowsBundleError(.corruptIndex, file: file, line: line) {
            let entry = try reader.entry(bytes(failing))
            if entry.kind == .file { _ = try reader.contents(of: entry) }
        }
        XCTAssertThrowsBundleError(.corruptIndex, "verify", file: file, line: line) { try BundleVerifier.verify(try self.open(path)) }
    }

    func testPagesSwapped_FailWhereUsed() throws {
        try checkDamage(failing: "d0") { image, path, _ in
            try image.write(path, swapping: (1, 2))
        }
    }

    func testPageFromAnotherBundle_Fails() throws {
        let other = try pack(try makeTree(climbingLink: false), layout: .paged, name: "other")
        try checkDamage(failing: "d0/\(fileName(3))") { image, path, _ in
            let foreign = try PagedIndexImage.sealedPage(1, of: other, reader: try self.open(other))
            try image.write(path, replacing: [1: foreign])
        }
    }

    func testPagesSealedForAnotherPageCount_Fail() throws {
        try checkDamage(failing: "d0") { image, path, _ in
            try image.write(path, sealedForPageCount: image.pageCount + 1)
        }
    }

    func testTruncatedPage_Fails() throws {
        try checkDamage(failing: "d4/\(fileName(499))") { image, path, _ in
            var image = image
            let recordPages = Int(image.head[12]) | Int(image.head[13]) << 8
            image.pages[recordPages - 1].removeLast(5)
            try image.write(path)
        }
    }

    /// What the design's "bad varint" would be here: a record field that
    /// points outside its page (a name past the page's strings).
    func testRecordFieldOutOfRange_Fails() throws {
        try checkDamage(failing: "d1") { image, path, reader in
            var image = image
            let d1 = try reader.entry(bytes("d1"))
            image.pages[0].storeLE(UInt32(60_000), at: PagedIndexImage.record(d1.position) + 8)
            try image.write(path)
        }
    }

    func testNamesOutOfOrderInAPage_Fail() throws {
        try checkDamage(failing: "d0/\(fileName(10))") { image, path, reader in
            var image = image
            let (a, b) = (try reader.entry(bytes("d0/\(fileName(10))")), try reader.entry(bytes("d0/\(fileName(11))")))
            guard case .paged(let store) = reader.index.storage else { throw BundleError.corruptIndex("not paged") }
            let page = store.directory.recordPage(holding: a.position)
            XCTAssertEqual(page, store.directory.recordPage(holding: b.position))
            let first = Int(store.directory.firstPositions[page - 1])
            let (ra, rb) = (PagedIndexImage.record(a.position - first) + 8, PagedIndexImage.record(b.position - first) + 8)
            let nameA = Array(image.pages[page - 1][ra..<(ra + 4)])
            image.pages[page - 1].replaceSubrange(ra..<(ra + 4), with: image.pages[page - 1][rb..<(rb + 4)])
            image.pages[page - 1].replaceSubrange(rb..<(rb + 4), with: nameA)
            try image.write(path)
        }
    }

    /// A page's stored zstd frame that inflates past the page's length (a
    /// decompression bomb): the page fails, nothing is written past it.
    func testFrameInflatingPastThePage_Fails() throws {
        try checkDamage(failing: "d0") { image, path, _ in
            let compressor = try ChunkCompressor(level: 3)
            let bomb = image.pages[0] + [UInt8](repeating: 0, count: 100_000)
            var frame = [UInt8](repeating: 0, count: image.pages[0].count - 1)
            let n = try XCTUnwrap(bomb.withUnsafeBytes { b in frame.withUnsafeMutableBytes { compressor.compress(b, into: $0) } })
            try image.write(path, storedPages: [1: Array(frame[0..<n])])
        }
    }

    /// A symlink whose target may lead outside, but which page 0 does not
    /// list (so open did not check it): its page fails, the link is never served.
    func testUnlistedOutsideSymlink_PageFails() throws {
        try checkDamage(failing: "top") { image, path, reader in
            var image = image
            let top = try reader.entry(bytes("top"))
            let at = image.strings(ofPage: 1) + top.targetOffset
            image.pages[0][at] = UInt8(ascii: "/")
            try image.write(path)
        }
    }

    /// Siblings out of order across a page break: each page is in order,
    /// so pages load; verify finds it.
    func testNamesOutOfOrderAcrossPages_VerifyReports() throws {
        let path = try pack(try makeTree(), layout: .paged)
        let reader = try open(path)
        var image = try PagedIndexImage(path, reader: reader)
        let store = try store(reader)
        // The first page break between two files of one directory.
        let page = try XCTUnwrap((2...store.directory.recordPageCount).first { k in
            let first = Int(store.directory.firstPositions[k - 1])
            return try reader.index.entry(at: first).parent == reader.index.entry(at: first - 1).parent
        })
        let first = Int(store.directory.firstPositions[page - 1])
        let (before, after) = (try reader.index.entry(at: first - 1), try reader.index.entry(at: first))
        let at = (image.strings(ofPage: page - 1) + Int(before.nameOffset), image.strings(ofPage: page) + Int(after.nameOffset))
        XCTAssertEqual(before.nameLength, after.nameLength)
        let n = Int(before.nameLength)
        let a = Array(image.pages[page - 2][at.0..<(at.0 + n)])
        let b = Array(image.pages[page - 1][at.1..<(at.1 + n)])
        image.pages[page - 2].replaceSubrange(at.0..<(at.0 + n), with: b)
        image.pages[page - 1].replaceSubrange(at.1..<(at.1 + n), with: a)
        try image.write(path)
        let damaged = try open(path)
        XCTAssertEqual(try damaged.index.name(of: damaged.index.entry(at: first)), a, "each page still loads")
        let error = XCTAssertThrowsBundleError(.corruptIndex) { try damaged.index.checkWholeIndex() }
        XCTAssertEqual(error?.message, "corrupted index: entries \(first - 1) and \(first) are not in name order")
        XCTAssertThrowsBundleError(.corruptIndex) { try BundleVerifier.verify(damaged) }
    }

    /// Header bytes 36 … 39 (page 0's sealed length) are covered by the
    /// header MAC; a key holder who changes them loses page 0.
    func testPageZeroLength_CheckedAgainstTheIndex() throws {
        let path = try pack(try makeTree(perDirectory: 10), layout: .paged)
        let reader = try open(path)
        let h = reader.header
        for length in [UInt32(17), h.features.pagedIndexHeadLength + 1, UInt32(h.indexLength) + 1] {
            let changed = BundleHeader(bundleID: h.bundleID, layout: h.layout, slots: h.slots, payloadLength: h.payloadLength,
                                       indexOffset: h.indexOffset, indexLength: h.indexLength,
                                       features: h.features.withPagedIndex(headLength: length))
            try SignedBundles.rewriteHeader(path, changed, keys: reader.keys)
            XCTAssertThrowsBundleError(.corruptIndex, "page 0 length \(length)") { try self.open(path) }
        }
    }
}
