import CryptCore
@testable import EncFSCore
import SharedTestSupport
import XCTest

/// What a reader's workspace keeps, which a mount pays once per worker
/// thread: for a compressed bundle with fragments, a fetch buffer of one
/// batch of chunks and nothing unit-sized (units are fetched into buffers
/// the reader's unit cache lends, as many as fills ran at once, and zstd
/// frames are opened in place: no frame buffer); no chunk of plaintext
/// outside the cache of inflated chunks, which is allocated only by a
/// partial read of a file's chunk. Reads stay byte for byte, a unit read
/// whole included.
final class ReaderWorkspaceMemoryTests: XCTestCase {
    private var tmp: TemporaryDirectory!
    private let key = TestSecrets.key(35)

    override func setUpWithError() throws { tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp") }
    override func tearDown() { tmp = nil }

    /// Packs `files` (name, bytes) with zstd, 4 KiB chunks and 64 KiB units.
    private func pack(_ files: [(String, [UInt8])]) throws -> [UInt8] {
        let source = tmp.appending("source")
        try FileTree.makeDirectory(source)
        try FileTree.makeDirectory(join(source, bytes("s")))
        for (file, data) in files { try FileTree.writeFile(join(source, bytes(file)), data) }
        let path = tmp.appending("b.bundle")
        var options = PackOptions()
        options.chunkSizeLog2 = 12
        options.fragmentUnitLog2 = 16
        options.keys = [.rawKey(key)]
        options.scrypt = .testing
        options.compression = .zstd
        _ = try BundleWriter.pack(source: source, destination: path, options: options) { message, path in
            XCTFail("unexpected warning: \(message) (\(path.debugPath))")
        }
        return path
    }

    private func smallFiles(_ count: Int) -> [(String, [UInt8])] {
        (0..<count).map { ("s/f\(String(format: "%03d", $0)).c", CompressibleData.sourceText(700 + 13 * ($0 % 97), seed: UInt64($0))) }
    }

    private func read(_ reader: BundleReader, _ name: String, at offset: Int = 0, count: Int,
                      workspace: ChunkWorkspace) throws -> [UInt8] {
        let entry = try reader.entry(bytes(name))
        var out = [UInt8](repeating: 0, count: count)
        let n = try out.withUnsafeMutableBytes { try reader.read(entry, fromOffset: UInt64(offset), into: $0, using: workspace) }
        return Array(out[0..<n])
    }

    /// Four workspaces (four workers) read every small file, one reader at
    /// a time, and a large file whole and in part: each workspace's fetch
    /// buffer holds one batch of chunks, far less than a unit; it has no
    /// plaintext buffer; one fetch buffer was lent for all the units; the
    /// cache of inflated chunks was made only by the partial read.
    func testCompressedWithFragments_WorkspacesHoldNoUnit() throws {
        let large = CompressibleData.sourceText(40_000, seed: 99)
        let files = smallFiles(300) + [("big.c", large)]
        let reader = try BundleReader.open(path: try pack(files), materials: [.rawKey(key)])
        let layout = reader.header.layout
        let units = reader.header.fragmentLayout
        XCTAssertGreaterThan(units.chunkSize, layout.chunkSize, "fragment units larger than chunks")
        let workspaces = try (0..<4).map { _ in try reader.makeWorkspace() }
        for workspace in workspaces {
            XCTAssertEqual(workspace.sealed.count, layout.batchCapacity(batchBytes: ChunkWorkspace.batchBytes))
            XCTAssertLessThan(workspace.sealed.count, Int(units.sealedChunkSize), "a workspace's fetch buffer holds no unit")
            XCTAssertEqual(workspace.plaintext.count, 0, "no plaintext chunk beside the cache of inflated chunks")
        }
        for (index, (name, data)) in files.dropLast().enumerated() {
            XCTAssertEqual(try read(reader, name, count: data.count + 10, workspace: workspaces[index % 4]), data, name)
        }
        let unitCache = try XCTUnwrap(reader.fragmentUnits)
        XCTAssertEqual(unitCache.fetchBuffersMade, 1, "one reader at a time: one fetch buffer lent for every unit")
        XCTAssertEqual(workspaces.filter { $0.inflated?.isAllocated ?? true }.count, 0, "small files inflate no file chunk")
        XCTAssertEqual(try read(reader, "big.c", count: large.count, workspace: workspaces[0]), large)
        XCTAssertFalse(try XCTUnwrap(workspaces[0].inflated).isAllocated, "whole chunks go straight to the caller")
        XCTAssertEqual(try read(reader, "big.c", at: 5000, count: 100, workspace: workspaces[1]), Array(large[5000..<5100]))
        XCTAssertTrue(try XCTUnwrap(workspaces[1].inflated).isAllocated, "a partial read keeps its chunk")
    }

    /// A fragment of one file is one unit that file's slice covers whole:
    /// read through the unit cache like any slice, whole and in part.
    func testSliceCoveringItsWholeUnit_ReadsThroughTheUnitCache() throws {
        let data = CompressibleData.sourceText(3_000, seed: 7)
        let reader = try BundleReader.open(path: try pack([("s/only.c", data)]), materials: [.rawKey(key)])
        let entry = try reader.entry(bytes("s/only.c"))
        let (fragment, offset) = try reader.index.body(of: entry)
        XCTAssertTrue(fragment.isFragmentBody)
        XCTAssertEqual(offset, 0)
        XCTAssertEqual(fragment.fileSize, UInt64(data.count), "the slice is its whole fragment, one unit")
        let workspace = try reader.makeWorkspace()
        XCTAssertEqual(try read(reader, "s/only.c", count: data.count, workspace: workspace), data)
        XCTAssertEqual(try read(reader, "s/only.c", at: 100, count: 50, workspace: workspace), Array(data[100..<150]))
        XCTAssertEqual(try XCTUnwrap(reader.fragmentUnits).fetchBuffersMade, 1)
    }
}
