import CryptCore
@testable import EncFSCore
import XCTest
import SharedTestSupport

/// One modification per test, each refused with its exact `BundleError`.
///
/// The bundle (4 KiB chunks, a raw-key slot then a passphrase slot) is
/// packed once; every test writes a modified copy and opens it. Offsets
/// come from `BundleMap`, which reads the documented layout by hand.
final class TamperTests: XCTestCase {
    struct Fixture: Sendable {
        let bundle: [UInt8]
        let map: BundleMap
        /// Plaintext, index position and payload offset of each file.
        let files: [String: (contents: [UInt8], position: Int, first: UInt64)]
    }

    static let key = TestSecrets.key(7)
    static let passphrase = TestSecrets.passphrase("tamper test passphrase")
    static let slotKinds = ["raw-key", "passphrase"]

    /// multi.bin: 3 full chunks and a partial one; twin-a/twin-b: the same
    /// size (2 chunks), different contents.
    static let fixture: Result<Fixture, any Error> = Result {
        let tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp")
        let source = tmp.appending("source")
        try FileTree.makeDirectory(source)
        var generator = SeededGenerator(seed: 42)
        let contents: [String: [UInt8]] = [
            "multi.bin": generator.bytes(3 * 4096 + 100),
            "twin-a.bin": generator.bytes(5000),
            "twin-b.bin": generator.bytes(5000),
            "small.txt": bytes("small\n"),
        ]
        for (name, data) in contents { try FileTree.writeFile(join(source, bytes(name)), data) }
        let path = tmp.appending("original.bundle")
        var options = PackOptions()
        options.chunkSizeLog2 = 12
        options.keys = [.rawKey(key), .passphrase(passphrase)]
        options.scrypt = .testing
        _ = try BundleWriter.pack(source: source, destination: path, options: options) { _, _ in }
        let reader = try BundleReader.open(path: path, materials: [.rawKey(key)])
        var files: [String: (contents: [UInt8], position: Int, first: UInt64)] = [:]
        for (name, data) in contents {
            let entry = try reader.entry(bytes(name))
            files[name] = (data, entry.position, entry.payloadOffset)
        }
        let original = try FileTree.readFile(path)
        return Fixture(bundle: original, map: BundleMap(original), files: files)
    }

    private var tmp: TemporaryDirectory!
    private var fixture: Fixture!
    private var map: BundleMap { fixture.map }

    override func setUpWithError() throws {
        fixture = try Self.fixture.get()
        tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp")
    }

    override func tearDown() { tmp = nil }

    // MARK: - Helpers

    /// Writes a copy of the bundle changed by `edit`, and returns its path.
    private func tampered(_ name: String = "tampered.bundle", _ edit: (inout [UInt8]) -> Void) throws -> [UInt8] {
        var copy = fixture.bundle
        edit(&copy)
        XCTAssertNotEqual(copy, fixture.bundle, "the edit changed nothing")
        let path = tmp.appending(name)
        try FileTree.writeFile(path, copy)
        return path
    }

    /// An unmodified copy of the bundle.
    private func untamperedCopy() throws -> [UInt8] {
        let path = tmp.appending("copy.bundle")
        try FileTree.writeFile(path, fixture.bundle)
        return path
    }

    private func openWithKey(_ path: [UInt8]) throws -> BundleReader {
        try BundleReader.open(path: path, materials: [.rawKey(Self.key)])
    }

    private func openWithPassphrase(_ path: [UInt8]) throws -> BundleReader {
        try BundleReader.open(path: path, materials: [.passphrase(Self.passphrase)])
    }

    /// The entry of a fixture file in `reader` (at the position packed).
    private func file(_ name: String, in reader: BundleReader) throws -> IndexEntry {
        let entry = try reader.entry(bytes(name))
        XCTAssertEqual(entry.position, fixture.files[name]?.position)
        return entry
    }

    /// A byte offset inside the sealed chunk `chunk` of `name`: `at` counts
    /// from the chunk's start (negative: from its end, so −1 is the last
    /// tag byte). Every chunk before it is 4096 + 16 bytes.
    private func offset(of name: String, chunk: Int, at: Int) -> Int {
        let file = fixture.files[name]!
        let start = map.headerLength + Int(file.first) + chunk * 4112
        let sealed = min(4096, file.contents.count - chunk * 4096) + 16
        return at >= 0 ? start + at : start + sealed + at
    }

    // MARK: - Fixed header

    func testOpen_UntamperedCopy_Opens() throws {
        let reader = try openWithKey(try untamperedCopy())
        for (name, file) in fixture.files { XCTAssertEqual(try reader.contents(of: bytes(name)), file.contents, name) }
    }

    /// A chunk size that is valid but not the one packed passes parsing and
    /// the slot (which does not bind it) but not the header MAC.
    func testOpen_ChunkSizeByteChangedInRange_FailsAuthentication() throws {
        let path = try tampered { $0[32] = 13 }
        XCTAssertThrowsBundleError(.headerAuthenticationFailed) { try openWithKey(path) }
        XCTAssertThrowsBundleError(.headerAuthenticationFailed) { try openWithPassphrase(path) }
    }

    func testOpen_ChunkSizeByteOutOfRange_FailsCorruptHeader() throws {
        for value: UInt8 in [0, 11, 21, 0xFF] {
            let path = try tampered { $0[32] = value }
            XCTAssertThrowsBundleError(.corruptHeader, "chunk size 2^\(value)") { try openWithKey(path) }
        }
    }

    /// Payload length, index offset and index length must agree
    /// (payload = index offset + index length).
    func testOpen_FlippedLengthFieldByte_FailsCorruptHeader() throws {
        for (field, offset) in [("payload length", 40), ("index offset", 48), ("index length", 56)] {
            let path = try tampered { $0[offset] ^= 0x01 }
            XCTAssertThrowsBundleError(.corruptHeader, field) { try openWithKey(path) }
        }
    }

    /// Lengths changed consistently pass parsing; the header MAC catches
    /// them, before the file length is compared.
    func testOpen_ConsistentLengthEdit_FailsAuthentication() throws {
        let path = try tampered { b in
            for field in [40, 56] { // payload length, index length: + 16 each
                let value = (0..<8).reduce(UInt64(0)) { $0 | UInt64(b[field + $1]) << (8 * UInt64($1)) } + 16
                for i in 0..<8 { b[field + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(i))) }
            }
        }
        XCTAssertThrowsBundleError(.headerAuthenticationFailed) { try openWithKey(path) }
    }

    func testOpen_NonZeroReservedByte_FailsCorruptHeader() throws {
        for offset in [10, 11] + Array(34..<40) + [map.slotOffsets[0] + 1, map.slotOffsets[1] + 1] {
            let path = try tampered { $0[offset] = 0x01 }
            XCTAssertThrowsBundleError(.corruptHeader, "byte \(offset)") { try openWithKey(path) }
        }
        // The passphrase slot's three reserved bytes after log2 N.
        for offset in 1...3 {
            let path = try tampered { $0[map.slotBody(1) + offset] = 0x01 }
            XCTAssertThrowsBundleError(.corruptHeader, "passphrase slot byte \(offset)") { try openWithPassphrase(path) }
        }
    }

    func testOpen_HeaderLengthField_FailsCorruptHeader() throws {
        for (what, value) in [("one more", UInt32(map.headerLength + 1)), ("one less", UInt32(map.headerLength - 1)),
                              ("below minimum", 64), ("above the 1 MiB limit", UInt32(1 << 20) + 1),
                              ("past end of file", UInt32(fixture.bundle.count + 1)), ("all ones", UInt32.max)] {
            let path = try tampered { b in withUnsafeBytes(of: value.littleEndian) { for i in 0..<4 { b[12 + i] = $0[i] } } }
            XCTAssertThrowsBundleError(.corruptHeader, what) { try openWithKey(path) }
        }
    }

    func testOpen_SlotCountChanged_FailsCorruptHeader() throws {
        for value: UInt8 in [0, 1, 3, 65] {
            let path = try tampered { $0[33] = value }
            XCTAssertThrowsBundleError(.corruptHeader, "slot count \(value)") { try openWithKey(path) }
        }
    }

    /// The bundle id is bound into every slot's wrap: the raw-key slot
    /// matches the key id, fails to unwrap, and is reported as damaged; a
    /// passphrase cannot tell damage from a wrong passphrase.
    func testOpen_FlippedBundleIDByte_FailsCorruptHeader() throws {
        let path = try tampered { $0[16] ^= 0x80 }
        XCTAssertThrowsBundleError(.corruptHeader) { try openWithKey(path) }
        XCTAssertThrowsBundleError(.wrongKey(slotKinds: Self.slotKinds)) { try openWithPassphrase(path) }
    }

    // MARK: - Key slots

    /// Raw-key slot body: key id (8) ‖ salt (16) ‖ wrapped key (32 + 16).
    func testOpen_FlippedWrappedKeyByte_RawKeySlot_FailsCorruptHeader() throws {
        for (what, at) in [("salt", 8), ("first wrapped byte", 24), ("last wrapped byte", 55), ("first tag byte", 56), ("last tag byte", 71)] {
            let path = try tampered { $0[map.slotBody(0) + at] ^= 0x01 }
            XCTAssertThrowsBundleError(.corruptHeader, what) { try openWithKey(path) }
        }
    }

    /// A raw key whose id no longer matches any slot is a wrong key; the
    /// passphrase slot then opens but the header MAC fails.
    func testOpen_FlippedKeyIDByte_RawKeySlot_FailsWrongKey() throws {
        let path = try tampered { $0[map.slotBody(0)] ^= 0x01 }
        XCTAssertThrowsBundleError(.wrongKey(slotKinds: Self.slotKinds)) { try openWithKey(path) }
        XCTAssertThrowsBundleError(.headerAuthenticationFailed) { try openWithPassphrase(path) }
    }

    /// Passphrase slot body: log2 N, 3 zero bytes, r, p (u32 LE), salt (16),
    /// wrapped key (48). A damaged slot looks like a wrong passphrase; the
    /// other slot opens and the header MAC catches the change.
    func testOpen_FlippedWrappedKeyByte_PassphraseSlot_FailsWrongKey() throws {
        for (what, at) in [("salt", 12), ("wrapped key", 28), ("tag", 75)] {
            let path = try tampered { $0[map.slotBody(1) + at] ^= 0x01 }
            XCTAssertThrowsBundleError(.wrongKey(slotKinds: Self.slotKinds), what) { try openWithPassphrase(path) }
            XCTAssertThrowsBundleError(.headerAuthenticationFailed, what) { try openWithKey(path) }
        }
    }

    /// scrypt costs are checked before scrypt runs: a slot asking for more
    /// than the limit is corrupt, not a 2^31 derivation.
    func testOpen_PassphraseSlotCostOutOfRange_FailsCorruptHeader() throws {
        for (what, at, value) in [("log2 N = 31", 0, UInt8(31)), ("log2 N = 0", 0, 0), ("r = 0", 4, 0), ("p = 0", 8, 0)] {
            let path = try tampered { b in
                if at == 0 {
                    b[map.slotBody(1)] = value
                } else {
                    for i in 0..<4 { b[map.slotBody(1) + at + i] = value }
                }
            }
            XCTAssertThrowsBundleError(.corruptHeader, what) { try openWithPassphrase(path) }
        }
    }

    /// Regression: p multiplies scrypt's time but hardly its memory, so a
    /// slot with N = 2^14, r = 8, p = 2^20 passed the 2 GiB memory check and
    /// opening ran for hours. Its work N · r · p is over the reader's limit
    /// (`KeySlot.maximumScryptWork`), so it is refused before scrypt runs.
    func testOpen_PassphraseSlotHugeP_FailsCorruptHeader() throws {
        let path = try tampered { b in
            let p = UInt32(1 << 20)
            for i in 0..<4 { b[map.slotBody(1) + 8 + i] = UInt8(truncatingIfNeeded: p >> (8 * UInt32(i))) }
        }
        XCTAssertThrowsBundleError(.corruptHeader) { try openWithPassphrase(path) }
    }

    func testOpen_FlippedHeaderMACByte_FailsAuthentication() throws {
        for at in [map.macOffset, map.macOffset + 31] {
            let path = try tampered { $0[at] ^= 0x01 }
            XCTAssertThrowsBundleError(.headerAuthenticationFailed, "MAC byte \(at - map.macOffset)") { try openWithKey(path) }
            XCTAssertThrowsBundleError(.headerAuthenticationFailed, "MAC byte \(at - map.macOffset)") { try openWithPassphrase(path) }
        }
    }

    // MARK: - Index

    func testOpen_FlippedIndexByte_FailsCorruptIndex() throws {
        for (what, at) in [("first byte", map.indexOffset), ("middle", map.indexOffset + map.indexLength / 2),
                           ("first tag byte", map.indexOffset + map.indexLength - 16), ("last byte", map.indexOffset + map.indexLength - 1)] {
            let path = try tampered { $0[at] ^= 0x01 }
            XCTAssertThrowsBundleError(.corruptIndex, what) { try openWithKey(path) }
        }
        XCTAssertEqual(map.indexOffset + map.indexLength, fixture.bundle.count, "the index ends the bundle")
    }

    // MARK: - Chunks

    /// A damaged chunk does not stop the open; reading it fails with its
    /// entry and chunk index, and every other chunk still reads.
    func testRead_FlippedChunkBodyByte_FailsThatChunkOnly() throws {
        try assertOnlyChunkFails(name: "multi.bin", chunk: 1, at: 100)
        try assertOnlyChunkFails(name: "multi.bin", chunk: 0, at: 0)
    }

    func testRead_FlippedChunkTagByte_FailsThatChunkOnly() throws {
        try assertOnlyChunkFails(name: "multi.bin", chunk: 3, at: -1) // the last, partial chunk
        try assertOnlyChunkFails(name: "twin-a.bin", chunk: 0, at: -16)
    }

    private func assertOnlyChunkFails(name: String, chunk: Int, at: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        let where_ = offset(of: name, chunk: chunk, at: at)
        let path = try tampered("chunk-\(chunk).bundle") { $0[where_] ^= 0x01 }
        let reader = try openWithKey(path)
        let entry = try self.file(name, in: reader)
        let plaintext = fixture.files[name]!.contents
        let chunks = (plaintext.count + 4095) / 4096
        for c in 0..<chunks {
            if c == chunk {
                XCTAssertThrowsBundleError(.corruptChunk(entry: entry.position, chunk: UInt64(c)), file: file, line: line) {
                    try reader.chunk(UInt64(c), of: entry)
                }
            } else {
                let start = c * 4096
                XCTAssertEqual(try reader.chunk(UInt64(c), of: entry), Array(plaintext[start..<min(start + 4096, plaintext.count)]),
                               "chunk \(c)", file: file, line: line)
            }
        }
        XCTAssertThrowsBundleError(.corruptChunk(entry: entry.position, chunk: UInt64(chunk)), "whole file", file: file, line: line) {
            try reader.contents(of: entry)
        }
        for (other, data) in fixture.files where other != name {
            XCTAssertEqual(try reader.contents(of: bytes(other)), data.contents, other, file: file, line: line)
        }
    }

    /// Chunks are bound to their position: chunk 1 stored where chunk 0
    /// belongs (and the reverse) fails both.
    func testRead_SwappedChunksOfOneFile_FailCorruptChunk() throws {
        let a = offset(of: "multi.bin", chunk: 0, at: 0)
        let b = offset(of: "multi.bin", chunk: 1, at: 0)
        let path = try tampered { bytes in
            let first = Array(bytes[a..<(a + 4112)])
            bytes.replaceSubrange(a..<(a + 4112), with: bytes[b..<(b + 4112)])
            bytes.replaceSubrange(b..<(b + 4112), with: first)
        }
        let reader = try openWithKey(path)
        let entry = try file("multi.bin", in: reader)
        XCTAssertThrowsBundleError(.corruptChunk(entry: entry.position, chunk: 0)) { try reader.chunk(0, of: entry) }
        XCTAssertThrowsBundleError(.corruptChunk(entry: entry.position, chunk: 1)) { try reader.chunk(1, of: entry) }
        XCTAssertEqual(try reader.chunk(2, of: entry), Array(fixture.files["multi.bin"]!.contents[8192..<12288]))
    }

    /// Chunks are bound to their file (its key and id): the sealed bodies of
    /// two files of the same size, swapped, fail both.
    func testRead_SwappedBodiesOfEqualSizeFiles_FailCorruptChunk() throws {
        let a = offset(of: "twin-a.bin", chunk: 0, at: 0)
        let b = offset(of: "twin-b.bin", chunk: 0, at: 0)
        let length = 5000 + 2 * 16
        let path = try tampered { bytes in
            let first = Array(bytes[a..<(a + length)])
            bytes.replaceSubrange(a..<(a + length), with: bytes[b..<(b + length)])
            bytes.replaceSubrange(b..<(b + length), with: first)
        }
        let reader = try openWithKey(path)
        for name in ["twin-a.bin", "twin-b.bin"] {
            let entry = try file(name, in: reader)
            XCTAssertThrowsBundleError(.corruptChunk(entry: entry.position, chunk: 0), name) { try reader.contents(of: entry) }
            XCTAssertThrowsBundleError(.corruptChunk(entry: entry.position, chunk: 1), name) { try reader.chunk(1, of: entry) }
        }
        XCTAssertEqual(try reader.contents(of: bytes("multi.bin")), fixture.files["multi.bin"]!.contents)
    }

    /// A read that fails part-way leaves no plaintext in the caller's
    /// buffer: chunks before the bad one were already decrypted into it, and
    /// must be wiped. The buffer starts as 0xA5 so "never written" and
    /// "wiped" both show, and plaintext cannot pass for either.
    func testRead_FailedRead_WipesBuffer() throws {
        let bad = offset(of: "multi.bin", chunk: 2, at: 5)
        let path = try tampered { $0[bad] ^= 0x01 }
        let reader = try openWithKey(path)
        let entry = try file("multi.bin", in: reader)
        let key = try reader.fileKey(for: entry)
        let plaintext = fixture.files["multi.bin"]!.contents
        // Whole chunks straight into the buffer; a read from the middle of
        // chunk 0 (through the workspace); one that fails on its first chunk.
        for (offset, count) in [(0, plaintext.count), (100, plaintext.count - 150), (8192, 4096 + 100)] {
            var buffer = [UInt8](repeating: 0xA5, count: count)
            XCTAssertThrowsBundleError(.corruptChunk(entry: entry.position, chunk: 2), "read of \(count) at \(offset)") {
                try buffer.withUnsafeMutableBytes { try reader.read(entry, key: key, fromOffset: UInt64(offset), into: $0) }
            }
            XCTAssertTrue(buffer.allSatisfy { $0 == 0 || $0 == 0xA5 }, "read of \(count) at \(offset): plaintext left in the buffer")
        }
    }

    // MARK: - Length

    func testOpen_TruncatedByOneByte_FailsLengthMismatch() throws {
        let n = UInt64(fixture.bundle.count)
        let path = try tampered { $0.removeLast() }
        XCTAssertThrowsBundleError(.lengthMismatch(expected: n, actual: n - 1)) { try openWithKey(path) }
    }

    func testOpen_TruncatedInTheMiddle_FailsLengthMismatch() throws {
        let n = fixture.bundle.count
        let cut = map.headerLength + (n - map.headerLength) / 2
        let path = try tampered { $0.removeSubrange(cut...) }
        XCTAssertThrowsBundleError(.lengthMismatch(expected: UInt64(n), actual: UInt64(cut))) { try openWithKey(path) }
    }

    /// Cut inside the header: the header itself is incomplete. Cut before
    /// the 16 bytes that locate it: not recognisable as a bundle.
    func testOpen_TruncatedInTheHeader_FailsCorruptHeaderOrNotABundle() throws {
        let inHeader = try tampered("in-header.bundle") { $0.removeSubrange((map.headerLength - 10)...) }
        XCTAssertThrowsBundleError(.corruptHeader) { try openWithKey(inHeader) }
        let inPrefix = try tampered("in-prefix.bundle") { $0.removeSubrange(15...) }
        XCTAssertThrowsBundleError(.notABundle) { try openWithKey(inPrefix) }
    }

    func testOpen_AppendedByte_FailsLengthMismatch() throws {
        let n = UInt64(fixture.bundle.count)
        let path = try tampered { $0.append(0) }
        XCTAssertThrowsBundleError(.lengthMismatch(expected: n, actual: n + 1)) { try openWithKey(path) }
    }

    // MARK: - Not a bundle

    func testOpen_WrongKey_FailsWrongKey() throws {
        let path = try untamperedCopy()
        XCTAssertThrowsBundleError(.wrongKey(slotKinds: Self.slotKinds)) {
            try BundleReader.open(path: path, materials: [.rawKey(TestSecrets.key(8))])
        }
    }

    func testOpen_WrongPassphrase_FailsWrongKey() throws {
        let path = try untamperedCopy()
        XCTAssertThrowsBundleError(.wrongKey(slotKinds: Self.slotKinds)) {
            try BundleReader.open(path: path, materials: [.passphrase(TestSecrets.passphrase("tamper test passphrasE"))])
        }
    }

    func testOpen_RandomGarbage_FailsNotABundle() throws {
        var generator = SeededGenerator(seed: 99)
        let path = tmp.appending("garbage.bundle")
        try FileTree.writeFile(path, generator.bytes(fixture.bundle.count))
        XCTAssertThrowsBundleError(.notABundle) { try openWithKey(path) }
    }

    func testOpen_EmptyFile_FailsNotABundle() throws {
        let path = tmp.appending("empty.bundle")
        try FileTree.writeFile(path, [])
        XCTAssertThrowsBundleError(.notABundle) { try openWithKey(path) }
    }

    func testOpen_FlippedMagicByte_FailsNotABundle() throws {
        for at in 0..<8 {
            let path = try tampered { $0[at] ^= 0x20 }
            XCTAssertThrowsBundleError(.notABundle, "magic byte \(at)") { try openWithKey(path) }
        }
    }

    func testOpen_OtherVersion_FailsUnsupportedVersion() throws {
        for version: UInt16 in [0, 3, 0x0100, 0xFFFF] {
            let path = try tampered { b in
                b[8] = UInt8(version & 0xFF)
                b[9] = UInt8(version >> 8)
            }
            XCTAssertThrowsBundleError(.unsupportedVersion(version)) { try openWithKey(path) }
        }
        // Version 2 is known: a version 1 header relabelled 2 parses (its
        // bytes 34 … 39 are zero, method none) and fails its MAC.
        let relabelled = try tampered { $0[8] = 2 }
        XCTAssertThrowsBundleError(.headerAuthenticationFailed) { try openWithKey(relabelled) }
    }

    func testOpen_NotARegularFile_FailsIO() throws {
        XCTAssertThrowsBundleError(.io(errno: EINVAL)) { try openWithKey(tmp.path) }
        XCTAssertThrowsBundleError(.io(errno: ENOENT)) { try openWithKey(tmp.appending("missing.bundle")) }
    }
}
