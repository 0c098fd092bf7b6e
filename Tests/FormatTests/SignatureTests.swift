import CryptCore
@testable import EncFSCore
import XCTest

/// Signed bundles at open: what `OriginPolicy` accepts and refuses, with
/// the exact error, for bundles made the way an attacker who has only the
/// host's public key (or also a slot) can make them.
final class SignatureTests: XCTestCase {
    private var bundles: SignedBundles!

    override func setUpWithError() throws { bundles = try SignedBundles() }
    override func tearDown() { bundles = nil }

    // MARK: - Accepted

    func testOpen_SignedByGivenKey_OpensAndReads() throws {
        let path = try bundles.pack("good.bundle", signedBy: bundles.ci)
        let reader = try bundles.open(path, origin: SignedBundles.signed(by: bundles.stranger, bundles.ci))
        for (name, data) in bundles.files { XCTAssertEqual(try reader.contents(of: bytes(name)), data, name) }
        let signature = try XCTUnwrap(try reader.header.signature())
        XCTAssertEqual(signature.signerFingerprint, BundleSignature.fingerprint(of: bundles.ci.publicKey))
        XCTAssertEqual(signature.keyCommitment, reader.keys.keyCommitment)
        // The digest packing recorded is the one verification computes.
        let report = try BundleVerifier.verify(reader)
        XCTAssertTrue(report.damaged.isEmpty)
        XCTAssertEqual(try report.matchesSignature(of: reader.header), true)
        XCTAssertEqual(report.chunks, 4 + 1)
    }

    /// The signature does not count as a key slot, and a reader without a
    /// policy opens a signed bundle as any other.
    func testHeader_SignatureSlotIsNotAKeySlot() throws {
        let path = try bundles.pack("good.bundle", signedBy: bundles.ci)
        let (header, _) = try BundleReader.readHeader(path: path)
        XCTAssertEqual(header.slots.map(\.kindName), ["x25519", "signature"])
        XCTAssertEqual(header.keySlots.map(\.kindName), ["x25519"])
        XCTAssertEqual(header.signatureSlot?.body.count, BundleSignature.bodySize)
        XCTAssertEqual(header.signatureSlot?.fingerprint, BundleSignature.fingerprint(of: bundles.ci.publicKey))
        // docs/FORMAT.md's worked size: one X25519 recipient and a signature.
        XCTAssertEqual(header.headerLength, 64 + (4 + 88) + (4 + 164) + 32)
        XCTAssertEqual(header.headerLength, 356)
        // And its claim that the chunk digest of a packed bundle is the
        // SHA-256 of the payload's chunk data.
        let file = try FileTree.readFile(path)
        let chunkData = file[header.headerLength..<(header.headerLength + Int(header.indexOffset))]
        XCTAssertEqual(try header.signature()?.chunkDigest, chunkData.withUnsafeBytes { SHA256.hash($0) })
        XCTAssertNoThrow(try bundles.open(path))
        // A wrong key lists the key slots only.
        XCTAssertThrowsBundleError(.wrongKey(slotKinds: ["x25519"])) {
            try BundleReader.open(path: path, materials: [.rawKey(TestSecrets.key(1))])
        }
    }

    // MARK: - Refused

    /// Anyone with the host's public key packs a bundle the host opens;
    /// with a verifying key it is refused, before any key is tried.
    func testOpen_ForgedUnsigned_Refused() throws {
        let forged = try bundles.pack("forged.bundle", signedBy: nil)
        XCTAssertNoThrow(try bundles.open(forged), "without a policy the forgery opens: the weakness being fixed")
        XCTAssertThrowsBundleError(.notSigned) { try bundles.open(forged, origin: SignedBundles.signed(by: bundles.ci)) }
        // Refused before any slot is tried: a wrong key gives the same error.
        XCTAssertThrowsBundleError(.notSigned) {
            try BundleReader.open(path: forged, materials: [.rawKey(TestSecrets.key(1))], origin: SignedBundles.signed(by: bundles.ci))
        }
        XCTAssertThrowsBundleError(.notSigned) {
            try BundleReader.unlock(source: FileByteSource(path: forged), materials: [.identity(bundles.host)],
                                    origin: SignedBundles.signed(by: bundles.ci))
        }
    }

    func testOpen_SignedByAnotherKey_RefusedNamingTheSigner() throws {
        let forged = try bundles.pack("forged.bundle", signedBy: bundles.stranger)
        let strangerFingerprint = BundleSignature.fingerprint(of: bundles.stranger.publicKey)
        let error = XCTAssertThrowsBundleError(.untrustedSigner(fingerprint: strangerFingerprint)) {
            try bundles.open(forged, origin: SignedBundles.signed(by: bundles.ci))
        }
        XCTAssertEqual(error?.message, "bundle is signed by a key not given with --verify-key (signer \(strangerFingerprint))")
    }

    /// The signature slot of a genuine bundle copied into a forged one: the
    /// forger holds the forged bundle's content key, so can even make its
    /// header MAC again, but the signed key commitment is the genuine one's.
    func testOpen_TransplantedSignature_Refused() throws {
        let genuine = try bundles.pack("genuine.bundle", signedBy: bundles.ci)
        let forged = try bundles.pack("forged.bundle", signedBy: nil)
        let signatureSlot = try XCTUnwrap(try BundleReader.readHeader(path: genuine).header.signatureSlot)
        let forgedReader = try bundles.open(forged)
        let withSignature = forgedReader.header.replacingSignature(with: signatureSlot)

        // Made again under the forged bundle's keys: the MAC holds, the commitment does not.
        let remade = bundles.tmp.appending("transplanted.bundle")
        try FileTree.writeFile(remade, try FileTree.readFile(forged))
        try SignedBundles.rewriteHeader(remade, withSignature, keys: forgedReader.keys)
        XCTAssertNoThrow(try bundles.open(remade), "the transplanted header is well formed and authenticated")
        let error = XCTAssertThrowsBundleError(.badSignature) { try bundles.open(remade, origin: SignedBundles.signed(by: bundles.ci)) }
        XCTAssertEqual(error?.message, "bundle signature does not verify: the content key is not the one signed")
        XCTAssertThrowsBundleError(.badSignature) {
            try BundleReader.unlock(source: FileByteSource(path: remade), materials: [.identity(bundles.host)],
                                    origin: SignedBundles.signed(by: bundles.ci))
        }

        // Spliced in without a new MAC (someone without the key): the MAC fails.
        let spliced = bundles.tmp.appending("spliced.bundle")
        let original = try FileTree.readFile(forged)
        let oldLength = forgedReader.header.headerLength
        var bytes = withSignature.serializedBody() + original[(oldLength - BundleFormat.headerMACSize)..<oldLength]
        bytes += original[oldLength...]
        try FileTree.writeFile(spliced, bytes)
        XCTAssertThrowsBundleError(.headerAuthenticationFailed) { try bundles.open(spliced, origin: SignedBundles.signed(by: bundles.ci)) }
    }

    /// A flipped byte in the sealed index of a signed bundle: GCM refuses
    /// it before the signature is reached; nothing of the index is used.
    func testOpen_FlippedIndexByte_Refused() throws {
        let path = try bundles.pack("good.bundle", signedBy: bundles.ci)
        let header = try BundleReader.readHeader(path: path).header
        let at = header.headerLength + Int(header.indexOffset) + 40
        var contents = try FileTree.readFile(path)
        contents[at] ^= 0x01
        try FileTree.writeFile(path, contents)
        XCTAssertThrowsBundleError(.corruptIndex) { try bundles.open(path, origin: SignedBundles.signed(by: bundles.ci)) }
    }

    /// A holder of the content key re-seals the index with another entry
    /// time (a valid GCM tag, the header and its MAC untouched): only the
    /// signature notices.
    func testOpen_IndexResealedByKeyHolder_RefusedBySignature() throws {
        let path = try bundles.pack("good.bundle", signedBy: bundles.ci)
        let reader = try bundles.open(path)
        let header = reader.header
        let start = header.headerLength + Int(header.indexOffset)
        let sealedLength = Int(header.indexLength)
        let file = try FileTree.readFile(path)
        let sealed = Array(file[start..<(start + sealedLength)])
        let gcm = try AESGCM()
        var plaintext = try sealed.withUnsafeBytes {
            try gcm.open(key: reader.keys.indexKey, nonce: IndexBuilder.zeroNonce, aad: IndexBuilder.associatedData(header), sealed: $0)
        }.withUnsafeBytes { Array($0) }
        // The root's mtime (record 0, bytes 16..<24 of the record).
        plaintext[BundleIndex.headerSize + 16] ^= 0x01
        let resealed = try gcm.seal(key: reader.keys.indexKey, nonce: IndexBuilder.zeroNonce, aad: IndexBuilder.associatedData(header),
                                    plaintext: SecureBytes(copying: plaintext))
        XCTAssertEqual(resealed.count, sealedLength)
        try SignedBundles.overwrite(path, at: start, with: resealed)
        XCTAssertNoThrow(try bundles.open(path), "the re-sealed index authenticates under the content key")
        let error = XCTAssertThrowsBundleError(.badSignature) { try bundles.open(path, origin: SignedBundles.signed(by: bundles.ci)) }
        XCTAssertEqual(error?.message, "bundle signature does not verify: the header or the index is not what was signed")
    }

    /// A holder of the content key changes a signed header field (the chunk
    /// size would break the payload; the signature's own bytes are enough).
    func testOpen_SignatureBytesChangedByKeyHolder_Refused() throws {
        let path = try bundles.pack("good.bundle", signedBy: bundles.ci)
        let reader = try bundles.open(path)
        var body = try XCTUnwrap(reader.header.signatureSlot).body
        body[100] ^= 0x01 // first byte of the Ed25519 signature
        let changed = reader.header.replacingSignature(with: KeySlot(kindCode: KeySlot.Kind.signature.rawValue, body: body))
        try SignedBundles.rewriteHeader(path, changed, keys: reader.keys)
        XCTAssertThrowsBundleError(.badSignature) { try bundles.open(path, origin: SignedBundles.signed(by: bundles.ci)) }
    }

    // MARK: - Bundle id

    func testOpen_ExpectedBundleID_MatchAcceptedMismatchRefused() throws {
        let path = try bundles.pack("good.bundle", signedBy: nil)
        let other = try bundles.pack("other.bundle", signedBy: nil)
        let id = try BundleReader.readHeader(path: path).header.bundleID
        let otherID = try BundleReader.readHeader(path: other).header.bundleID
        XCTAssertNoThrow(try bundles.open(path, origin: OriginPolicy(bundleID: id)))
        XCTAssertThrowsBundleError(.unexpectedBundleID(expected: id, actual: otherID)) {
            try bundles.open(other, origin: OriginPolicy(bundleID: id))
        }
    }

    // MARK: - Header parsing

    func testParse_TwoSignatureSlots_CorruptHeader() throws {
        let path = try bundles.pack("good.bundle", signedBy: bundles.ci)
        let reader = try bundles.open(path)
        let slot = try XCTUnwrap(reader.header.signatureSlot)
        let doubled = BundleHeader(bundleID: reader.header.bundleID, layout: reader.header.layout,
                                   slots: reader.header.slots + [slot], payloadLength: reader.header.payloadLength,
                                   indexOffset: reader.header.indexOffset, indexLength: reader.header.indexLength)
        try SignedBundles.rewriteHeader(path, doubled, keys: reader.keys)
        let error = XCTAssertThrowsBundleError(.corruptHeader) { try BundleReader.readHeader(path: path) }
        XCTAssertEqual(error?.message, "corrupted bundle header: more than one signature slot")
    }

    func testParse_SignatureSlotOfWrongLength_CorruptHeader() throws {
        let path = try bundles.pack("good.bundle", signedBy: bundles.ci)
        let reader = try bundles.open(path)
        let short = reader.header.replacingSignature(with: KeySlot(kindCode: 5, body: Array(reader.header.signatureSlot!.body.dropLast())))
        try SignedBundles.rewriteHeader(path, short, keys: reader.keys)
        XCTAssertThrowsBundleError(.corruptHeader) { try BundleReader.readHeader(path: path) }
    }

    /// A later signature version is skipped by readers without a policy
    /// (as older readers skip the whole slot) and refused by those with one.
    func testOpen_LaterSignatureVersion_SkippedOrRefused() throws {
        let path = try bundles.pack("good.bundle", signedBy: bundles.ci)
        let reader = try bundles.open(path)
        let later = reader.header.replacingSignature(with: KeySlot(kindCode: 5, body: [2, 9, 0, 0, 1, 2, 3]))
        try SignedBundles.rewriteHeader(path, later, keys: reader.keys)
        XCTAssertNoThrow(try bundles.open(path))
        XCTAssertThrowsBundleError(.unsupportedSignature(version: 2)) { try bundles.open(path, origin: SignedBundles.signed(by: bundles.ci)) }
    }

    /// An older reader ignores unknown slot kinds; a signed header is one
    /// such reader's header with one more slot of an unknown kind, and the
    /// header MAC covers it like every slot.
    func testHeader_MACCoversTheSignatureSlot() throws {
        let path = try bundles.pack("good.bundle", signedBy: bundles.ci)
        let header = try BundleReader.readHeader(path: path).header
        let at = header.headerLength - BundleFormat.headerMACSize - BundleSignature.bodySize + 40
        var contents = try FileTree.readFile(path)
        contents[at] ^= 0x01 // inside the key commitment
        try FileTree.writeFile(path, contents)
        XCTAssertThrowsBundleError(.headerAuthenticationFailed) { try bundles.open(path) }
    }
}
