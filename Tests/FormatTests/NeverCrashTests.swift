import CryptCore
@testable import EncFSCore
import XCTest
import SharedTestSupport

/// Whatever the bytes, parsing and opening throw a `BundleError` and never
/// trap: a trap in the mount daemon takes the whole mount down. Thousands of
/// deterministic random and mutated inputs; a trap ends the test process,
/// which fails the run.
final class NeverCrashTests: XCTestCase {
    private var tmp: TemporaryDirectory!
    private let key = TestSecrets.key(21)
    /// A small real bundle (raw-key and passphrase slots, 4 KiB chunks).
    private var original: [UInt8] = []
    private var map: BundleMap!

    override func setUpWithError() throws {
        tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp")
        let source = tmp.appending("source")
        try FileTree.makeDirectory(source)
        var generator = SeededGenerator(seed: 5)
        try FileTree.writeFile(join(source, bytes("two-chunks.bin")), generator.bytes(4096 + 10))
        try FileTree.writeFile(join(source, bytes("empty")), [])
        try FileTree.makeDirectory(join(source, bytes("d")))
        try FileTree.writeFile(join(source, bytes("d/a")), bytes("a\n"))
        try FileTree.writeFile(join(source, bytes("d/b")), bytes("bb\n"))
        try FileTree.makeSymlink(join(source, bytes("d/link")), target: bytes("../empty"))
        try FileTree.makeDirectory(join(source, bytes("d/sub")))
        let path = tmp.appending("original.bundle")
        try packBundle(source: source, destination: path, keys: [.rawKey(key), .passphrase(TestSecrets.passphrase("fuzz"))])
        original = try FileTree.readFile(path)
        map = BundleMap(original)
    }

    override func tearDown() { tmp = nil }

    /// Runs `body`; anything thrown but a `BundleError` fails the test
    /// (reported for the first few cases only).
    private var unexpected = 0
    private func expectBundleErrorsOnly(_ what: @autoclosure () -> String, _ body: () throws -> Void) {
        do {
            try body()
        } catch is BundleError {
        } catch {
            unexpected += 1
            if unexpected <= 5 { XCTFail("\(what()): threw a non-BundleError \(error)") }
        }
    }

    // MARK: - Header

    func testParseHeader_RandomBytes_OnlyThrowsBundleError() {
        var generator = SeededGenerator(seed: 1)
        for round in 0..<2000 {
            var buffer = generator.bytes(Int.random(in: 0...400, using: &generator))
            if round % 2 == 0, buffer.count >= 16 {
                // Past the magic and version checks, header length = buffer length.
                buffer.replaceSubrange(0..<8, with: BundleFormat.magic)
                buffer[8] = 1
                buffer[9] = 0
                buffer.storeLE(UInt32(buffer.count), at: 12)
                if buffer.count > 33 { buffer[33] = UInt8.random(in: 1...3, using: &generator) }
            }
            expectBundleErrorsOnly("random header \(round)") {
                _ = try buffer.withUnsafeBytes { try BundleHeader.parse($0) }
            }
        }
    }

    /// Mutations of a real header, with an unknown slot kind added (readers
    /// must skip kinds they do not know). Whatever parses is unlocked with
    /// the raw key (never a passphrase: a mutated slot may legitimately ask
    /// for seconds of scrypt).
    func testParseHeader_MutatedHeader_OnlyThrowsBundleError() throws {
        let real = try original.prefix(map.headerLength).withUnsafeBytes { try BundleHeader.parse($0) }
        let withUnknown = BundleHeader(bundleID: real.bundleID, layout: real.layout,
                                       slots: real.slots + [KeySlot(kindCode: 9, body: [1, 2, 3])],
                                       payloadLength: real.payloadLength, indexOffset: real.indexOffset, indexLength: real.indexLength)
        let seeds: [[UInt8]] = [Array(original.prefix(map.headerLength)), withUnknown.serializedBody() + [UInt8](repeating: 0, count: 32)]
        var mutator = Mutator(seed: 2)
        var parsed = 0
        for round in 0..<3000 {
            var buffer = mutator.mutate(seeds[round % 2])
            if round % 3 != 0, buffer.count >= 16 { buffer.storeLE(UInt32(buffer.count), at: 12) }
            expectBundleErrorsOnly("mutated header \(round)") {
                let header = try buffer.withUnsafeBytes { try BundleHeader.parse($0) }
                parsed += 1
                _ = header.bundleLength
                _ = header.slots.map { ($0.kindName, $0.keyID, $0.scryptParameters) }
                _ = try header.unlock(with: [.rawKey(key)])
            }
        }
        XCTAssertGreaterThan(parsed, 100, "too few mutations got past the parser to test anything after it")
    }

    // MARK: - Whole bundles

    /// Mutated bundles, written to disk and opened with the raw key; every
    /// file of whatever opens is read.
    func testOpen_MutatedBundles_OnlyThrowBundleError() throws {
        var mutator = Mutator(seed: 3)
        let path = tmp.appending("mutated.bundle")
        let regions: [Range<Int>] = [0..<64, 64..<map.headerLength, map.macOffset..<map.headerLength,
                                     map.headerLength..<map.indexOffset, map.indexOffset..<original.count, 0..<original.count]
        var opened = 0
        for round in 0..<1500 {
            let mutated = mutator.mutate(original, focus: regions[round % regions.count], maximum: 3)
            try FileTree.writeFile(path, mutated)
            expectBundleErrorsOnly("mutated bundle \(round)") {
                let reader = try BundleReader.open(path: path, materials: [.rawKey(key)])
                opened += 1
                try readEverything(reader)
            }
        }
        XCTAssertGreaterThan(opened, 50, "too few mutated bundles opened to exercise reads")
    }

    private func readEverything(_ reader: BundleReader) throws {
        for position in 0..<reader.index.count {
            let entry = try reader.index.entry(at: position)
            guard entry.kind == .file else { continue }
            expectBundleErrorsOnly("read entry \(position)") {
                let key = try reader.fileKey(for: entry)
                var buffer = [UInt8](repeating: 0, count: min(Int(entry.fileSize), 1 << 16) + 3)
                for offset in [0, 1, 4095, 4096, entry.fileSize &- 1, entry.fileSize] {
                    _ = try buffer.withUnsafeMutableBytes { try reader.read(entry, key: key, fromOffset: offset, into: $0) }
                }
            }
        }
    }

    // MARK: - Index

    /// The index is authenticated, so only someone holding the key can
    /// write a hostile one; it is still validated field by field. Mutated
    /// index plaintexts must be refused with `corruptIndex` or pass
    /// validation; those that pass are resealed into the bundle, which must
    /// then open and read (or fail) without trapping.
    func testIndex_MutatedPlaintext_OnlyThrowsCorruptIndex() throws {
        let reader = try BundleReader.open(path: tmp.appending("original.bundle"), materials: [.rawKey(key)])
        let header = reader.header
        let gcm = try AESGCM()
        let aad = IndexBuilder.associatedData(header)
        let sealed = Array(original[map.indexOffset...])
        let plaintext = try sealed.withUnsafeBytes {
            try gcm.open(key: reader.keys.indexKey, nonce: IndexBuilder.zeroNonce, aad: aad, sealed: $0)
        }.withUnsafeBytes { Array($0) }
        let records = BundleIndex.headerSize..<(BundleIndex.headerSize + reader.index.count * IndexEntry.recordSize)

        var mutator = Mutator(seed: 4)
        var accepted = 0
        let path = tmp.appending("resealed.bundle")
        for round in 0..<4000 {
            let mutated = mutator.mutate(plaintext, focus: round % 4 == 0 ? 0..<32 : records, maximum: 2)
            var index: BundleIndex?
            do {
                index = try BundleIndex(plaintext: SecureBytes(copying: mutated), layout: header.layout, dataLength: header.indexOffset)
            } catch BundleError.corruptIndex {
                continue
            } catch {
                XCTFail("mutated index \(round): threw \(error), expected corruptIndex")
                continue
            }
            guard let index, mutated.count == plaintext.count, mutated != plaintext else { continue }
            accepted += 1
            try exercise(index)
            // Reseal (same length, so the header stays valid) and read.
            let resealed = try gcm.seal(key: reader.keys.indexKey, nonce: IndexBuilder.zeroNonce, aad: aad,
                                        plaintext: SecureBytes(copying: mutated))
            try FileTree.writeFile(path, Array(original[..<map.indexOffset]) + resealed)
            expectBundleErrorsOnly("resealed index \(round)") {
                try readEverything(BundleReader.open(path: path, materials: [.rawKey(key)]))
            }
        }
        XCTAssertGreaterThan(accepted, 20, "too few mutated indexes passed validation to exercise the reader")
    }

    /// Regression: the root record's name offset was not checked (only its
    /// length, 0), so an index with a large one validated and `name(of:)`
    /// on the root then trapped.
    func testIndex_RootNameOffsetNonZero_FailsCorruptIndex() throws {
        let reader = try BundleReader.open(path: tmp.appending("original.bundle"), materials: [.rawKey(key)])
        let sealed = Array(original[map.indexOffset...])
        var plaintext = try sealed.withUnsafeBytes {
            try AESGCM().open(key: reader.keys.indexKey, nonce: IndexBuilder.zeroNonce, aad: IndexBuilder.associatedData(reader.header), sealed: $0)
        }.withUnsafeBytes { Array($0) }
        plaintext.storeLE(UInt32(0x00FF_FFFF), at: BundleIndex.headerSize + 8) // record 0, name offset
        XCTAssertThrowsBundleError(.corruptIndex) {
            try BundleIndex(plaintext: SecureBytes(copying: plaintext), layout: reader.header.layout, dataLength: reader.header.indexOffset)
        }
    }

    /// Every accessor on every entry of an index that passed validation.
    private func exercise(_ index: BundleIndex) throws {
        for position in 0..<index.count {
            let entry = try index.entry(at: position)
            let path = try index.path(of: entry)
            _ = try index.name(of: entry)
            _ = try index.entry(inode: UInt64(position) + 1)
            if let found = try? index.resolve(path: path) {
                XCTAssertEqual(found.position, position, "resolve(path(of: entry)) found another entry")
            }
            switch entry.kind {
            case .directory:
                _ = index.subdirectoryCount(of: entry)
                for child in entry.children {
                    let name = try index.name(of: index.entry(at: child))
                    XCTAssertEqual(try name.withUnsafeBytes { try index.lookup($0, in: entry)?.position }, child)
                }
            case .file:
                _ = index.withFileID(of: entry) { Array($0) }
            case .symlink:
                _ = try index.withSymlinkTarget(of: entry) { Array($0) }
            }
        }
        _ = try index.entry(inode: 0)
        _ = try index.entry(inode: UInt64(index.count) + 1)
    }
}
