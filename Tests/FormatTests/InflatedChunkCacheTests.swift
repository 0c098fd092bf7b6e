import CryptCore
@testable import EncFSCore
import SharedTestSupport
import Synchronization
import XCTest

/// The cache of inflated chunks in a reader's workspace, in process with
/// one workspace (what one mount worker has) over a source that counts
/// fetches: reads inside a chunk that a partial read inflated fetch
/// nothing, two files share the two slots, and a chunk that fails is never
/// served from a slot. (Reads through a mount at every chunk size, and the
/// wipe at lock: CompressedReadTests, CompressedLockTests.)
final class InflatedChunkCacheTests: XCTestCase {
    private var tmp: TemporaryDirectory!
    private let key = TestSecrets.key(16)

    override func setUpWithError() throws {
        tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp")
    }


    /// `n` bytes of text that zstd shrinks, different for each `seed`.
    private func text(_ n: Int, seed: Int) -> [UInt8] {
        var out: [UInt8] = []
        var i = seed * 1000
        while out.count < n {
            out += Array("{\"seed\": \(seed), \"row\": \(i)},\n".utf8)
            i += 1
        }
        return Array(out[0..<n])
    }

    /// Files `a`, `b` and `c`, 5 chunks of 4 KiB each, packed with zstd.
    private func packThreeFiles() throws -> (path: [UInt8], files: [String: [UInt8]]) {
        let source = tmp.appending("source")
        try FileTree.makeDirectory(source)
        let files = ["a": text(5 * 4096, seed: 1), "b": text(5 * 4096, seed: 2), "c": text(5 * 4096, seed: 3)]
        for (name, data) in files { try FileTree.writeFile(join(source, bytes(name)), data) }
        let path = tmp.appending("z.bundle")
        var options = PackOptions()
        options.chunkSizeLog2 = 12
        options.keys = [.rawKey(key)]
        options.scrypt = .testing
        options.compression = .zstd
        _ = try BundleWriter.pack(source: source, destination: path, options: options) { message, path in
            XCTFail("unexpected warning: \(message) (\(path.debugPath))")
        }
        return (path, files)
    }

    /// Reads `count` bytes of `name` at `offset` with `workspace` and
    /// checks them against the source.
    private func check(_ reader: BundleReader, _ workspace: ChunkWorkspace, _ files: [String: [UInt8]], _ name: String,
                       at offset: Int, count: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        let entry = try reader.index.resolve(path: bytes(name))
        var out = [UInt8](repeating: 0, count: count)
        let n = try out.withUnsafeMutableBytes { try reader.read(entry, fromOffset: UInt64(offset), into: $0, using: workspace) }
        XCTAssertEqual(Array(out[0..<n]), Array(try XCTUnwrap(files[name])[offset..<(offset + count)]),
                       "\(name) at \(offset)", file: file, line: line)
    }

    func testPartialReads_InsideInflatedChunk_FetchNothing() throws {
        let (path, files) = try packThreeFiles()
        let source = CountingMemorySource(try FileTree.readFile(path))
        let reader = try BundleReader.open(source: source, materials: [.rawKey(key)])
        let workspace = try reader.makeWorkspace()
        // A paged index (every version 2 bundle) reads its pages at first
        // use: load the records and chunk tables of a, b and c first, so
        // only chunk fetches are counted.
        for name in ["a", "b", "c"] { _ = try reader.index.storedSize(of: reader.index.resolve(path: bytes(name))) }
        func fetches(_ reads: () throws -> Void) rethrows -> Int {
            let before = source.reads
            try reads()
            return source.reads - before
        }
        XCTAssertEqual(try fetches { try check(reader, workspace, files, "a", at: 100, count: 200) }, 1, "a miss")
        XCTAssertEqual(try fetches { try check(reader, workspace, files, "a", at: 1000, count: 3000) }, 0, "inside a's chunk 0")
        XCTAssertEqual(try fetches { try check(reader, workspace, files, "b", at: 100, count: 200) }, 1, "b's chunk 0 is not a's")
        XCTAssertEqual(try fetches { try check(reader, workspace, files, "a", at: 4000, count: 96) }, 0, "two files, two slots")
        XCTAssertEqual(try fetches { try check(reader, workspace, files, "b", at: 7, count: 1) }, 0, "two files, two slots")
        // c takes the slot used less recently (a's), b's stays.
        XCTAssertEqual(try fetches { try check(reader, workspace, files, "c", at: 100, count: 200) }, 1, "c's chunk 0")
        XCTAssertEqual(try fetches { try check(reader, workspace, files, "b", at: 300, count: 10) }, 0, "b's chunk kept")
        XCTAssertEqual(try fetches { try check(reader, workspace, files, "a", at: 100, count: 200) }, 1, "a's chunk replaced")
        // A read across a boundary, chunks 1 and 2 partly: one fetch (one
        // batch), both kept; then inside each again.
        XCTAssertEqual(try fetches { try check(reader, workspace, files, "a", at: 8000, count: 400) }, 1, "two chunks")
        XCTAssertEqual(try fetches { try check(reader, workspace, files, "a", at: 4100, count: 50) }, 0, "inside chunk 1")
        XCTAssertEqual(try fetches { try check(reader, workspace, files, "a", at: 8300, count: 50) }, 0, "inside chunk 2")
        // Whole chunks go straight to the caller and are not cached.
        XCTAssertEqual(try fetches { try check(reader, workspace, files, "a", at: 12288, count: 4096) }, 1, "whole chunk 3")
        XCTAssertEqual(try fetches { try check(reader, workspace, files, "a", at: 12288, count: 10) }, 1, "chunk 3 was not kept")
    }

    func testDamagedChunk_NeverServedFromASlot() throws {
        let (path, files) = try packThreeFiles()
        let original = try BundleReader.open(path: path, materials: [.rawKey(key)])
        let entry = try original.index.resolve(path: bytes("a"))
        var table = [UInt8](repeating: 0, count: 4 * ChunkTableWindow.entrySize)
        let range = try table.withUnsafeMutableBytes { buffer in
            original.header.layout.storedRange(ofChunk: 1, in: try original.index.chunkTableWindow(of: entry, chunks: 1..<2, into: buffer))
        }
        // One flipped byte in chunk 1's sealed bytes.
        let at = original.header.headerLength + Int(entry.payloadOffset + range.lowerBound) + 5
        let byte = try FileTree.readFile(path)[at]
        try SignedBundles.overwrite(path, at: at, with: [byte ^ 0x40])

        let source = CountingMemorySource(try FileTree.readFile(path))
        let reader = try BundleReader.open(source: source, materials: [.rawKey(key)])
        let workspace = try reader.makeWorkspace()
        try check(reader, workspace, files, "a", at: 10, count: 100)
        for attempt in 1...2 {
            let before = source.reads
            XCTAssertThrowsBundleError(.corruptChunk(entry: entry.position, chunk: 1), "attempt \(attempt)") {
                try check(reader, workspace, files, "a", at: 4096 + 10, count: 100)
            }
            XCTAssertEqual(source.reads - before, 1, "attempt \(attempt) fetched the chunk again")
        }
        let before = source.reads
        try check(reader, workspace, files, "a", at: 200, count: 100)
        XCTAssertEqual(source.reads, before, "chunk 0 stayed cached")
    }
}
