import CryptCore
@testable import EncFSCore
import XCTest

/// What rekeying does to a signature: adding slots keeps it (the content
/// is unchanged), removing one re-encrypts under a new content key and
/// bundle id, so the signature is dropped, or made again with a key.
final class SignedRekeyTests: XCTestCase {
    private var bundles: SignedBundles!
    private let operatorKey = TestSecrets.key(21)

    override func setUpWithError() throws { bundles = try SignedBundles() }
    override func tearDown() { bundles = nil }

    private func rekey(_ path: [UInt8], _ change: (inout BundleRekeyer.Changes) -> Void) throws -> BundleRekeyer.Outcome {
        var changes = BundleRekeyer.Changes()
        changes.openedWith = [.rawKey(operatorKey)]
        changes.scrypt = .testing
        change(&changes)
        let reader = try BundleReader.open(path: path, materials: changes.openedWith)
        return try BundleRekeyer.rekey(path: path, reader: reader, changes: changes)
    }

    /// Opens with the operator's key under the CI key and checks every
    /// chunk against the signature.
    private func assertSignedByCI(_ path: [UInt8], file: StaticString = #filePath, line: UInt = #line) throws {
        let reader = try BundleReader.open(path: path, materials: [.rawKey(operatorKey)], origin: SignedBundles.signed(by: bundles.ci))
        for (name, data) in bundles.files { XCTAssertEqual(try reader.contents(of: bytes(name)), data, name, file: file, line: line) }
        XCTAssertEqual(try BundleVerifier.verify(reader).matchesSignature(of: reader.header), true, file: file, line: line)
    }

    func testRekeyAdd_KeepsTheSignature() throws {
        let path = try bundles.pack("b.bundle", signedBy: bundles.ci, keys: [.rawKey(operatorKey)])
        let before = try BundleReader.readHeader(path: path).header
        let outcome = try rekey(path) { $0.addKeys = [.rawKey(TestSecrets.key(22))] }
        XCTAssertEqual(outcome.signature, .kept)
        XCTAssertEqual(outcome.slots.map(\.kindName), ["raw-key", "x25519", "raw-key"])
        let after = try BundleReader.readHeader(path: path).header
        XCTAssertEqual(after.bundleID, before.bundleID)
        XCTAssertEqual(after.signatureSlot, before.signatureSlot)
        try assertSignedByCI(path)
        XCTAssertNoThrow(try BundleReader.open(path: path, materials: [.rawKey(TestSecrets.key(22))],
                                               origin: SignedBundles.signed(by: bundles.ci)))
    }

    func testRekeyRemove_DropsTheSignature() throws {
        let path = try bundles.pack("b.bundle", signedBy: bundles.ci, keys: [.rawKey(operatorKey)])
        let hostSlot = try XCTUnwrap(BundleReader.readHeader(path: path).header.keySlots.first { $0.kind == .x25519 })
        let outcome = try rekey(path) { $0.remove = [hostSlot.fingerprint] }
        XCTAssertEqual(outcome.signature, .dropped)
        XCTAssertTrue(outcome.reencrypted)
        XCTAssertNil(try BundleReader.readHeader(path: path).header.signatureSlot)
        XCTAssertThrowsBundleError(.notSigned) {
            try BundleReader.open(path: path, materials: [.rawKey(operatorKey)], origin: SignedBundles.signed(by: bundles.ci))
        }
    }

    func testRekeyRemoveWithSigningKey_SignsTheNewBundle() throws {
        let path = try bundles.pack("b.bundle", signedBy: bundles.ci, keys: [.rawKey(operatorKey)])
        let before = try BundleReader.readHeader(path: path).header
        let hostSlot = try XCTUnwrap(before.keySlots.first { $0.kind == .x25519 })
        let outcome = try rekey(path) {
            $0.remove = [hostSlot.fingerprint]
            $0.signingKey = bundles.ci
        }
        XCTAssertEqual(outcome.signature, .signed(fingerprint: BundleSignature.fingerprint(of: bundles.ci.publicKey)))
        let after = try BundleReader.readHeader(path: path).header
        XCTAssertNotEqual(after.bundleID, before.bundleID)
        XCTAssertNotEqual(after.signatureSlot, before.signatureSlot)
        try assertSignedByCI(path)
    }

    /// `--sign-key` alone signs an unsigned bundle, the payload unchanged;
    /// a signature by another key is replaced.
    func testRekeySigningKeyAlone_SignsWithoutChangingThePayload() throws {
        let path = try bundles.pack("b.bundle", signedBy: bundles.stranger, keys: [.rawKey(operatorKey)])
        let (before, _) = try BundleReader.readHeader(path: path)
        let payloadBefore = Array(try FileTree.readFile(path)[before.headerLength...])
        let outcome = try rekey(path) { $0.signingKey = bundles.ci }
        XCTAssertEqual(outcome.signature, .signed(fingerprint: BundleSignature.fingerprint(of: bundles.ci.publicKey)))
        let (after, _) = try BundleReader.readHeader(path: path)
        XCTAssertEqual(Array(try FileTree.readFile(path)[after.headerLength...]), payloadBefore)
        XCTAssertEqual(after.slots.filter { !$0.isKeySlot }.count, 1)
        try assertSignedByCI(path)
    }

    /// The signature is not a key slot: it cannot be removed as one, and
    /// removing the only key slot of a signed bundle is still removing the
    /// last slot.
    func testRekeyRemove_SignatureIsNoKeySlot() throws {
        let path = try bundles.pack("b.bundle", signedBy: bundles.ci, keys: [.rawKey(operatorKey)])
        let header = try BundleReader.readHeader(path: path).header
        let signatureFingerprint = try XCTUnwrap(header.signatureSlot?.fingerprint)
        let noSlot = XCTAssertThrowsBundleError(.unknownSlot(fingerprint: signatureFingerprint)) {
            try rekey(path) { $0.remove = [signatureFingerprint] }
        }
        XCTAssertEqual(noSlot?.message, "no key slot has fingerprint \(signatureFingerprint)")
        let last = XCTAssertThrowsBundleError(.lastSlotRemoved) { try rekey(path) { $0.remove = header.keySlots.map(\.fingerprint) } }
        XCTAssertEqual(last?.message, "refusing to remove the last key slot")
    }

    /// Signing vouches for the content: a damaged chunk is refused rather
    /// than signed.
    func testRekeySigningKey_DamagedChunk_Refused() throws {
        let path = try bundles.pack("b.bundle", signedBy: nil, keys: [.rawKey(operatorKey)])
        let reader = try BundleReader.open(path: path, materials: [.rawKey(operatorKey)])
        let entry = try reader.entry(bytes("multi.bin"))
        let at = reader.header.headerLength + Int(entry.payloadOffset) + 3
        var contents = try FileTree.readFile(path)
        contents[at] ^= 0x01
        try FileTree.writeFile(path, contents)
        XCTAssertThrowsBundleError(.corruptChunk(entry: entry.position, chunk: 0)) { try rekey(path) { $0.signingKey = bundles.ci } }
        XCTAssertEqual(try FileTree.readFile(path), contents, "the bundle is left as it was")
    }
}
