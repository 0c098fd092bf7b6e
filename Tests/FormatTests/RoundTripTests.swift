import CryptCore
@testable import EncFSCore
import Synchronization
import XCTest
import Dispatch
import SharedTestSupport

/// Packs a tree with files at every size around the chunk boundaries, odd
/// names, modes and nanosecond mtimes, then reads everything back through
/// `BundleReader` at several step sizes and random offsets.
final class RoundTripTests: XCTestCase {
    /// One entry of the source tree, as the bundle must report it.
    struct Node {
        enum Content {
            case file([UInt8])
            case directory
            case symlink([UInt8])
        }

        let path: [UInt8]
        let content: Content
        let mode: UInt16

        var name: [UInt8] { path.split(separator: UInt8(ascii: "/")).last.map(Array.init) ?? [] }
        var parent: [UInt8] {
            guard let slash = path.lastIndex(of: UInt8(ascii: "/")) else { return [] }
            return Array(path[..<slash])
        }
    }

    func testRoundTrip_4KChunks() throws { try roundTrip(chunkSizeLog2: 12) }

    func testRoundTrip_64KChunks() throws { try roundTrip(chunkSizeLog2: 16) }

    /// Compressed (format version 2) at every chunk size: files whose
    /// chunks alternate between text that compresses (stored as zstd
    /// frames) and random bytes that do not (stored raw), so every read
    /// crosses both kinds and the chunk table's offsets.
    func testRoundTrip_Zstd_AtEveryChunkSize() throws {
        for log2 in BundleFormat.chunkSizeLog2Range { try roundTrip(chunkSizeLog2: log2, compression: .zstd) }
    }

    /// The key-less read finds each file's key in the workspace's small
    /// cache. Reading more files than it has slots, interleaved, from several
    /// threads, must always use the right key: a stale or mixed-up slot
    /// would fail authentication or, worse, return another file's bytes.
    func testRead_WithoutKey_InterleavedFilesBeyondKeyCache() throws {
        let tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp")
        let source = tmp.appending("source")
        try FileTree.makeDirectory(source)
        var generator = SeededGenerator(seed: 77)
        let fileCount = 3 * ChunkWorkspace.cachedKeyCount + 1
        let contents = (0..<fileCount).map { generator.bytes(3 * 4096 + $0 * 97) }
        for (i, data) in contents.enumerated() {
            try FileTree.writeFile(tmp.appending("source/f\(i)"), data)
        }
        let bundle = tmp.appending("out.bundle")
        let key = TestSecrets.key(3)
        try packBundle(source: source, destination: bundle, chunkSizeLog2: 12, keys: [.rawKey(key)])
        let reader = try BundleReader.open(path: bundle, materials: [.rawKey(key)])
        let entries = try (0..<fileCount).map { try reader.entry(bytes("f\($0)")) }
        let failures = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            var rng = SeededGenerator(seed: UInt64(100 + thread))
            var buffer = [UInt8](repeating: 0, count: 5000)
            for _ in 0..<2000 {
                let file = Int(rng.next() % UInt64(fileCount))
                let offset = Int(rng.next() % UInt64(contents[file].count))
                let n = (try? buffer.withUnsafeMutableBytes { try reader.read(entries[file], fromOffset: UInt64(offset), into: $0) }) ?? -1
                let expected = min(buffer.count, contents[file].count - offset)
                if n != expected || !buffer[0..<max(n, 0)].elementsEqual(contents[file][offset..<(offset + max(n, 0))]) {
                    failures.withLock { $0 += 1 }
                }
            }
        }
        XCTAssertEqual(failures.withLock { $0 }, 0, "reads returned wrong bytes or failed")
    }

    // MARK: - The tree

    /// The tree for chunk size `cs`. Siblings are listed in the order the
    /// bundle must list them (by name bytes, as memcmp orders them), written
    /// out by hand; parents come before their children.
    ///
    /// With `compressible`, file contents alternate chunk by chunk between
    /// text (which compresses) and random bytes (which do not).
    static func tree(cs: Int, seed: UInt64, compressible: Bool = false) -> [Node] {
        var generator = SeededGenerator(seed: seed)
        func random(_ n: Int) -> [UInt8] {
            guard compressible else { return generator.bytes(n) }
            let words = ["encfs ", "chunk ", "table ", "zstd ", "frame ", "\n"].map { Array($0.utf8) }
            var out: [UInt8] = []
            out.reserveCapacity(n)
            while out.count < n {
                let inChunk = out.count / cs
                if inChunk % 2 == 0 {
                    out += words[Int(generator.next() % UInt64(words.count))]
                } else {
                    out += generator.bytes(min(cs - out.count % cs, n - out.count))
                }
            }
            return Array(out[0..<n])
        }
        let nonUTF8Dir: [UInt8] = [0xC3, 0x28] + bytes("-dir") // 0xC3 0x28 is an invalid UTF-8 sequence
        return [
            Node(path: bytes("Zebra"), content: .file(bytes("capital letters sort first\n")), mode: 0o644),
            Node(path: bytes("empty"), content: .file([]), mode: 0o600),
            Node(path: bytes("empty-dir"), content: .directory, mode: 0o1755),
            Node(path: bytes("exec.sh"), content: .file(bytes("#!/bin/sh\necho hi\n")), mode: 0o4755),
            Node(path: bytes("f-1"), content: .file(random(1)), mode: 0o644),
            Node(path: bytes("f-2cs+500"), content: .file(random(2 * cs + 500)), mode: 0o640),
            Node(path: bytes("f-5cs+123"), content: .file(random(5 * cs + 123)), mode: 0o444),
            Node(path: bytes("f-cs"), content: .file(random(cs)), mode: 0o644),
            Node(path: bytes("f-cs+1"), content: .file(random(cs + 1)), mode: 0o600),
            Node(path: bytes("f-cs-1"), content: .file(random(cs - 1)), mode: 0o2644),
            Node(path: bytes("link-bytes"), content: .symlink([0xFF, UInt8(ascii: "/"), 0xFE]), mode: 0o777),
            Node(path: bytes("link-dangling"), content: .symlink(bytes("does/not/exist")), mode: 0o777),
            Node(path: bytes("link-relative"), content: .symlink(bytes("nested/deeper/leaf.bin")), mode: 0o777),
            Node(path: bytes("name with spaces.txt"), content: .file(bytes("spaces\n")), mode: 0o644),
            Node(path: bytes("nested"), content: .directory, mode: 0o750),
            Node(path: nonUTF8Dir, content: .directory, mode: 0o755),
            Node(path: bytes("ünïcode.txt"), content: .file(bytes("composed ü\n")), mode: 0o644),
            Node(path: bytes("日本語.txt"), content: .file(random(3 * cs)), mode: 0o644),
            Node(path: [0xFF, 0xFE] + bytes("-raw"), content: .file(random(cs / 2 + 3)), mode: 0o600),
            Node(path: bytes("nested/deeper"), content: .directory, mode: 0o700),
            Node(path: bytes("nested/z-link-up"), content: .symlink(bytes("../f-1")), mode: 0o777),
            Node(path: bytes("nested/ünïcode-日本.txt"), content: .file(random(17)), mode: 0o664),
            Node(path: nonUTF8Dir + bytes("/inner.txt"), content: .file(random(cs + 7)), mode: 0o644),
            Node(path: bytes("nested/deeper/leaf.bin"), content: .file(random(2 * cs)), mode: 0o600),
        ]
    }

    /// mtime of node `i` (−1 for the root): distinct seconds, nanoseconds
    /// never zero.
    static func mtime(_ i: Int) -> (seconds: Int64, nanoseconds: UInt32) {
        (1_500_000_000 + 86_400 * Int64(i + 1), UInt32((i + 2) * 123_456_789 % 1_000_000_000))
    }

    static let rootMode: UInt16 = 0o711

    /// Creates `nodes` under `root` and sets modes and mtimes last (creating a
    /// child changes its directory's mtime).
    static func build(_ nodes: [Node], under root: [UInt8]) throws {
        for node in nodes {
            let path = join(root, node.path)
            switch node.content {
            case .file(let contents): try FileTree.writeFile(path, contents, mode: mode_t(node.mode))
            case .directory: try FileTree.makeDirectory(path, mode: mode_t(node.mode))
            case .symlink(let target): try FileTree.makeSymlink(path, target: target)
            }
        }
        try FileTree.setMode(root, mode_t(rootMode))
        for (i, node) in nodes.enumerated().reversed() {
            let t = mtime(i)
            try FileTree.setModificationTime(join(root, node.path), seconds: t.seconds, nanoseconds: Int(t.nanoseconds))
        }
        let t = mtime(-1)
        try FileTree.setModificationTime(root, seconds: t.seconds, nanoseconds: Int(t.nanoseconds))
    }

    // MARK: - The round trip

    private func roundTrip(chunkSizeLog2: UInt8, compression: CompressionMethod = .none) throws {
        let cs = 1 << Int(chunkSizeLog2)
        let tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp")
        let source = tmp.appending("source")
        let bundle = tmp.appending("out.bundle")
        try FileTree.makeDirectory(source)
        let nodes = Self.tree(cs: cs, seed: UInt64(chunkSizeLog2), compressible: compression != .none)
        try Self.build(nodes, under: source)
        let key = TestSecrets.key(1)
        let summary = try packBundle(source: source, destination: bundle, chunkSizeLog2: chunkSizeLog2, keys: [.rawKey(key)],
                                     compression: compression)

        var fileCount = 0, directoryCount = 0, symlinkCount = 0, fileBytes = 0
        for node in nodes {
            switch node.content {
            case .file(let c): fileCount += 1; fileBytes += c.count
            case .directory: directoryCount += 1
            case .symlink: symlinkCount += 1
            }
        }
        XCTAssertEqual(summary.files, fileCount)
        XCTAssertEqual(summary.directories, directoryCount)
        XCTAssertEqual(summary.symlinks, symlinkCount)
        XCTAssertEqual(summary.plaintextBytes, UInt64(fileBytes))
        XCTAssertEqual(summary.bundleBytes, UInt64(try FileTree.readFile(bundle).count))

        let reader = try BundleReader.open(path: bundle, materials: [.rawKey(key)])
        XCTAssertEqual(reader.header.layout.chunkSizeLog2, chunkSizeLog2)
        XCTAssertEqual(reader.header.features.compression, compression)
        XCTAssertEqual(reader.header.features.formatVersion, compression == .none ? BundleFormat.version : BundleFormat.version2)
        if compression != .none {
            // The text chunks shrank: some files have chunk tables, and the
            // bodies take less than they would sealed raw.
            XCTAssertLessThan(reader.index.storedFileBytes, reader.index.totalFileBytes, "nothing compressed")
            let tables = try (0..<reader.index.count).filter { try reader.index.entry(at: $0).hasChunkTable }
            XCTAssertGreaterThan(tables.count, 3)
        }
        XCTAssertEqual(reader.index.count, nodes.count + 1)
        XCTAssertEqual(reader.index.fileCount, fileCount)
        XCTAssertEqual(reader.index.totalFileBytes, UInt64(fileBytes))

        // The root.
        let root = try reader.index.root
        XCTAssertEqual(root.kind, .directory)
        XCTAssertEqual(root.mode, Self.rootMode)
        XCTAssertEqual(root.mtimeSeconds, Self.mtime(-1).seconds)
        XCTAssertEqual(root.mtimeNanoseconds, Self.mtime(-1).nanoseconds)

        // Index order: breadth-first, each directory's children together in
        // the listed order.
        var bfs: [[UInt8]] = [[]]
        var next = 0
        while next < bfs.count {
            bfs += nodes.filter { $0.parent == bfs[next] }.map(\.path)
            next += 1
        }
        XCTAssertEqual(try (0..<reader.index.count).map { try reader.index.path(of: reader.index.entry(at: $0)).debugPath }, bfs.map(\.debugPath))

        for (i, node) in nodes.enumerated() {
            let what = node.path.debugPath
            let entry = try reader.entry(node.path)
            XCTAssertEqual(try reader.index.name(of: entry), node.name, what)
            XCTAssertEqual(try reader.index.path(of: entry), node.path, what)
            XCTAssertEqual(entry.mode, node.mode, "\(what): mode")
            XCTAssertEqual(entry.mtimeSeconds, Self.mtime(i).seconds, "\(what): mtime")
            XCTAssertEqual(entry.mtimeNanoseconds, Self.mtime(i).nanoseconds, "\(what): mtime nanoseconds")
            switch node.content {
            case .file(let contents):
                XCTAssertEqual(entry.kind, .file, what)
                XCTAssertEqual(entry.fileSize, UInt64(contents.count), what)
                try checkReads(reader, entry, contents, cs: cs, seed: UInt64(i), what: what)
            case .directory:
                XCTAssertEqual(entry.kind, .directory, what)
                let listed = try entry.children.map { try reader.index.name(of: reader.index.entry(at: $0)) }
                XCTAssertEqual(listed.map(\.debugPath), nodes.filter { $0.parent == node.path }.map(\.name.debugPath), "\(what): listing")
                XCTAssertThrowsBundleError(.isADirectory) { try reader.fileKey(for: entry) }
            case .symlink(let target):
                XCTAssertEqual(entry.kind, .symlink, what)
                XCTAssertEqual(try reader.index.withSymlinkTarget(of: entry) { Array($0) }, target, what)
                XCTAssertEqual(entry.targetLength, target.count, what)
            }
        }
        let rootListing = try root.children.map { try reader.index.name(of: reader.index.entry(at: $0)) }
        XCTAssertEqual(rootListing.map(\.debugPath), nodes.filter { $0.parent.isEmpty }.map(\.name.debugPath), "root listing")

        // Lookups that must fail.
        XCTAssertThrowsBundleError(.notFound) { try reader.entry(bytes("no-such-file")) }
        XCTAssertThrowsBundleError(.notFound) { try reader.entry(bytes("zebra")) } // names are case-sensitive
        XCTAssertThrowsBundleError(.notADirectory) { try reader.entry(bytes("f-1/x")) }
        XCTAssertThrowsBundleError(.notADirectory) { try reader.entry(bytes("f-1/..")) }
        XCTAssertThrowsBundleError(.notADirectory) { try reader.entry(bytes("f-1/.")) }
        XCTAssertThrowsBundleError(.notADirectory) { try reader.entry(bytes("nested/../f-1/../nested")) }
        XCTAssertEqual(try reader.entry(bytes("nested/../f-1")).position, try reader.entry(bytes("f-1")).position)
    }

    /// Reads `entry` front to back at several step sizes, then at random
    /// offsets, and compares with `contents`.
    ///
    /// Every read decrypts whole chunks, so a byte-by-byte walk of a large
    /// file costs one chunk decryption per byte. Walks that would decrypt more
    /// than 128 MiB read only windows of ±256 bytes around every chunk
    /// boundary and the file's ends instead (where the off-by-one bugs live).
    private func checkReads(_ reader: BundleReader, _ entry: IndexEntry, _ contents: [UInt8], cs: Int, seed: UInt64, what: String) throws {
        let key = try reader.fileKey(for: entry)
        let size = contents.count
        var failures = 0
        func read(at offset: Int, count: Int) throws {
            var buffer = [UInt8](repeating: 0xA5, count: count)
            let n = try buffer.withUnsafeMutableBytes { try reader.read(entry, key: key, fromOffset: UInt64(offset), into: $0) }
            let expected = offset >= size ? 0 : min(count, size - offset)
            // memcmp: element-wise comparison is slow in debug builds. Past
            // the count returned, the buffer must be untouched (spot-checked).
            let ok = n == expected && (n == 0 || Self.equal(buffer, 0, contents, offset, count: n))
                && (n == count || (buffer[n] == 0xA5 && buffer[count - 1] == 0xA5))
            if !ok {
                failures += 1
                if failures <= 5 { XCTFail("\(what): read of \(count) at \(offset) returned \(n) (expected \(expected)) or wrong bytes") }
            }
        }

        for step in [1, 7, 4096, cs - 1, cs, cs + 1, max(size, 1)] {
            if (size / step + 1) * cs <= 128 << 20 {
                var offset = 0
                while offset < size {
                    try read(at: offset, count: step)
                    offset += step
                }
            } else {
                var offsets: Set<Int> = []
                for boundary in Array(stride(from: 0, through: size, by: cs)) + [size] {
                    let low = max(0, boundary - 256) / step * step
                    for offset in stride(from: low, through: min(size - 1, boundary + 256), by: step) { offsets.insert(offset) }
                }
                for offset in offsets.sorted() { try read(at: offset, count: step) }
            }
            try read(at: size, count: step) // at end of file: 0 bytes
        }

        var generator = SeededGenerator(seed: seed)
        for _ in 0..<100 {
            try read(at: Int.random(in: 0...(size + 2), using: &generator), count: Int.random(in: 0...(3 * cs), using: &generator))
        }
        try read(at: size + 1_000_000, count: 10)
        XCTAssertEqual(try reader.contents(of: entry), contents, what)
    }

    /// `a[i..<i+count] == b[j..<j+count]`, by memcmp.
    static func equal(_ a: [UInt8], _ i: Int, _ b: [UInt8], _ j: Int, count: Int) -> Bool {
        a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in memcmp(pa.baseAddress! + i, pb.baseAddress! + j, count) == 0 } }
    }
}
