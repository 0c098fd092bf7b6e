import CryptCore
import Dispatch
@testable import EncFSCore
import Synchronization
import XCTest
import SharedTestSupport

/// Format version 2: when it is written, compressed chunks and their
/// tables, what a key holder's edits of tables, methods and frames run
/// into, and zstd frames that would inflate past their chunk.
final class CompressedBundleTests: XCTestCase {
    private var tmp: TemporaryDirectory!
    private let key = TestSecrets.key(14)

    override func setUpWithError() throws {
        tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp")
    }

    /// Text that zstd shrinks well, `n` bytes.
    private func text(_ n: Int, seed: UInt64) -> [UInt8] {
        var generator = SeededGenerator(seed: seed)
        let words = ["alpha ", "beta ", "gamma ", "delta ", "chunk\n", "{\"k\": 1}, "].map { Array($0.utf8) }
        var out: [UInt8] = []
        while out.count < n { out += words[Int(generator.next() % UInt64(words.count))] }
        return Array(out[0..<n])
    }

    private func pack(_ files: [String: [UInt8]], compression: CompressionMethod, level: Int = 3,
                      chunkSizeLog2: UInt8 = 12) throws -> (path: [UInt8], summary: PackSummary) {
        let source = tmp.appending("source-\(files.count)-\(compression.name)-\(level)")
        try FileTree.makeDirectory(source)
        for (name, data) in files.sorted(by: { $0.key < $1.key }) {
            let path = join(source, bytes(name))
            if let slash = name.lastIndex(of: "/") {
                let dir = join(source, bytes(String(name[..<slash])))
                if !FileTree.exists(dir) { try FileTree.makeDirectory(dir) }
            }
            try FileTree.writeFile(path, data)
        }
        let path = tmp.appending("out-\(files.count)-\(compression.name)-\(level).bundle")
        var options = PackOptions()
        options.chunkSizeLog2 = chunkSizeLog2
        options.keys = [.rawKey(key)]
        options.scrypt = .testing
        options.compression = compression
        options.compressionLevel = level
        // These tests edit the flat index (one sealed message); the paged
        // index has its own (PagedIndexTests).
        options.indexLayout = .flat
        let summary = try BundleWriter.pack(source: source, destination: path, options: options) { message, path in
            XCTFail("unexpected warning: \(message) (\(path.debugPath))")
        }
        return (path, summary)
    }

    private func open(_ path: [UInt8]) throws -> BundleReader { try BundleReader.open(path: path, materials: [.rawKey(key)]) }

    // MARK: - Which version is written

    func testPack_UncompressedWithoutDuplicates_StaysVersion1() throws {
        let (path, summary) = try pack(["a.txt": text(9000, seed: 1), "b.txt": text(100, seed: 2)], compression: .none)
        let file = try FileTree.readFile(path)
        XCTAssertEqual(Array(file[8..<10]), [1, 0], "format version")
        XCTAssertEqual(Array(file[34..<40]), [0, 0, 0, 0, 0, 0], "reserved bytes of version 1")
        XCTAssertEqual(summary.formatVersion, 1)
        let reader = try open(path)
        XCTAssertEqual(reader.header.features, .version1)
        XCTAssertEqual(try reader.contents(of: bytes("a.txt")), text(9000, seed: 1))
        XCTAssertFalse(try reader.entry(bytes("a.txt")).hasChunkTable)
    }

    func testPack_Zstd_WritesVersion2WithMethodAndLevel() throws {
        let (path, summary) = try pack(["a.txt": text(20000, seed: 1)], compression: .zstd, level: 7)
        let file = try FileTree.readFile(path)
        XCTAssertEqual(Array(file[8..<10]), [2, 0], "format version")
        XCTAssertEqual(Array(file[34..<40]), [1, 7, 0, 0, 0, 0], "method zstd, level 7")
        XCTAssertEqual(summary.formatVersion, 2)
        let reader = try open(path)
        XCTAssertEqual(reader.header.features.compression, .zstd)
        XCTAssertEqual(reader.header.features.compressionLevel, 7)
        let entry = try reader.entry(bytes("a.txt"))
        XCTAssertTrue(entry.hasChunkTable)
        XCTAssertLessThan(try reader.index.storedSize(of: entry), 20000 / 4, "text compresses to under a quarter")
        XCTAssertEqual(try reader.contents(of: entry), text(20000, seed: 1))
    }

    /// Random bytes do not shrink: every chunk is stored raw, and the file
    /// needs no table (its chunks lie at fixed offsets).
    func testPack_Zstd_IncompressibleFileStoredRawWithoutTable() throws {
        var generator = SeededGenerator(seed: 9)
        let random = generator.bytes(3 * 4096 + 5)
        let (path, _) = try pack(["r.bin": random], compression: .zstd)
        let reader = try open(path)
        let entry = try reader.entry(bytes("r.bin"))
        XCTAssertFalse(entry.hasChunkTable)
        XCTAssertEqual(try reader.index.storedSize(of: entry), UInt64(random.count + 4 * 16))
        XCTAssertEqual(try reader.contents(of: entry), random)
    }

    /// Several threads reading compressed files at random offsets at once,
    /// through the reader's pooled workspaces (each with its own zstd
    /// context and frame buffer): every read returns the right bytes.
    func testRead_Concurrent_CompressedFiles() throws {
        var generator = SeededGenerator(seed: 31)
        let files = (0..<5).map { i in
            i % 2 == 0 ? text(40_000 + 997 * i, seed: UInt64(i)) : generator.bytes(3 * 4096 + i)
        }
        var tree: [String: [UInt8]] = [:]
        for (i, data) in files.enumerated() { tree["f\(i)"] = data }
        let (path, _) = try pack(tree, compression: .zstd)
        let reader = try open(path)
        let entries = try (0..<files.count).map { try reader.entry(bytes("f\($0)")) }
        XCTAssertTrue(entries[0].hasChunkTable)
        let failures = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            var rng = SeededGenerator(seed: UInt64(200 + thread))
            var buffer = [UInt8](repeating: 0, count: 9000)
            for _ in 0..<1000 {
                let file = Int(rng.next() % UInt64(files.count))
                let offset = Int(rng.next() % UInt64(files[file].count))
                let count = 1 + Int(rng.next() % UInt64(buffer.count))
                let n = (try? buffer.withUnsafeMutableBytes {
                    try reader.read(entries[file], fromOffset: UInt64(offset), into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<count]))
                }) ?? -1
                let expected = min(count, files[file].count - offset)
                if n != expected || !buffer[0..<max(n, 0)].elementsEqual(files[file][offset..<(offset + max(n, 0))]) {
                    failures.withLock { $0 += 1 }
                }
            }
        }
        XCTAssertEqual(failures.withLock { $0 }, 0, "reads returned wrong bytes or failed")
    }

    // MARK: - Deduplication

    /// Three paths with one content and a fourth that differs in its last
    /// byte: the bundle holds two bodies, counted by its size and found by
    /// searching it for the first body's sealed bytes.
    func testDedupe_IdenticalFilesStoredOnce() throws {
        var generator = SeededGenerator(seed: 21)
        let content = generator.bytes(1 << 20)
        var other = content
        other[other.count - 1] ^= 0xFF
        let (path, summary) = try pack(["a": content, "dir/b": content, "dir/c": content, "d": other], compression: .none)
        XCTAssertEqual(summary.sharedFiles, 2)
        XCTAssertEqual(summary.sharedBytes, 2 << 20)
        XCTAssertEqual(summary.formatVersion, 2, "a bundle with shared bodies is version 2")
        let reader = try open(path)
        XCTAssertEqual(reader.header.features.compression, .none)
        let layout = reader.header.layout
        // Size arithmetic: the data region holds exactly two sealed bodies.
        XCTAssertEqual(reader.header.indexOffset, 2 * layout.ciphertextSize(forPlaintextSize: 1 << 20))
        XCTAssertEqual(reader.index.storedFileBytes, 2 * layout.ciphertextSize(forPlaintextSize: 1 << 20))
        XCTAssertEqual(reader.index.distinctFileBytes, 2 << 20)
        XCTAssertEqual(reader.index.totalFileBytes, 4 << 20)
        let a = try reader.entry(bytes("a")), b = try reader.entry(bytes("dir/b")), c = try reader.entry(bytes("dir/c"))
        let d = try reader.entry(bytes("d"))
        for shared in [b, c] {
            XCTAssertEqual(shared.payloadOffset, a.payloadOffset)
            XCTAssertEqual(shared.fileID, a.fileID)
        }
        XCTAssertNotEqual(d.payloadOffset, a.payloadOffset)
        XCTAssertNotEqual(d.fileID, a.fileID)
        // The first sealed chunk of the shared body is in the file once.
        let file = try FileTree.readFile(path)
        let start = reader.header.headerLength + Int(a.payloadOffset)
        let needle = Array(file[start..<(start + 64)])
        var found = 0
        var at = 0
        while at + needle.count <= file.count {
            if file[at] == needle[0], Array(file[at..<(at + needle.count)]) == needle { found += 1 }
            at += 1
        }
        XCTAssertEqual(found, 1, "the shared body is stored once")
        for (name, want) in [("a", content), ("dir/b", content), ("dir/c", content), ("d", other)] {
            XCTAssertEqual(try reader.contents(of: bytes(name)), want, name)
        }
        // verify accepts the shared ids and checks the body once.
        XCTAssertTrue(try reader.index.filesSharingIDs().isEmpty)
        let report = try BundleVerifier.verify(reader)
        XCTAssertTrue(report.damaged.isEmpty)
        XCTAssertEqual(report.files, 4)
        XCTAssertEqual(report.chunks, 2 * 256, "two bodies of 256 chunks")
    }

    func testDedupe_CompressedBodiesShareTheirTable() throws {
        let content = text(50_000, seed: 5)
        let (path, summary) = try pack(["x/one.json": content, "y/two.json": content], compression: .zstd)
        XCTAssertEqual(summary.sharedFiles, 1)
        let reader = try open(path)
        let one = try reader.entry(bytes("x/one.json")), two = try reader.entry(bytes("y/two.json"))
        XCTAssertTrue(one.hasChunkTable)
        XCTAssertEqual(one.chunkTableOffset, two.chunkTableOffset)
        XCTAssertEqual(reader.index.storedFileBytes, try reader.index.storedSize(of: one))
        XCTAssertEqual(reader.header.indexOffset, reader.index.storedFileBytes, "one body in the data region")
        XCTAssertEqual(try reader.contents(of: two), content)
        XCTAssertTrue(try BundleVerifier.verify(reader).damaged.isEmpty)
    }

    /// Two files with one id but different bodies (an index a key holder
    /// wrote): one key and nonce sequence over two plaintexts. verify still
    /// reports it, dedupe or not.
    func testVerify_SharedIDWithAnotherBody_StillReported() throws {
        let content = text(10_000, seed: 3)
        let (path, _) = try pack(["a": content, "b": content, "c": text(10_000, seed: 4)], compression: .none)
        let before = try open(path)
        let a = try before.entry(bytes("a")), c = try before.entry(bytes("c"))
        try KeyHolderEdits.editIndex(path, reader: before) { plain in
            let from = KeyHolderEdits.record(a.position) + 48, to = KeyHolderEdits.record(c.position) + 48
            plain.replaceSubrange(to..<(to + 16), with: plain[from..<(from + 16)])
        }
        let reader = try open(path)
        let pairs = try reader.index.filesSharingIDs()
        XCTAssertEqual(pairs.map { [$0.first.position, $0.duplicate.position] }, [[a.position, c.position]])
    }

    /// Shared bodies are a version 2 feature: in a version 1 index two
    /// files at one place overlap, whatever their ids.
    func testOpen_Version1IndexWithSharedBody_Refused() throws {
        let (path, _) = try pack(["a": text(5000, seed: 1), "b": text(5000, seed: 2)], compression: .none)
        let before = try open(path)
        XCTAssertEqual(before.header.features, .version1)
        let a = try before.entry(bytes("a")), b = try before.entry(bytes("b"))
        try KeyHolderEdits.editIndex(path, reader: before) { plain in
            let from = KeyHolderEdits.record(a.position), to = KeyHolderEdits.record(b.position)
            plain.replaceSubrange((to + 40)..<(to + 64), with: plain[(from + 40)..<(from + 64)]) // first and file id
        }
        XCTAssertThrowsBundleError(.corruptIndex) { try self.open(path) }
    }

    /// A version 2 index may repeat a body only field for field: a record
    /// that starts where another body starts but claims another size, or
    /// starts inside another body, is refused (each repeat is checked
    /// against the body it names, not against every file's range).
    func testOpen_Version2RepeatThatDiffersFromItsBody_Refused() throws {
        let shared = text(9000, seed: 3)
        let (path, _) = try pack(["a": shared, "b": shared, "c": text(7000, seed: 4)], compression: .none)
        let original = try FileTree.readFile(path)
        for edit in ["size", "start"] {
            try FileTree.writeFile(path, original)
            let before = try open(path)
            XCTAssertTrue(before.header.features.allowsSharedBodies, edit)
            let b = try before.entry(bytes("b"))
            XCTAssertNoThrow(try self.open(path), edit)
            try KeyHolderEdits.editIndex(path, reader: before) { plain in
                let at = KeyHolderEdits.record(b.position) + (edit == "size" ? 32 : 40)
                let value = plain[at..<(at + 8)].withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
                let changed = edit == "size" ? value - 1 : value + 16
                plain.replaceSubrange(at..<(at + 8), with: withUnsafeBytes(of: changed.littleEndian) { Array($0) })
            }
            XCTAssertThrowsBundleError(.corruptIndex, edit) { try self.open(path) }
        }
    }

    /// A signed compressed bundle with a shared body: the signature's chunk
    /// digest (taken by the packer over the payload it wrote, each body
    /// once) is what verify finds hashing each distinct body once.
    func testSign_CompressedSharedBodies_ChunkDigestMatches() throws {
        let content = text(20_000, seed: 9)
        let source = tmp.appending("signed-source")
        try FileTree.makeDirectory(source)
        for name in ["one", "two", "three"] { try FileTree.writeFile(join(source, bytes(name)), name == "two" ? text(5000, seed: 1) : content) }
        let path = tmp.appending("signed.bundle")
        let signer = try SigningKey.generate()
        var options = PackOptions()
        options.chunkSizeLog2 = 12
        options.keys = [.rawKey(key)]
        options.compression = .zstd
        options.signingKey = signer
        let summary = try BundleWriter.pack(source: source, destination: path, options: options) { message, _ in XCTFail(message) }
        XCTAssertEqual(summary.sharedFiles, 1)
        let reader = try BundleReader.open(path: path, materials: [.rawKey(key)], options: OpenOptions(origin: OriginPolicy(signers: [signer.publicKey])))
        XCTAssertEqual(try BundleVerifier.verify(reader).matchesSignature(of: reader.header), true)
    }

    // MARK: - Rekeying

    /// Removing a slot re-encrypts every distinct body once (frames re-sealed
    /// as they are, with their encoding): the payload keeps its layout, the
    /// result opens with the kept key only, reads back, and verifies intact.
    func testRekey_RemovingASlot_ReencryptsCompressedSharedBodies() throws {
        let content = text(30_000, seed: 6)
        var generator = SeededGenerator(seed: 7)
        let files = ["a.json": content, "b/a.json": content, "noise": generator.bytes(9000)]
        let source = tmp.appending("rekey-source")
        try FileTree.makeDirectory(source)
        try FileTree.makeDirectory(join(source, bytes("b")))
        for (name, data) in files { try FileTree.writeFile(join(source, bytes(name)), data) }
        let path = tmp.appending("rekey.bundle")
        let other = TestSecrets.key(15)
        var options = PackOptions()
        options.chunkSizeLog2 = 12
        options.keys = [.rawKey(key), .rawKey(other)]
        options.compression = .zstd
        _ = try BundleWriter.pack(source: source, destination: path, options: options) { message, _ in XCTFail(message) }
        let before = try open(path)
        let removed = try XCTUnwrap(before.header.keySlots.last?.fingerprint)
        var changes = BundleRekeyer.Changes()
        changes.remove = [removed]
        changes.openedWith = [.rawKey(key)]
        _ = try BundleRekeyer.rekey(path: path, reader: before, changes: changes)
        let after = try open(path)
        XCTAssertNotEqual(after.header.bundleID, before.header.bundleID, "re-encrypted under a new content key")
        XCTAssertEqual(after.header.features, before.header.features)
        XCTAssertEqual(after.header.indexOffset, before.header.indexOffset)
        XCTAssertThrowsBundleError(.wrongKey(slotKinds: ["raw-key"])) { try BundleReader.open(path: path, materials: [.rawKey(other)]) }
        for (name, data) in files { XCTAssertEqual(try after.contents(of: bytes(name)), data, name) }
        let report = try BundleVerifier.verify(after)
        XCTAssertTrue(report.damaged.isEmpty)
        XCTAssertTrue(try after.index.filesSharingIDs().isEmpty)
    }

    // MARK: - Tampering by a key holder

    /// A table entry's compressed flag flipped: the entry no longer
    /// describes a chunk the format allows (a frame as long as a raw chunk,
    /// or a raw chunk shorter than its plaintext).
    func testOpen_ChunkTableMethodFlagFlipped_Refused() throws {
        let (path, _) = try pack(["t.txt": text(5 * 4096, seed: 8)], compression: .zstd)
        let reader = try open(path)
        let entry = try reader.entry(bytes("t.txt"))
        try KeyHolderEdits.editIndex(path, reader: reader) { plain in
            let at = KeyHolderEdits.strings(reader) + Int(entry.chunkTableOffset) + 2 * 8 + 7
            plain[at] ^= 0x80
        }
        let error = XCTAssertThrowsBundleError(.corruptIndex) { try self.open(path) }
        XCTAssertEqual(error?.message, "corrupted index: file \(entry.position) has an invalid chunk table entry for chunk 2")
    }

    /// A table boundary moved by one byte between two compressed chunks:
    /// the table is still well formed, but both chunks fail authentication
    /// (their sealed bytes are not what was sealed), and reading says which.
    func testRead_ChunkTableBoundaryMoved_ChunkFailsAuthentication() throws {
        let (path, _) = try pack(["t.txt": text(5 * 4096, seed: 8)], compression: .zstd)
        let reader = try open(path)
        let entry = try reader.entry(bytes("t.txt"))
        try KeyHolderEdits.editIndex(path, reader: reader) { plain in
            let at = KeyHolderEdits.strings(reader) + Int(entry.chunkTableOffset) + 1 * 8
            KeyHolderEdits.storeLE64(KeyHolderEdits.le64(plain, at) + 1, into: &plain, at: at)
        }
        let edited = try open(path)
        XCTAssertEqual(try edited.chunk(0, of: entry), Array(text(5 * 4096, seed: 8)[0..<4096]), "chunk 0 is untouched")
        XCTAssertThrowsBundleError(.corruptChunk(entry: entry.position, chunk: 1)) { try edited.chunk(1, of: entry) }
        XCTAssertThrowsBundleError(.corruptChunk(entry: entry.position, chunk: 2)) { try edited.chunk(2, of: entry) }
        let report = try BundleVerifier.verify(edited)
        XCTAssertEqual(report.damaged.first?.chunks, [1, 2])
    }

    /// The method is bound into the header MAC and the index's associated
    /// data: a key holder who rewrites the header with another method (MAC
    /// and all) loses the index.
    func testOpen_HeaderMethodChangedByKeyHolder_IndexRefused() throws {
        let (path, _) = try pack(["t.txt": text(9000, seed: 8)], compression: .zstd)
        let reader = try open(path)
        let h = reader.header
        for features in [BundleFeatures(formatVersion: 2, compression: .none, compressionLevel: 0), .version1] {
            let changed = BundleHeader(bundleID: h.bundleID, layout: h.layout, slots: h.slots, payloadLength: h.payloadLength,
                                       indexOffset: h.indexOffset, indexLength: h.indexLength, features: features)
            try SignedBundles.rewriteHeader(path, changed, keys: reader.keys)
            XCTAssertThrowsBundleError(.corruptIndex) { try self.open(path) }
        }
    }

    /// Unknown methods and levels out of range of a version 2 header are
    /// refused before any key is tried (bytes 36 … 39, the paged index's
    /// page 0 length: PagedIndexTests).
    func testParse_Version2HeaderFields_Checked() throws {
        let (path, _) = try pack(["t.txt": text(9000, seed: 8)], compression: .zstd)
        let good = try FileTree.readFile(path)
        for (offset, value, message) in [(34, UInt8(2), "unknown compression method 2"), (35, 0, "compression level 0 out of range"),
                                         (35, 20, "compression level 20 out of range")] {
            var bad = good
            bad[offset] = value
            let error = XCTAssertThrowsBundleError(.corruptHeader) { _ = try bad.withUnsafeBytes { try BundleHeader.parse(UnsafeRawBufferPointer(rebasing: $0[0..<self.headerLength(good)])) } }
            XCTAssertEqual(error?.message, "corrupted bundle header: \(message)")
        }
        var future = good
        future[8] = 3
        XCTAssertThrowsBundleError(.unsupportedVersion(3)) { _ = try future.withUnsafeBytes { try BundleHeader.parse(UnsafeRawBufferPointer(rebasing: $0[0..<self.headerLength(good)])) } }
    }

    private func headerLength(_ file: [UInt8]) -> Int { Int(file[12]) | Int(file[13]) << 8 | Int(file[14]) << 16 }

    /// The chunk codec binds how a chunk is stored: a frame sealed as zstd
    /// does not open as raw, nor the other way round, nor in an
    /// uncompressed bundle's codec.
    func testCodec_EncodingBoundIntoAssociatedData() throws {
        let bundleID = [UInt8](repeating: 7, count: 16), fileID = [UInt8](repeating: 9, count: 16)
        let fileKey = try [UInt8](repeating: 1, count: 32).withUnsafeBytes { try SymmetricKey(copying: $0) }
        let compressed = try ChunkCodec(bundleID: bundleID, compressed: true)
        let plain = try ChunkCodec(bundleID: bundleID)
        let data = text(100, seed: 1)
        var sealed = [UInt8](repeating: 0, count: data.count + 16)
        var opened = [UInt8](repeating: 0, count: data.count)
        try fileID.withUnsafeBytes { id in
            try data.withUnsafeBytes { d in
                try sealed.withUnsafeMutableBytes { try compressed.seal(key: fileKey, fileID: id, chunk: 0, last: true, encoding: .zstd, plaintext: d, into: $0) }
            }
            try sealed.withUnsafeBytes { s in
                try opened.withUnsafeMutableBytes { o in
                    XCTAssertTrue(try compressed.open(key: fileKey, fileID: id, chunk: 0, last: true, encoding: .zstd, sealed: s, into: o))
                    XCTAssertFalse(try compressed.open(key: fileKey, fileID: id, chunk: 0, last: true, encoding: .raw, sealed: s, into: o))
                    XCTAssertFalse(try plain.open(key: fileKey, fileID: id, chunk: 0, last: true, sealed: s, into: o))
                }
            }
        }
    }

    // MARK: - Decompression bombs

    /// A frame that inflates past the buffer fails and writes nothing past
    /// it; so do a frame one byte short, trailing bytes and garbage.
    func testDecompress_NeverInflatesPastTheChunk() throws {
        let compressor = try ChunkCompressor(level: 3)
        let decompressor = try ChunkDecompressor()
        let chunk = 4096
        func frame(_ data: [UInt8]) -> [UInt8] {
            var out = [UInt8](repeating: 0, count: data.count)
            let n = data.withUnsafeBytes { d in out.withUnsafeMutableBytes { compressor.compress(d, into: $0) } }
            return Array(out[0..<(n ?? 0)])
        }
        func inflate(_ frame: [UInt8], into count: Int) -> (ok: Bool, guardIntact: Bool) {
            var buffer = [UInt8](repeating: 0xA5, count: count + 64)
            let ok = frame.withUnsafeBytes { f in
                buffer.withUnsafeMutableBytes { decompressor.decompress(f, into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<count])) }
            }
            return (ok, buffer[count...].allSatisfy { $0 == 0xA5 })
        }
        let bomb = frame([UInt8](repeating: 0, count: 1 << 20))
        XCTAssertLessThan(bomb.count, 200)
        XCTAssertEqual(inflate(bomb, into: chunk).ok, false)
        XCTAssertEqual(inflate(bomb, into: chunk).guardIntact, true)
        let exact = frame(text(chunk, seed: 2))
        XCTAssertEqual(inflate(exact, into: chunk).ok, true)
        XCTAssertEqual(inflate(exact, into: chunk - 1).ok, false, "more than the chunk")
        XCTAssertEqual(inflate(exact, into: chunk + 1).ok, false, "fewer bytes than the chunk")
        XCTAssertEqual(inflate(exact + [0], into: chunk).ok, false, "trailing byte")
        XCTAssertEqual(inflate(Array(exact.dropLast()), into: chunk).ok, false, "truncated frame")
        XCTAssertEqual(inflate(text(64, seed: 3), into: chunk).ok, false, "not a frame")
        XCTAssertEqual(inflate([], into: chunk).ok, false, "empty")
    }

    /// Through the reader: a key holder re-seals a chunk with a frame of
    /// the same stored length that inflates to far more than the chunk.
    /// It authenticates, then fails to inflate: the chunk is damaged (EIO),
    /// and nothing past the caller's buffer is written.
    func testRead_AuthenticatedBombFrame_ChunkIsDamaged() throws {
        let content = text(3 * 4096, seed: 12)
        let (path, _) = try pack(["t.txt": content], compression: .zstd)
        let reader = try open(path)
        let entry = try reader.entry(bytes("t.txt"))
        var tableBytes = [UInt8](repeating: 0, count: 4 * 8)
        let (range, encoding) = try tableBytes.withUnsafeMutableBytes { buffer in
            let window = try reader.index.chunkTableWindow(of: entry, chunks: 1..<2, into: buffer)
            return (reader.header.layout.storedRange(ofChunk: 1, in: window), reader.header.layout.storedEncoding(ofChunk: 1, in: window))
        }
        XCTAssertEqual(encoding, .zstd)
        let frameLength = Int(range.count) - 16
        let frame = try XCTUnwrap(try CompressibleData.bombFrame(length: frameLength, tails: 2 * frameLength),
                                  "no frame of \(frameLength) bytes found")
        let codec = try ChunkCodec(bundleID: reader.header.bundleID, compressed: true)
        let fileKey = try reader.fileKey(for: entry)
        var sealed = [UInt8](repeating: 0, count: frame.count + 16)
        try entry.withFileID { id in
            try frame.withUnsafeBytes { f in
                try sealed.withUnsafeMutableBytes { try codec.seal(key: fileKey, fileID: id, chunk: 1, last: false, encoding: .zstd, plaintext: f, into: $0) }
            }
        }
        try SignedBundles.overwrite(path, at: reader.header.headerLength + Int(entry.payloadOffset + range.lowerBound), with: sealed)
        let edited = try open(path)
        XCTAssertThrowsBundleError(.corruptChunk(entry: entry.position, chunk: 1)) { try edited.chunk(1, of: entry) }
        XCTAssertEqual(try edited.chunk(2, of: entry), Array(content[8192...]))
        XCTAssertEqual(try BundleVerifier.verify(edited).damaged.first?.chunks, [1])
    }
}
