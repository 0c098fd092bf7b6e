import CryptCore
@testable import EncFSCore
import XCTest

/// The documented limit of signatures (docs/SECURITY.md): a holder of a
/// key slot knows the content key, so can re-seal chunks that opening and
/// reading accept; only a full verification (`BundleVerifier`, behind
/// `encfs-inspect verify`) compares the chunks with the signed digest.
final class SignatureLimitTests: XCTestCase {
    private var bundles: SignedBundles!

    override func setUpWithError() throws { bundles = try SignedBundles() }
    override func tearDown() { bundles = nil }

    /// Where chunk `chunk` of `entry` starts in the bundle file.
    private func fileOffset(ofChunk chunk: UInt64, of entry: IndexEntry, in reader: BundleReader) -> Int {
        reader.header.headerLength + Int(entry.payloadOffset + reader.header.layout.ciphertextOffset(ofChunk: chunk))
    }

    /// Chunk 1 of multi.bin re-sealed with the right file key and other
    /// plaintext: the signed bundle still opens under the verifying key and
    /// serves the new bytes; verification reports the chunks differ.
    func testResealedChunk_OpenAcceptsIt_VerifyReportsIt() throws {
        let path = try bundles.pack("good.bundle", signedBy: bundles.ci)
        let before = try bundles.open(path)
        let entry = try before.entry(bytes("multi.bin"))
        let evil = [UInt8](repeating: 0x45, count: 4096)
        var sealed = [UInt8](repeating: 0, count: 4096 + 16)
        let codec = try ChunkCodec(bundleID: before.header.bundleID)
        try entry.withFileID { fileID in
            try evil.withUnsafeBytes { plain in
                try sealed.withUnsafeMutableBytes { out in
                    try codec.seal(key: before.fileKey(for: entry), fileID: fileID, chunk: 1, last: false, plaintext: plain, into: out)
                }
            }
        }
        try SignedBundles.overwrite(path, at: fileOffset(ofChunk: 1, of: entry, in: before), with: sealed)

        let reader = try bundles.open(path, origin: SignedBundles.signed(by: bundles.ci))
        XCTAssertEqual(try reader.chunk(1, of: entry), evil, "the mount serves the re-sealed chunk: the documented limit")
        let report = try BundleVerifier.verify(reader)
        XCTAssertTrue(report.damaged.isEmpty, "every chunk authenticates under the content key")
        XCTAssertEqual(try report.matchesSignature(of: reader.header), false)
    }

    /// Why the signed digest covers whole sealed chunks and not only their
    /// GCM tags: with the file key, a ciphertext block can be changed and
    /// another one compensate, leaving the tag as it was (GHASH is linear
    /// in the ciphertext). Block 0 gets chosen plaintext, block 2 garbage,
    /// the tag stays; opening accepts the chunk and only the digest of the
    /// whole chunk tells.
    func testTagPreservingForgery_SameTag_VerifyStillReportsIt() throws {
        let path = try bundles.pack("good.bundle", signedBy: bundles.ci)
        let reader = try bundles.open(path)
        let entry = try reader.entry(bytes("multi.bin"))
        let fileKey = try reader.fileKey(for: entry)
        let at = fileOffset(ofChunk: 1, of: entry, in: reader)
        let original = Array(try FileTree.readFile(path)[at..<(at + 4096 + 16)])
        let wanted = bytes("EVIL, same tag!!")
        let plaintextBlock = Array(bundles.files["multi.bin"]![4096..<(4096 + 16)])
        let delta = zip(plaintextBlock, wanted).map { $0 ^ $1 }
        // delta · H² from GCM itself: the tags of an empty message whose
        // associated data is `delta`, and is zero, differ by exactly that.
        let compensation = zip(try Self.emptyMessageTag(key: fileKey, aad: delta), try Self.emptyMessageTag(key: fileKey, aad: [UInt8](repeating: 0, count: 16)))
            .map { $0 ^ $1 }
        var forged = original
        for i in 0..<16 {
            forged[i] ^= delta[i] // ciphertext block 0
            forged[32 + i] ^= compensation[i] // ciphertext block 2
        }
        XCTAssertEqual(forged.suffix(16), original.suffix(16), "the tag is unchanged")
        try SignedBundles.overwrite(path, at: at, with: forged)

        let opened = try bundles.open(path, origin: SignedBundles.signed(by: bundles.ci))
        let chunk = try opened.chunk(1, of: entry)
        XCTAssertEqual(Array(chunk[0..<16]), wanted, "the chunk authenticates with the chosen plaintext")
        XCTAssertEqual(Array(chunk[16..<32]), Array(bundles.files["multi.bin"]![(4096 + 16)..<(4096 + 32)]))
        let report = try BundleVerifier.verify(opened)
        XCTAssertTrue(report.damaged.isEmpty)
        XCTAssertEqual(try report.matchesSignature(of: opened.header), false, "a digest of tags alone would have matched")
    }

    /// A damaged chunk (no key needed) is reported as damaged, and the
    /// digest no longer matches either.
    func testFlippedChunkByte_VerifyReportsDamageAndMismatch() throws {
        let path = try bundles.pack("good.bundle", signedBy: bundles.ci)
        let before = try bundles.open(path)
        let entry = try before.entry(bytes("multi.bin"))
        let at = fileOffset(ofChunk: 2, of: entry, in: before) + 7
        var contents = try FileTree.readFile(path)
        contents[at] ^= 0x80
        try FileTree.writeFile(path, contents)
        let report = try BundleVerifier.verify(bundles.open(path, origin: SignedBundles.signed(by: bundles.ci)))
        XCTAssertEqual(report.damaged.map(\.chunks), [[2]])
        XCTAssertEqual(report.damaged.first?.entry.position, entry.position)
        XCTAssertEqual(try report.matchesSignature(of: before.header), false)
    }

    /// The tag AES-GCM gives an empty plaintext with associated data `aad`
    /// under `key`, nonce zero.
    private static func emptyMessageTag(key: SymmetricKey, aad: [UInt8]) throws -> [UInt8] {
        var tag = [UInt8](repeating: 0, count: 16)
        let nonce = [UInt8](repeating: 0, count: 12)
        try nonce.withUnsafeBytes { n in
            try aad.withUnsafeBytes { a in
                try tag.withUnsafeMutableBytes { t in
                    try AESGCM().seal(key: key, nonce: n, aad: a, plaintext: UnsafeRawBufferPointer(start: nil, count: 0),
                                      into: UnsafeMutableRawBufferPointer(start: nil, count: 0), tag: t)
                }
            }
        }
        return tag
    }
}
