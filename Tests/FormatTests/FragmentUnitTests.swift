import CryptCore
@testable import EncFSCore
import Synchronization
import XCTest
import SharedTestSupport

/// Fragments cut into units larger than a chunk (header flag bits 8…15,
/// docs/FORMAT.md "Fragment units"): round trips at several chunk and unit
/// sizes, the unit written only when it differs from the chunk size, the
/// unit's range and its binding to the index, a key holder's edits of a
/// descriptor (outside the data, a slice past its unit, a fragment longer
/// than its unit) and a workspace that inflates a unit once for all its
/// slices.
final class FragmentUnitTests: XCTestCase {
    private var tmp: TemporaryDirectory!
    private let key = TestSecrets.key(33)

    override func setUpWithError() throws { tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp") }
    override func tearDown() { tmp = nil }

    /// Text that zstd shrinks well, `n` bytes.
    private func text(_ n: Int, seed: UInt64) -> [UInt8] { CompressibleData.sourceText(n, seed: seed) }

    private func pack(_ files: [(String, [UInt8])], name: String = "b", chunkSizeLog2: UInt8 = 12, unitLog2: UInt8?,
                      threshold: Int? = nil) throws -> (path: [UInt8], summary: PackSummary) {
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
        options.keys = [.rawKey(key)]
        options.scrypt = .testing
        options.compression = .zstd
        options.fragmentThreshold = threshold
        options.fragmentUnitLog2 = unitLog2
        let summary = try BundleWriter.pack(source: source, destination: path, options: options) { message, path in
            XCTFail("unexpected warning: \(message) (\(path.debugPath))")
        }
        return (path, summary)
    }

    private func open(_ path: [UInt8]) throws -> BundleReader { try BundleReader.open(path: path, materials: [.rawKey(key)]) }

    /// Reads `entry` in pieces of `step` bytes with one workspace, as a
    /// mount worker does.
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

    /// Small files of three kinds in three directories: about `total`
    /// bytes in files below `threshold`, a quarter of them incompressible.
    private func smallFiles(total: Int, threshold: Int, seed: UInt64) -> [(String, [UInt8])] {
        var sizes = SeededGenerator(seed: seed)
        var files: [(String, [UInt8])] = []
        var sum = 0
        var i = 0
        while sum < total {
            let size = 1 + Int(sizes.next() % UInt64(threshold - 1))
            let data = i % 4 == 0 ? sizes.bytes(size) : text(size, seed: seed &+ UInt64(i))
            files.append(("d\(i % 3)/f\(i).\(["c", "h", "txt"][i % 3])", data))
            sum += size
            i += 1
        }
        return files
    }

    // MARK: - Round trips

    /// Units from twice the chunk size to 1 MiB: fragments are filled past
    /// one chunk, the header says the unit, every file reads back whole and
    /// in pieces (slices at unit and chunk boundaries among them), and
    /// verify finds every unit intact.
    func testRoundTrip_UnitsLargerThanTheChunk() throws {
        for (chunkLog2, unitLog2) in [(UInt8(12), UInt8(13)), (12, 16), (14, 20), (16, 18), (19, 20)] {
            let (cs, unit) = (1 << Int(chunkLog2), 1 << Int(unitLog2))
            let threshold = FragmentPacker.defaultThreshold(chunkSize: UInt64(cs), unitSize: UInt64(unit))
            XCTAssertEqual(threshold, cs, "files below a whole chunk go into larger units")
            var files = smallFiles(total: 2 * unit + unit / 2, threshold: threshold, seed: UInt64(chunkLog2) * 100 + UInt64(unitLog2))
            files += [("empty", []), ("big.bin", text(2 * cs + 5, seed: 4)), ("at.c", text(threshold, seed: 5))]
            let label = "chunk 2^\(chunkLog2), unit 2^\(unitLog2)"
            let (path, summary) = try pack(files, name: "c\(chunkLog2)u\(unitLog2)", chunkSizeLog2: chunkLog2, unitLog2: unitLog2)
            XCTAssertEqual(Array(try FileTree.readFile(path)[10..<12]), [1, unitLog2], "header flags, \(label)")
            XCTAssertGreaterThanOrEqual(summary.fragments, 3, "about 2.5 units of small files, \(label)")
            let reader = try open(path)
            XCTAssertEqual(reader.header.fragmentLayout.chunkSize, UInt64(unit), label)
            var largest: UInt64 = 0
            for (name, data) in files {
                let entry = try reader.entry(bytes(name))
                XCTAssertEqual(entry.isFragmentSlice, !data.isEmpty && data.count < threshold, "\(name), \(label)")
                XCTAssertEqual(try reader.contents(of: entry), data, "\(name), \(label)")
                XCTAssertEqual(try readInPieces(reader, entry, step: 1000), data, "\(name) in pieces, \(label)")
                guard entry.isFragmentSlice else { continue }
                let fragment = try reader.index.body(of: entry).body
                XCTAssertTrue(fragment.isFragmentBody)
                XCTAssertLessThanOrEqual(fragment.fileSize, UInt64(unit), "a fragment is one unit, \(label)")
                XCTAssertEqual(reader.index.layout(of: fragment).chunkSize, UInt64(unit), label)
                largest = max(largest, fragment.fileSize)
            }
            XCTAssertGreaterThan(largest, UInt64(cs), "fragments filled past one chunk, \(label)")
            let report = try BundleVerifier.verify(reader)
            XCTAssertTrue(report.damaged.isEmpty, label)
            XCTAssertEqual(report.files, files.count, label)
            XCTAssertNoThrow(try reader.index.checkWholeIndex(), label)
        }
    }

    /// A unit of the chunk size or less is the chunk size: the bundle is
    /// written as before fragment units (flag bits 8…15 clear), fragments
    /// one chunk each.
    func testUnitAtOrBelowTheChunk_WritesTheFormerForm() throws {
        let files = smallFiles(total: 40_000, threshold: 8192, seed: 7)
        for unitLog2 in [UInt8(14), 12] {
            let (path, summary) = try pack(files, name: "u\(unitLog2)", chunkSizeLog2: 14, unitLog2: unitLog2)
            XCTAssertEqual(Array(try FileTree.readFile(path)[10..<12]), [1, 0], "unit 2^\(unitLog2)")
            let reader = try open(path)
            XCTAssertEqual(reader.header.fragmentLayout, reader.header.layout)
            XCTAssertGreaterThanOrEqual(summary.fragments, 3, "40 KB of small files in 16 KiB fragments")
            for (name, data) in files { XCTAssertEqual(try reader.contents(of: bytes(name)), data, name) }
        }
    }

    /// A unit past 1 MiB is refused before anything is written.
    func testUnitAbove1MiB_Refused() throws {
        XCTAssertThrowsBundleError(.invalidChunkSize(log2: 21)) {
            _ = try pack([("a.c", text(100, seed: 1))], unitLog2: 21)
        }
        XCTAssertFalse(FileTree.exists(tmp.appending("b.bundle")))
    }

    // MARK: - The header field

    /// Flag bits 8…15 hold the unit only with fragments, above the chunk
    /// size and at most 2^20; anything else is a corrupt header.
    func testHeaderUnit_ParsedOnlyInRange() throws {
        let zstdPaged: [UInt8] = [1, 3, 0x40, 0, 0, 0]
        func parse(_ flags: UInt16, chunk: UInt8) throws -> BundleFeatures {
            try zstdPaged.withUnsafeBytes { try BundleFeatures.parse(version: 2, flags: flags, chunkSizeLog2: chunk, bytes: $0) }
        }
        for (flags, chunk, unit) in [(UInt16(0x0001), UInt8(16), UInt8(0)), (0x1001, 12, 16), (0x1401, 19, 20), (0x0D01, 12, 13)] {
            XCTAssertEqual(try parse(flags, chunk: chunk).fragmentUnitLog2, unit, "flags 0x\(String(flags, radix: 16))")
            XCTAssertEqual(try parse(flags, chunk: chunk).headerFlags, flags, "written back as read")
        }
        for (flags, chunk) in [(UInt16(0x1000), UInt8(12)), (0x1001, 16), (0x1001, 18), (0x1501, 12), (0xFF01, 12), (0x0201, 12),
                               (0x1003, 12)] {
            XCTAssertThrowsBundleError(.corruptHeader, "flags 0x\(String(flags, radix: 16)), chunk 2^\(chunk)") {
                _ = try parse(flags, chunk: chunk)
            }
        }
    }

    /// The unit is under the header MAC and the index's associated data: a
    /// key holder who changes it (and re-MACs the header) gets an index
    /// that no longer opens, so fragments are never cut at another size.
    func testHeaderUnit_BoundToTheIndex() throws {
        let (path, _) = try pack(smallFiles(total: 20_000, threshold: 2048, seed: 3), unitLog2: 14)
        let original = try FileTree.readFile(path)
        let reader = try open(path)
        let f = reader.header.features
        for unit in [UInt8(0), 13, 15] {
            let changed = BundleHeader(bundleID: reader.header.bundleID, layout: reader.header.layout, slots: reader.header.slots,
                                       payloadLength: reader.header.payloadLength, indexOffset: reader.header.indexOffset,
                                       indexLength: reader.header.indexLength,
                                       features: BundleFeatures(formatVersion: f.formatVersion, compression: f.compression,
                                                                compressionLevel: f.compressionLevel,
                                                                pagedIndexHeadLength: f.pagedIndexHeadLength, hasFragments: true,
                                                                fragmentUnitLog2: unit))
            try SignedBundles.rewriteHeader(path, changed, keys: reader.keys)
            XCTAssertThrowsBundleError(.corruptIndex, "unit 2^\(unit)") { try self.open(path) }
            try FileTree.writeFile(path, original)
        }
        // The flag bits changed without the MAC: the header fails.
        var bytes = original
        bytes[11] = 15
        try FileTree.writeFile(path, bytes)
        XCTAssertThrowsBundleError(.headerAuthenticationFailed) { try self.open(path) }
    }

    // MARK: - A key holder's edits

    /// One unit of 16 KiB holding sixteen slices of 1,000 incompressible
    /// bytes (raw, so edits of lengths meet the table's rule), and one of
    /// twelve slices of text (a zstd frame).
    private func tamperable(name: String = "b") throws -> (path: [UInt8], files: [(String, [UInt8])]) {
        var generator = SeededGenerator(seed: 77)
        var files = (0..<16).map { ("f\(String(format: "%02d", $0)).bin", generator.bytes(1000)) }
        files += (0..<12).map { ("t\(String(format: "%02d", $0)).txt", text(1000, seed: UInt64($0))) }
        let (path, summary) = try pack(files, name: name, unitLog2: 14, threshold: 1024)
        XCTAssertEqual(summary.fragments, 2, "28 slices of 1,000 bytes in units of 16 KiB, by extension")
        return (path, files)
    }

    private func le64(_ b: [UInt8], _ at: Int) -> UInt64 { KeyHolderEdits.le64(b, at) }

    /// Edits the descriptor of `name`'s fragment (the table stream is the
    /// index's last page in a tree this small) and writes the index back
    /// sealed.
    private func editDescriptor(_ path: [UInt8], of name: String, _ edit: (inout [UInt8], Int) -> Void) throws {
        let reader = try open(path)
        let entry = try reader.entry(bytes(name))
        var image = try PagedIndexImage(path, reader: reader)
        XCTAssertEqual(image.pages.count, 2, "one record page and one table page")
        edit(&image.pages[1], Int(entry.chunkTableOffset))
        try image.write(path)
    }

    /// A descriptor whose unit starts near the end of the data region: the
    /// unit would end past it, a corrupt index, on read and in verify.
    func testTamper_DescriptorPointsOutside_CorruptIndex() throws {
        let (path, files) = try tamperable()
        let dataLength = try open(path).header.indexOffset
        try editDescriptor(path, of: "f03.bin") { page, at in KeyHolderEdits.storeLE64(dataLength - 100, into: &page, at: at) }
        let reader = try open(path)
        XCTAssertThrowsBundleError(.corruptIndex) { _ = try reader.contents(of: bytes("f03.bin")) }
        XCTAssertThrowsBundleError(.corruptIndex) { _ = try BundleVerifier.verify(reader) }
        XCTAssertEqual(try reader.contents(of: bytes("t03.txt")), files[19].1, "the other unit still reads")
    }

    /// A slice moved past the end of its unit's plaintext: a corrupt index,
    /// never bytes of another unit.
    func testTamper_SlicePastTheUnit_CorruptIndex() throws {
        let (path, _) = try tamperable()
        let reader = try open(path)
        let entry = try reader.entry(bytes("f05.bin"))
        let fragment = try reader.index.body(of: entry).body
        var image = try PagedIndexImage(path, reader: reader)
        let at = PagedIndexImage.record(entry.position)
        KeyHolderEdits.storeLE64(fragment.fileSize - 10, into: &image.pages[0], at: at + 40)
        try image.write(path)
        XCTAssertThrowsBundleError(.corruptIndex) { _ = try self.open(path).contents(of: bytes("f05.bin")) }
    }

    /// A fragment said to be longer than its unit needs a second unit its
    /// table does not have (a raw unit: its entry no longer fits, a
    /// corrupt index), or its one frame no longer authenticates as the
    /// last chunk at that length (a damaged chunk): never other bytes.
    func testTamper_FragmentLongerThanItsUnit_CorruptIndexOrChunk() throws {
        let (path, _) = try tamperable()
        try editDescriptor(path, of: "f00.bin") { page, at in KeyHolderEdits.storeLE64(16384 + 100, into: &page, at: at + 8) }
        let reader = try open(path)
        XCTAssertThrowsBundleError(.corruptIndex) { _ = try reader.contents(of: bytes("f00.bin")) }
        let (path2, _) = try tamperable(name: "frames")
        let t0 = try open(path2).entry(bytes("t00.txt"))
        try editDescriptor(path2, of: "t00.txt") { page, at in
            KeyHolderEdits.storeLE64(16384, into: &page, at: at + 8)
        }
        XCTAssertThrowsBundleError(.corruptChunk(entry: t0.position, chunk: 0)) { _ = try self.open(path2).contents(of: bytes("t00.txt")) }
    }

    // MARK: - Signatures and rekeying

    /// A rekey that re-encrypts re-seals each unit once under its new key
    /// (at the unit's size, not the chunk's), and the new signature's
    /// chunk digest covers the units.
    func testSignedRekey_ResealsUnits() throws {
        let signer = try SigningKey.generate()
        let second = TestSecrets.key(34)
        var files = smallFiles(total: 40_000, threshold: 2048, seed: 9)
        files.append(("big.bin", text(20000, seed: 99)))
        let source = tmp.appending("source-signed")
        try FileTree.makeDirectory(source)
        for dir in ["d0", "d1", "d2"] { try FileTree.makeDirectory(join(source, bytes(dir))) }
        for (file, data) in files { try FileTree.writeFile(join(source, bytes(file)), data) }
        let path = tmp.appending("signed.bundle")
        var options = PackOptions()
        options.chunkSizeLog2 = 12
        options.keys = [.rawKey(key), .rawKey(second)]
        options.scrypt = .testing
        options.compression = .zstd
        options.fragmentUnitLog2 = 15
        options.signingKey = signer
        let summary = try BundleWriter.pack(source: source, destination: path, options: options) { message, _ in XCTFail(message) }
        XCTAssertGreaterThan(summary.fragments, 1)
        let origin = OriginPolicy(signers: [signer.publicKey])
        let reader = try BundleReader.open(path: path, materials: [.rawKey(key)], origin: origin)
        XCTAssertEqual(reader.header.features.fragmentUnitLog2, 15)
        XCTAssertEqual(try BundleVerifier.verify(reader).matchesSignature(of: reader.header), true)
        var changes = BundleRekeyer.Changes()
        changes.openedWith = [.rawKey(key)]
        changes.scrypt = .testing
        changes.remove = [try XCTUnwrap(reader.header.keySlots.last).fingerprint]
        changes.signingKey = signer
        _ = try BundleRekeyer.rekey(path: path, reader: reader, changes: changes)
        let rekeyed = try BundleReader.open(path: path, materials: [.rawKey(key)], origin: origin)
        XCTAssertEqual(rekeyed.header.features.fragmentUnitLog2, 15, "the unit is kept")
        XCTAssertNotEqual(rekeyed.header.bundleID, reader.header.bundleID, "re-encrypted")
        for (name, data) in files { XCTAssertEqual(try rekeyed.contents(of: bytes(name)), data, name) }
        let report = try BundleVerifier.verify(rekeyed)
        XCTAssertTrue(report.damaged.isEmpty)
        XCTAssertEqual(try report.matchesSignature(of: rekeyed.header), true)
    }

    // MARK: - The workspace's cache


    /// One worker reading every small file of a unit fetches and inflates
    /// the unit once: the other slices are copies from its cache.
    func testWorkspace_InflatesAUnitOnceForAllItsSlices() throws {
        let files = (0..<40).map { ("s/f\(String(format: "%02d", $0)).c", text(500 + 13 * $0, seed: UInt64($0))) }
        let (path, summary) = try pack(files, chunkSizeLog2: 12, unitLog2: 16)
        XCTAssertEqual(summary.fragments, 1, "about 30 KB of small files in one 64 KiB unit")
        let source = CountingMemorySource(try FileTree.readFile(path))
        let reader = try BundleReader.open(source: source, materials: [.rawKey(key)])
        let entries = try files.map { try reader.entry(bytes($0.0)) }
        // Load the index pages first, so only unit fetches are counted.
        for entry in entries { _ = try reader.index.storedSize(of: entry) }
        let workspace = try reader.makeWorkspace()
        let before = source.reads
        for (entry, (name, data)) in zip(entries, files) {
            var out = [UInt8](repeating: 0, count: data.count + 10)
            let n = try out.withUnsafeMutableBytes { try reader.read(entry, fromOffset: 0, into: $0, using: workspace) }
            XCTAssertEqual(Array(out[0..<n]), data, name)
        }
        XCTAssertEqual(source.reads - before, 1, "one fetch of the unit for 40 slices")
    }
}
