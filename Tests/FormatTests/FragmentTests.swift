import CryptCore
@testable import EncFSCore
import XCTest
import SharedTestSupport

/// Small files packed into shared fragments (format version 2 with
/// fragments, docs/FORMAT.md "Fragments"): round trips at every chunk
/// size and around the threshold, deduplication across fragments, the
/// header flag bound to the index, what a key holder's edits of slices and
/// descriptors run into, zstd bombs in a fragment chunk, and signatures and
/// rekeying over fragments.
final class FragmentTests: XCTestCase {
    private var tmp: TemporaryDirectory!
    private let key = TestSecrets.key(31)

    override func setUpWithError() throws { tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp") }
    override func tearDown() { tmp = nil }

    /// Text that zstd shrinks well, `n` bytes.
    private func text(_ n: Int, seed: UInt64) -> [UInt8] { CompressibleData.sourceText(n, seed: seed) }

    private func random(_ n: Int, seed: UInt64) -> [UInt8] {
        var generator = SeededGenerator(seed: seed)
        return generator.bytes(n)
    }

    private func pack(_ files: [(String, [UInt8])], name: String = "b", chunkSizeLog2: UInt8 = 12, threshold: Int? = nil,
                      keys: [KeyMaterial]? = nil, signingKey: SigningKey? = nil) throws -> (path: [UInt8], summary: PackSummary) {
        let source = tmp.appending("source-\(name)")
        try FileTree.makeDirectory(source)
        for (file, data) in files {
            if let slash = file.lastIndex(of: "/") {
                let dir = join(source, bytes(String(file[..<slash])))
                if !FileTree.exists(dir) { try FileTree.makeDirectory(dir) }
            }
            try FileTree.writeFile(join(source, bytes(file)), data)
        }
        let path = tmp.appending("\(name).bundle")
        var options = PackOptions()
        options.chunkSizeLog2 = chunkSizeLog2
        options.keys = keys ?? [.rawKey(key)]
        options.scrypt = .testing
        options.compression = .zstd
        options.fragmentThreshold = threshold
        // Fragments of one chunk, as before fragment units (FragmentUnitTests has larger ones).
        options.fragmentUnitLog2 = chunkSizeLog2
        options.signingKey = signingKey
        let summary = try BundleWriter.pack(source: source, destination: path, options: options) { message, path in
            XCTFail("unexpected warning: \(message) (\(path.debugPath))")
        }
        return (path, summary)
    }

    private func open(_ path: [UInt8]) throws -> BundleReader { try BundleReader.open(path: path, materials: [.rawKey(key)]) }

    /// Reads `entry` in pieces of `step` bytes through the mount's entry
    /// point (the workspace's caches: keys, inflated chunks).
    private func readInPieces(_ reader: BundleReader, _ entry: IndexEntry, step: Int) throws -> [UInt8] {
        let workspace = try reader.makeWorkspace()
        var out: [UInt8] = []
        var piece = [UInt8](repeating: 0, count: step)
        while true {
            let n = try piece.withUnsafeMutableBytes {
                try reader.read(entry, fromOffset: UInt64(out.count), into: $0, using: workspace)
            }
            if n == 0 { break }
            out += piece[0..<n]
        }
        return out
    }

    // MARK: - Round trips

    /// Every chunk size: files below, at and above the threshold, empty
    /// ones, many small files of several kinds in several directories and
    /// a file of several chunks, read whole and in pieces, and verified.
    func testRoundTrip_EveryChunkSize_AroundTheThreshold() throws {
        for log2 in BundleFormat.chunkSizeLog2Range {
            let cs = 1 << Int(log2)
            let threshold = FragmentPacker.defaultThreshold(chunkSize: UInt64(cs), unitSize: UInt64(cs))
            var files: [(String, [UInt8])] = [
                ("empty", []), ("one", [0x41]), ("below.c", text(threshold - 1, seed: 1)), ("at.c", text(threshold, seed: 2)),
                ("above.c", text(threshold + 1, seed: 3)), ("big.bin", text(2 * cs + 5, seed: 4)), ("d/empty.h", []),
            ]
            var sizes = SeededGenerator(seed: UInt64(log2))
            for i in 0..<24 {
                let size = 1 + Int(sizes.next() % UInt64(threshold - 1))
                let data = i % 5 == 0 ? random(size, seed: UInt64(i)) : text(size, seed: UInt64(i) + 10)
                files.append(("d\(i % 3)/f\(i).\(["c", "h", "txt"][i % 3])", data))
            }
            let (path, summary) = try pack(files, name: "cs\(log2)", chunkSizeLog2: log2)
            XCTAssertGreaterThan(summary.fragments, 0, "chunk size 2^\(log2)")
            XCTAssertEqual(summary.fragmentFiles, files.count { !$0.1.isEmpty && $0.1.count < threshold }, "chunk size 2^\(log2)")
            let reader = try open(path)
            XCTAssertTrue(reader.header.features.hasFragments)
            for (name, data) in files {
                let entry = try reader.entry(bytes(name))
                XCTAssertEqual(entry.isFragmentSlice, !data.isEmpty && data.count < threshold, "\(name), chunk size 2^\(log2)")
                XCTAssertEqual(entry.fileSize, UInt64(data.count), name)
                XCTAssertEqual(try reader.contents(of: entry), data, "\(name), chunk size 2^\(log2)")
                XCTAssertEqual(try readInPieces(reader, entry, step: 1000), data, "\(name) in pieces, chunk size 2^\(log2)")
            }
            // Past the end of a slice: nothing, not its neighbour's bytes.
            let below = try reader.entry(bytes("below.c"))
            var tail = [UInt8](repeating: 0, count: 64)
            XCTAssertEqual(try tail.withUnsafeMutableBytes { try reader.read(below, fromOffset: below.fileSize - 3, into: $0) }, 3)
            XCTAssertEqual(try tail.withUnsafeMutableBytes { try reader.read(below, fromOffset: below.fileSize, into: $0) }, 0)
            let report = try BundleVerifier.verify(reader)
            XCTAssertTrue(report.damaged.isEmpty, "chunk size 2^\(log2)")
            XCTAssertEqual(report.files, files.count)
            XCTAssertTrue(try reader.index.filesSharingIDs().isEmpty, "slices of one fragment are one body")
        }
    }

    /// A threshold of 0 packs no fragment: the bundle is written as before
    /// fragments, flag clear.
    func testThresholdZero_NoFragments_FlagClear() throws {
        let (path, summary) = try pack([("a.c", text(100, seed: 1)), ("b.c", text(200, seed: 2))], threshold: 0)
        XCTAssertEqual(summary.fragments, 0)
        let file = try FileTree.readFile(path)
        XCTAssertEqual(Array(file[10..<12]), [0, 0], "header flags")
        let reader = try open(path)
        XCTAssertFalse(reader.header.features.hasFragments)
        XCTAssertFalse(try reader.entry(bytes("a.c")).isFragmentSlice)
        XCTAssertEqual(try reader.contents(of: bytes("b.c")), text(200, seed: 2))
    }

    // MARK: - Deduplication

    /// Identical small files in different fragments share one slice; the
    /// bytes are stored once.
    func testDedupe_AcrossFragments() throws {
        // Incompressible slices of 900 bytes: four to a 4 KiB fragment.
        var files = (0..<16).map { ("a/f\($0).bin", random(900, seed: UInt64($0))) }
        files.append(("z/copy-of-0.dat", random(900, seed: 0)))
        files.append(("z/copy-of-15.dat", random(900, seed: 15)))
        let (path, summary) = try pack(files, threshold: 1024)
        XCTAssertEqual(summary.sharedFiles, 2)
        XCTAssertEqual(summary.sharedBytes, 1800)
        XCTAssertEqual(summary.fragments, 4, "16 distinct slices of 900 bytes, four to a fragment")
        let reader = try open(path)
        let first = try reader.entry(bytes("a/f0.bin")), last = try reader.entry(bytes("a/f15.bin"))
        XCTAssertNotEqual(first.chunkTableOffset, last.chunkTableOffset, "in different fragments")
        for (copy, original) in [("z/copy-of-0.dat", first), ("z/copy-of-15.dat", last)] {
            let entry = try reader.entry(bytes(copy))
            XCTAssertEqual(entry.chunkTableOffset, original.chunkTableOffset, copy)
            XCTAssertEqual(entry.sliceOffset, original.sliceOffset, copy)
            XCTAssertEqual(entry.fileID, original.fileID, copy)
            XCTAssertEqual(try reader.contents(of: entry), try reader.contents(of: original), copy)
        }
        XCTAssertEqual(reader.index.distinctFileBytes, 16 * 900)
        XCTAssertEqual(reader.index.totalFileBytes, 18 * 900)
        XCTAssertTrue(try BundleVerifier.verify(reader).damaged.isEmpty)
        XCTAssertNoThrow(try reader.index.checkWholeIndex())
    }

    // MARK: - The header flag

    func testHeaderFlag_SetAndBoundToTheIndex() throws {
        let (path, _) = try pack([("a.c", text(100, seed: 1)), ("b.c", text(3000, seed: 2))])
        XCTAssertEqual(Array(try FileTree.readFile(path)[10..<12]), [1, 0], "header flags: fragments")
        let reader = try open(path)
        // A key holder clears the flag and re-MACs the header: the index
        // was sealed for a header with it, and no longer opens.
        let f = reader.header.features
        let cleared = BundleHeader(bundleID: reader.header.bundleID, layout: reader.header.layout, slots: reader.header.slots,
                                   payloadLength: reader.header.payloadLength, indexOffset: reader.header.indexOffset,
                                   indexLength: reader.header.indexLength,
                                   features: BundleFeatures(formatVersion: f.formatVersion, compression: f.compression,
                                                            compressionLevel: f.compressionLevel,
                                                            pagedIndexHeadLength: f.pagedIndexHeadLength))
        try SignedBundles.rewriteHeader(path, cleared, keys: reader.keys)
        XCTAssertThrowsBundleError(.corruptIndex) { try self.open(path) }
    }

    /// The flag is refused where fragments cannot be: without compression,
    /// with a flat index, in version 1; other flags are unknown.
    func testHeaderFlag_RefusedOutsideCompressedPagedVersion2() throws {
        let zstdPaged: [UInt8] = [1, 3, 0x40, 0, 0, 0]
        XCTAssertNoThrow(try zstdPaged.withUnsafeBytes { try BundleFeatures.parse(version: 2, flags: 1, chunkSizeLog2: 12, bytes: $0) })
        for (version, feature, flags) in [(UInt16(2), [UInt8]([0, 0, 0x40, 0, 0, 0]), UInt16(1)), (2, [1, 3, 0, 0, 0, 0], 1),
                                          (1, [0, 0, 0, 0, 0, 0], 1), (2, zstdPaged, 2), (2, zstdPaged, 0x8001)] {
            XCTAssertThrowsBundleError(.corruptHeader, "version \(version), flags \(flags)") {
                try feature.withUnsafeBytes { try BundleFeatures.parse(version: version, flags: flags, chunkSizeLog2: 12, bytes: $0) }
            }
        }
    }

    // MARK: - A key holder's edits

    /// Three fragments of incompressible slices, and where things are.
    private func tamperable() throws -> (path: [UInt8], files: [(String, [UInt8])]) {
        let files = (0..<12).map { ("f\(String(format: "%02d", $0)).bin", random(1000, seed: UInt64($0) + 50)) }
        let (path, summary) = try pack(files, threshold: 1024)
        XCTAssertEqual(summary.fragments, 3)
        return (path, files)
    }

    /// Edits the record of `name` (all entries are on record page 1 of a
    /// tree this small) and writes the index back sealed.
    private func editRecord(_ path: [UInt8], _ name: String, _ edit: (inout [UInt8], Int) -> Void) throws {
        let reader = try open(path)
        let position = try reader.entry(bytes(name)).position
        var image = try PagedIndexImage(path, reader: reader)
        XCTAssertEqual(image.pages.count, 2, "one record page and one table page")
        edit(&image.pages[0], PagedIndexImage.record(position))
        try image.write(path)
    }

    private func le64(_ b: [UInt8], _ at: Int) -> UInt64 { KeyHolderEdits.le64(b, at) }

    /// A slice that reaches past its fragment's end: a corrupt index, on
    /// read and in verify, never other bytes.
    func testTamper_SliceOutsideItsFragment_CorruptIndex() throws {
        let (path, _) = try tamperable()
        try editRecord(path, "f05.bin") { page, at in KeyHolderEdits.storeLE64(le64(page, at + 40) + 3000, into: &page, at: at + 40) }
        let reader = try open(path)
        XCTAssertThrowsBundleError(.corruptIndex) { _ = try reader.contents(of: bytes("f05.bin")) }
        XCTAssertThrowsBundleError(.corruptIndex) { _ = try BundleVerifier.verify(reader) }
        XCTAssertEqual(try reader.contents(of: bytes("f04.bin")).count, 1000, "the other slices still read")
    }

    /// A file size longer than what its slice may hold (the slice length
    /// is the file size): a corrupt index.
    func testTamper_SizeLongerThanTheSlice_CorruptIndex() throws {
        let (path, _) = try tamperable()
        try editRecord(path, "f02.bin") { page, at in KeyHolderEdits.storeLE64(5000, into: &page, at: at + 32) }
        XCTAssertThrowsBundleError(.corruptIndex) { _ = try self.open(path).contents(of: bytes("f02.bin")) }
    }

    /// An empty slice is no slice: the record page fails its check.
    func testTamper_EmptySlice_CorruptIndex() throws {
        let (path, _) = try tamperable()
        try editRecord(path, "f02.bin") { page, at in KeyHolderEdits.storeLE64(0, into: &page, at: at + 32) }
        XCTAssertThrowsBundleError(.corruptIndex) { _ = try self.open(path).entry(bytes("f02.bin")) }
    }

    /// Two slices that overlap in one fragment: each reads authenticated
    /// bytes of that fragment, and verify refuses the index.
    func testTamper_OverlappingSlices_VerifyRefuses() throws {
        let (path, files) = try tamperable()
        let reader = try open(path)
        let (a, b) = (try reader.entry(bytes("f00.bin")), try reader.entry(bytes("f01.bin")))
        XCTAssertEqual(a.chunkTableOffset, b.chunkTableOffset, "one fragment")
        try editRecord(path, "f01.bin") { page, at in KeyHolderEdits.storeLE64(a.sliceOffset + 10, into: &page, at: at + 40) }
        let edited = try open(path)
        XCTAssertEqual(Array(try edited.contents(of: bytes("f01.bin"))[0..<990]), Array(files[0].1[10...]))
        XCTAssertThrowsBundleError(.corruptIndex) { try edited.index.checkWholeIndex() }
        XCTAssertThrowsBundleError(.corruptIndex) { _ = try BundleVerifier.verify(edited) }
    }

    /// A slice whose record names another fragment's descriptor keeps its
    /// own id: that fragment's chunk does not authenticate under it.
    func testTamper_SliceNamesAnotherFragment_ChunkDamaged() throws {
        let (path, _) = try tamperable()
        let reader = try open(path)
        let (a, z) = (try reader.entry(bytes("f00.bin")), try reader.entry(bytes("f11.bin")))
        XCTAssertNotEqual(a.chunkTableOffset, z.chunkTableOffset)
        try editRecord(path, "f00.bin") { page, at in page.storeLE(z.chunkTableOffset, at: at + 28) }
        let edited = try open(path)
        XCTAssertThrowsBundleError(.corruptChunk(entry: a.position, chunk: 0)) { _ = try edited.contents(of: bytes("f00.bin")) }
        XCTAssertThrowsBundleError(.corruptIndex) { try edited.index.checkWholeIndex() }
    }

    /// A descriptor head outside the table stream fails the record page;
    /// a flags byte with both bits set is no known form.
    func testTamper_DescriptorOutsideTableStreamOrBadFlags_CorruptIndex() throws {
        let (path, _) = try tamperable()
        let streamLength = try XCTUnwrap({ () throws -> UInt64 in
            guard case .paged(let store) = try open(path).index.storage else { return 0 }
            return store.directory.tableStreamLength
        }())
        try editRecord(path, "f03.bin") { page, at in page.storeLE(UInt32(streamLength - 8), at: at + 28) }
        XCTAssertThrowsBundleError(.corruptIndex) { _ = try self.open(path).entry(bytes("f03.bin")) }
        let (path2, _) = try pack([("a.c", text(100, seed: 1))], name: "flags")
        try editRecord(path2, "a.c") { page, at in page[at + 5] = 3 }
        XCTAssertThrowsBundleError(.corruptIndex) { _ = try self.open(path2).entry(bytes("a.c")) }
    }

    /// A descriptor whose fragment length is changed: a raw chunk no longer
    /// matches its table entry (a corrupt index); a frame inflates to
    /// another length than the descriptor says (a damaged chunk).
    func testTamper_DescriptorLengthChanged_RawIndexFrameChunk() throws {
        let (raw, _) = try tamperable()
        let (frames, _) = try pack((0..<8).map { ("t\($0).txt", text(400, seed: UInt64($0))) }, name: "frames", threshold: 1024)
        for (path, name, expected) in [(raw, "f00.bin", ExpectedBundleError.corruptIndex), (frames, "t0.txt", nil)] {
            let reader = try open(path)
            let entry = try reader.entry(bytes(name))
            var image = try PagedIndexImage(path, reader: reader)
            let at = Int(entry.chunkTableOffset) + 8
            KeyHolderEdits.storeLE64(le64(image.pages[1], at) - 1, into: &image.pages[1], at: at)
            try image.write(path)
            XCTAssertThrowsBundleError(expected ?? .corruptChunk(entry: entry.position, chunk: 0), name) {
                _ = try self.open(path).contents(of: bytes(name))
            }
        }
    }

    // MARK: - Bombs

    /// A key holder re-seals a fragment's chunk as a frame of the same
    /// stored length that inflates far past the fragment: damaged, and
    /// nothing past the caller's buffer is written.
    func testBomb_FragmentChunk_Damaged() throws {
        let files = (0..<8).map { ("t\($0).txt", text(400, seed: UInt64($0))) }
        let (path, _) = try pack(files, threshold: 1024)
        let reader = try open(path)
        let slice = try reader.entry(bytes("t3.txt"))
        let (fragment, _) = try reader.index.body(of: slice)
        var tableBytes = [UInt8](repeating: 0, count: 2 * 8)
        let (range, encoding) = try tableBytes.withUnsafeMutableBytes { buffer in
            let window = try reader.index.chunkTableWindow(of: fragment, chunks: 0..<1, into: buffer)
            return (reader.header.layout.storedRange(ofChunk: 0, in: window), reader.header.layout.storedEncoding(ofChunk: 0, in: window))
        }
        XCTAssertEqual(encoding, .zstd)
        let frameLength = Int(range.count) - 16
        let frame = try XCTUnwrap(try CompressibleData.bombFrame(length: frameLength, tails: 4 * frameLength),
                                  "no frame of \(frameLength) bytes found")
        let codec = try ChunkCodec(bundleID: reader.header.bundleID, compressed: true)
        let fragmentKey = try reader.fileKey(for: fragment)
        var sealed = [UInt8](repeating: 0, count: frame.count + 16)
        try fragment.withFileID { id in
            try frame.withUnsafeBytes { f in
                try sealed.withUnsafeMutableBytes {
                    try codec.seal(key: fragmentKey, fileID: id, chunk: 0, last: true, encoding: .zstd, plaintext: f, into: $0)
                }
            }
        }
        try SignedBundles.overwrite(path, at: reader.header.headerLength + Int(fragment.payloadOffset + range.lowerBound), with: sealed)
        let edited = try open(path)
        var buffer = [UInt8](repeating: 0xEE, count: 400 + 64)
        XCTAssertThrowsBundleError(.corruptChunk(entry: slice.position, chunk: 0)) {
            _ = try buffer.withUnsafeMutableBytes {
                try edited.read(slice, fromOffset: 0, into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<400]))
            }
        }
        XCTAssertEqual(Array(buffer[400...]), [UInt8](repeating: 0xEE, count: 64), "nothing written past the buffer")
        XCTAssertEqual(try BundleVerifier.verify(edited).damaged.map(\.chunks), [[0]])
    }

    // MARK: - Signatures and rekeying

    /// A signed bundle's chunk digest covers its fragments (written after
    /// every file's own body), and a rekey that re-encrypts re-seals them
    /// and signs again.
    func testSignatureAndRekey_CoverFragments() throws {
        let signer = try SigningKey.generate()
        let second = TestSecrets.key(32)
        var files = (0..<20).map { ("s/f\($0).c", text(300 + 37 * $0, seed: UInt64($0))) }
        files.append(("big.bin", text(20000, seed: 99)))
        let (path, summary) = try pack(files, keys: [.rawKey(key), .rawKey(second)], signingKey: signer)
        XCTAssertGreaterThan(summary.fragments, 0)
        let origin = OriginPolicy(signers: [signer.publicKey])
        let reader = try BundleReader.open(path: path, materials: [.rawKey(key)], origin: origin)
        XCTAssertEqual(try BundleVerifier.verify(reader).matchesSignature(of: reader.header), true)
        // A changed byte in the last fragment's chunk changes the digest.
        let victim = try reader.index.body(of: try reader.entry(bytes("s/f19.c"))).body
        var changes = BundleRekeyer.Changes()
        changes.openedWith = [.rawKey(key)]
        changes.scrypt = .testing
        changes.remove = [try XCTUnwrap(reader.header.keySlots.last).fingerprint]
        changes.signingKey = signer
        _ = try BundleRekeyer.rekey(path: path, reader: reader, changes: changes)
        let rekeyed = try BundleReader.open(path: path, materials: [.rawKey(key)], origin: origin)
        for (name, data) in files { XCTAssertEqual(try rekeyed.contents(of: bytes(name)), data, name) }
        let report = try BundleVerifier.verify(rekeyed)
        XCTAssertTrue(report.damaged.isEmpty)
        XCTAssertEqual(try report.matchesSignature(of: rekeyed.header), true)
        let position = rekeyed.header.headerLength + Int(victim.payloadOffset) + 2
        var byte = try FileTree.readFile(path)[position]
        byte ^= 1
        try SignedBundles.overwrite(path, at: position, with: [byte])
        let damaged = try BundleReader.open(path: path, materials: [.rawKey(key)])
        XCTAssertEqual(try BundleVerifier.verify(damaged).matchesSignature(of: damaged.header), false)
    }
}
