import CryptCore
@testable import EncFSCore
import XCTest
import SharedTestSupport

/// File ids must be unique (security review, finding 8): two files with one
/// id share a file key and chunk nonces. encfs-pack draws them at random;
/// an index that repeats one authenticates all the same (it is sealed by
/// whoever holds the content key), so `filesSharingIDs()` is what
/// `encfs-inspect verify` reports as damage.
final class DuplicateFileIDTests: XCTestCase {
    private var tmp: TemporaryDirectory!
    private let key = TestSecrets.key(8)
    private let contents: [UInt8] = {
        var generator = SeededGenerator(seed: 8)
        return generator.bytes(5000)
    }()

    override func setUpWithError() throws { tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp") }
    override func tearDown() { tmp = nil }

    /// `a.bin`, `b.bin` (same size, other contents: identical files would
    /// share one body and one id legitimately, see CompressedBundleTests;
    /// two 4 KiB chunks each) and `c.txt`.
    private func packThreeFiles() throws -> [UInt8] {
        let source = tmp.appending("source")
        try FileTree.makeDirectory(source)
        try FileTree.writeFile(join(source, bytes("a.bin")), contents)
        try FileTree.writeFile(join(source, bytes("b.bin")), contents.map { $0 ^ 0x5A })
        try FileTree.writeFile(join(source, bytes("c.txt")), bytes("c\n"))
        let bundle = tmp.appending("b.bundle")
        try packBundle(source: source, destination: bundle, keys: [.rawKey(key)])
        return bundle
    }

    /// Gives `b.bin` the file id of `a.bin`, as a writer with the content
    /// key could: copies a's sealed chunks over b's (the chunk's associated
    /// data holds the file id, not the offset) and a's id into b's record,
    /// then seals the index again. Every chunk and the index authenticate.
    private func giveBTheIDOfA(_ bundle: [UInt8]) throws {
        let reader = try BundleReader.open(path: bundle, materials: [.rawKey(key)])
        let a = try reader.entry(bytes("a.bin"))
        let b = try reader.entry(bytes("b.bin"))
        let header = reader.header
        var file = try FileTree.readFile(bundle)
        let length = Int(header.layout.ciphertextSize(forPlaintextSize: a.fileSize))
        let aStart = header.headerLength + Int(a.payloadOffset)
        let bStart = header.headerLength + Int(b.payloadOffset)
        file.replaceSubrange(bStart..<(bStart + length), with: file[aStart..<(aStart + length)])
        let indexStart = header.headerLength + Int(header.indexOffset)
        let aad = IndexBuilder.associatedData(header)
        let plaintext = try file[indexStart...].withUnsafeBytes {
            try AESGCM().open(key: reader.keys.indexKey, nonce: IndexBuilder.zeroNonce, aad: aad, sealed: $0)
        }
        var index = plaintext.withUnsafeBytes { Array($0) }
        let idAt = { (entry: IndexEntry) in BundleIndex.headerSize + entry.position * IndexEntry.recordSize + 48 }
        index.replaceSubrange(idAt(b)..<(idAt(b) + 16), with: index[idAt(a)..<(idAt(a) + 16)])
        let sealed = try AESGCM().seal(key: reader.keys.indexKey, nonce: IndexBuilder.zeroNonce, aad: aad,
                                       plaintext: SecureBytes(copying: index))
        file.replaceSubrange(indexStart..., with: sealed)
        try FileTree.writeFile(bundle, file)
    }

    func testFilesSharingIDs_PackedBundle_None() throws {
        let reader = try BundleReader.open(path: try packThreeFiles(), materials: [.rawKey(key)])
        XCTAssertTrue(try reader.index.filesSharingIDs().isEmpty)
    }

    /// The crafted bundle opens and reads back (readers do not look; b now
    /// holds a copy of a's body at its own place), and the duplicate is
    /// found, paired with the file that has the id first: two bodies under
    /// one id, not one shared body.
    func testFilesSharingIDs_CraftedDuplicate_Found() throws {
        let bundle = try packThreeFiles()
        try giveBTheIDOfA(bundle)
        let reader = try BundleReader.open(path: bundle, materials: [.rawKey(key)])
        XCTAssertEqual(try reader.contents(of: bytes("a.bin")), contents)
        XCTAssertEqual(try reader.contents(of: bytes("b.bin")), contents)
        let pairs = try reader.index.filesSharingIDs()
        XCTAssertEqual(pairs.count, 1)
        XCTAssertEqual(try pairs.first.map { try reader.index.path(of: $0.first) }, bytes("a.bin"))
        XCTAssertEqual(try pairs.first.map { try reader.index.path(of: $0.duplicate) }, bytes("b.bin"))
    }
}
