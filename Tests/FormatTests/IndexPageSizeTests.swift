import CryptCore
@testable import EncFSCore
import XCTest
import SharedTestSupport

/// How large the pages of a paged index are: record pages are cut at
/// 16 KiB when the chunk tables are small (a random lookup then inflates
/// and checks a quarter of what a 64 KiB page costs) and stay 64 KiB
/// when the chunk tables take more; a reader's cache gives every slot the
/// largest page's size, so the same memory holds four times the small
/// pages.
final class IndexPageSizeTests: XCTestCase {
    private var tmp: TemporaryDirectory!
    private let key = TestSecrets.key(23)
    /// Two 64 KiB pages for loading, then eight 16 KiB slots or two 64 KiB
    /// ones (then the minimum of four).
    private let cacheBytes = 256 << 10

    override func setUpWithError() throws { tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp") }
    override func tearDown() { tmp = nil }

    /// `count` small files with long names in three directories, and
    /// optionally a compressible file of `tableChunks` 4 KiB chunks (its
    /// chunk table takes 8 bytes per chunk).
    private func makeTree(_ name: String, count: Int, tableChunks: Int = 0) throws -> [UInt8] {
        let source = tmp.appending(name)
        try FileTree.makeDirectory(source)
        var generator = SeededGenerator(seed: 23)
        for d in 0..<3 { try FileTree.makeDirectory(join(source, bytes("d\(d)"))) }
        for i in 0..<count {
            let path = "d\(i % 3)/entry-\(String(i + 100_000).dropFirst())-with-a-name-long-enough-to-fill-pages.txt"
            try FileTree.writeFile(join(source, bytes(path)), generator.bytes(1 + i % 200))
        }
        if tableChunks > 0 {
            let line = Array("a line of text that compresses well, again and again\n".utf8)
            let text = Array(Array(repeating: line, count: tableChunks * 4096 / line.count + 1).joined().prefix(tableChunks * 4096))
            try FileTree.writeFile(join(source, bytes("tables.txt")), text)
        }
        return source
    }

    private func pack(_ source: [UInt8], compression: CompressionMethod) throws -> [UInt8] {
        let path = tmp.appending("bundle-\(compression.name)-\(source.count)")
        var options = PackOptions()
        options.chunkSizeLog2 = 12
        options.keys = [.rawKey(key)]
        options.scrypt = .testing
        options.compression = compression
        options.indexLayout = .paged
        _ = try BundleWriter.pack(source: source, destination: path, options: options) { message, path in
            XCTFail("unexpected warning: \(message) (\(path.debugPath))")
        }
        return path
    }

    private func store(_ reader: BundleReader) throws -> PagedIndexStore {
        guard case .paged(let store) = reader.index.storage else { throw BundleError.corruptIndex("the index is not paged") }
        return store
    }

    /// Every file of `source` reads back from `reader` through a lookup
    /// of its path, twice (the second pass on a cache the first churned).
    private func assertEveryFileReads(_ reader: BundleReader, source: [UInt8], file: StaticString = #filePath, line: UInt = #line) throws {
        for _ in 0..<2 {
            for position in 0..<reader.index.count {
                let entry = try reader.index.entry(at: position)
                guard entry.kind == .file else { continue }
                let path = try reader.index.path(of: entry)
                XCTAssertEqual(try reader.entry(path).position, position, file: file, line: line)
                XCTAssertEqual(try reader.contents(of: entry), try FileTree.readFile(join(source, path)), file: file, line: line)
            }
        }
    }

    func testSmallTables_RecordPagesOf16KiB_FourTimesTheCachedPages() throws {
        let source = try makeTree("small-tables", count: 1500)
        let reader = try BundleReader.open(path: try pack(source, compression: .none), materials: [.rawKey(key)],
                                           indexCacheBytes: cacheBytes)
        let directory = try store(reader).directory
        let recordLengths = directory.plainLengths.prefix(directory.recordPageCount)
        XCTAssertGreaterThanOrEqual(recordLengths.count, 8, "the tree must take several record pages")
        XCTAssertLessThanOrEqual(recordLengths.max() ?? 0, UInt32(PagedIndexWriter.smallRecordPageBytes))
        XCTAssertGreaterThan(recordLengths.first ?? 0, UInt32(PagedIndexWriter.smallRecordPageBytes) * 3 / 4, "pages are filled")
        XCTAssertEqual(directory.largestPageLength, Int(recordLengths.max() ?? 0))
        XCTAssertEqual(try store(reader).cachedPageLimit, 8)
        try assertEveryFileReads(reader, source: source)
        XCTAssertTrue(try BundleVerifier.verify(reader).damaged.isEmpty)
        try reader.index.checkWholeIndex()
    }

    func testLargeTable_RecordPagesStay64KiB() throws {
        // 2,100 chunks: a 16,800-byte chunk table, over 16 KiB.
        let source = try makeTree("large-table", count: 1500, tableChunks: 2100)
        let reader = try BundleReader.open(path: try pack(source, compression: .zstd), materials: [.rawKey(key)],
                                           indexCacheBytes: cacheBytes)
        let directory = try store(reader).directory
        XCTAssertGreaterThan(directory.tableStreamLength, UInt64(PagedIndexWriter.smallRecordPageBytes))
        let recordLengths = directory.plainLengths.prefix(directory.recordPageCount)
        XCTAssertGreaterThan(recordLengths.first ?? 0, UInt32(PagedIndexWriter.smallRecordPageBytes), "64 KiB record pages")
        XCTAssertEqual(try store(reader).cachedPageLimit, 4, "two 64 KiB slots fit the budget: the minimum of four")
        try assertEveryFileReads(reader, source: source)
        XCTAssertTrue(try BundleVerifier.verify(reader).damaged.isEmpty)
    }
}
