import CryptCore
@testable import EncFSCore
import Dispatch
import Synchronization
import XCTest
import SharedTestSupport

/// The reader's cache of opened fragment units, shared by every thread
/// (`FragmentUnitCache`): several workspaces reading slices of one unit
/// fetch it once, also at the same time; more units than slots, read in
/// random order by several threads, come back byte for byte; a unit that
/// fails to open is never served afterwards.
final class FragmentUnitCacheTests: XCTestCase {
    private var tmp: TemporaryDirectory!
    private let key = TestSecrets.key(34)

    override func setUpWithError() throws { tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp") }
    override func tearDown() { tmp = nil }

    private func pack(_ files: [(String, [UInt8])]) throws -> [UInt8] { try SmallFileBundles.pack(files, in: tmp, key: key) }

    private func smallFiles(_ count: Int) -> [(String, [UInt8])] { SmallFileBundles.files(count, base: 500) }

    private static func read(_ reader: BundleReader, _ entry: IndexEntry, size: Int, workspace: ChunkWorkspace) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: size + 10)
        let n = try out.withUnsafeMutableBytes { try reader.read(entry, fromOffset: 0, into: $0, using: workspace) }
        return Array(out[0..<n])
    }

    /// Four workspaces (four mount workers) reading the slices of one unit
    /// in turn, then all at once: one fetch in all. Caches per workspace
    /// fetched it once per workspace; without waiting for a unit being
    /// opened, threads starting together each fetched it.
    func testWorkspaces_ShareOneOpenedUnit() throws {
        let files = smallFiles(40)
        let path = try pack(files)
        for concurrently in [false, true] {
            let source = CountingMemorySource(try FileTree.readFile(path))
            let reader = try BundleReader.open(source: source, materials: [.rawKey(key)])
            let entries = try files.map { try reader.entry(bytes($0.0)) }
            for entry in entries { _ = try reader.index.storedSize(of: entry) }
            let workspaces = try (0..<4).map { _ in try reader.makeWorkspace() }
            let before = source.reads
            let mismatches = Mutex(0)
            let readAll = { @Sendable (worker: Int) in
                for (index, (entry, file)) in zip(entries, files).enumerated() where concurrently || index % 4 == worker {
                    let got = try? Self.read(reader, entry, size: file.1.count, workspace: workspaces[worker])
                    if got != file.1 { mismatches.withLock { $0 += 1 } }
                }
            }
            if concurrently {
                DispatchQueue.concurrentPerform(iterations: 4, execute: readAll)
            } else {
                for worker in 0..<4 { readAll(worker) }
            }
            XCTAssertEqual(mismatches.withLock { $0 }, 0, "concurrently: \(concurrently)")
            XCTAssertEqual(source.reads - before, 1, "one fetch of the unit for 40 slices by 4 workspaces (concurrently: \(concurrently))")
        }
    }

    /// Many more units than the cache has slots, read at random by four
    /// threads: every file comes back whole, so a slot is never handed out
    /// while it is filled or read.
    func testManyUnits_ReadAtRandomByFourThreads_ComeBackWhole() throws {
        let files = smallFiles(2_500)
        let path = try pack(files)
        let reader = try BundleReader.open(path: path, materials: [.rawKey(key)])
        let entries = try files.map { try reader.entry(bytes($0.0)) }
        let units = Set(entries.compactMap { try? reader.index.body(of: $0).body.payloadOffset })
        XCTAssertGreaterThan(units.count, 20, "more fragment units than the cache's slots")
        let mismatches = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            var generator = SeededGenerator(seed: UInt64(worker + 1))
            guard let workspace = try? reader.makeWorkspace() else { return mismatches.withLock { $0.append("workspace") } }
            for _ in 0..<1_500 {
                let pick = Int.random(in: 0..<files.count, using: &generator)
                if (try? Self.read(reader, entries[pick], size: files[pick].1.count, workspace: workspace)) != files[pick].1 {
                    mismatches.withLock { $0.append(files[pick].0) }
                }
            }
        }
        XCTAssertEqual(mismatches.withLock { $0 }, [])
    }

    /// A unit whose sealed bytes were damaged fails every read of its
    /// slices, the second as the first (nothing of it was kept), while the
    /// slices of a sound unit still read.
    func testDamagedUnit_FailsEveryTime_OthersStillRead() throws {
        let files = smallFiles(300)
        let path = try pack(files)
        var image = try FileTree.readFile(path)
        let sound = try BundleReader.open(source: MemoryByteSource(bytes: image), materials: [.rawKey(key)])
        let first = try sound.entry(bytes(files[0].0))
        let fragment = try sound.index.body(of: first).body
        let damaged = Int(UInt64(sound.header.headerLength) + fragment.payloadOffset) + 40
        image[damaged] ^= 0x01
        let reader = try BundleReader.open(source: MemoryByteSource(bytes: image), materials: [.rawKey(key)])
        let workspace = try reader.makeWorkspace()
        let entry = try reader.entry(bytes(files[0].0))
        for attempt in 1...2 {
            XCTAssertThrowsError(try Self.read(reader, entry, size: files[0].1.count, workspace: workspace), "attempt \(attempt)") { error in
                guard case BundleError.corruptChunk = error else { return XCTFail("\(error)") }
            }
        }
        let last = try reader.entry(bytes(files[files.count - 1].0))
        XCTAssertNotEqual(try reader.index.body(of: last).body.payloadOffset, fragment.payloadOffset, "the last file in another unit")
        XCTAssertEqual(try Self.read(reader, last, size: files[files.count - 1].1.count, workspace: workspace), files[files.count - 1].1)
    }
}
