import EncFS
import Foundation
import SharedTestSupport
import XCTest

/// `EncryptedBundle(…, verifyingSignatureWith:)` on bundles made by the
/// release `encfs-pack`: the one a CI key signed opens; one packed to the
/// host's public key by anybody else, unsigned or signed by another key,
/// is refused with its own error.
final class SignedBundleTests: XCTestCase {
    /// Keys and bundles, made once per test process.
    private struct Signed: Sendable {
        let scratch: String
        let signed: String
        let unsigned: String
        let strangers: String
        let ciPub: String
        let strangerPub: String
    }

    private static let made: Swift.Result<Signed, any Error> = Swift.Result {
        let fixture = try LibraryFixture.shared()
        let keygen = try Tools.binary("encfs-keygen")
        let pack = try Tools.binary("encfs-pack")
        let dir = fixture.scratch.appending("signed")
        try fixture.scratch.makeDirectory(bytes("signed"))
        let ci = dir + "/ci.sign"
        let stranger = dir + "/stranger.sign"
        try Subprocess.check(keygen, ["--sign", "-o", ci])
        try Subprocess.check(keygen, ["--sign", "-o", stranger])
        let src = fixture.scratch.appending("src")
        let hostPub = fixture.identityFile + ".pub"
        let made = Signed(scratch: dir, signed: dir + "/signed.bundle", unsigned: dir + "/unsigned.bundle",
                          strangers: dir + "/strangers.bundle", ciPub: ci + ".pub", strangerPub: stranger + ".pub")
        try Subprocess.check(pack, ["--quiet", "--recipient", hostPub, "--sign-key", ci, "--", src, made.signed])
        try Subprocess.check(pack, ["--quiet", "--recipient", hostPub, "--", src, made.unsigned])
        try Subprocess.check(pack, ["--quiet", "--recipient", hostPub, "--sign-key", stranger, "--", src, made.strangers])
        return made
    }

    private func open(_ path: String, _ keys: [EncryptedBundle.VerifyingKey]) throws(EncryptedBundleError) -> EncryptedBundle {
        let fixture: LibraryFixture
        do { fixture = try LibraryFixture.shared() } catch { throw .io(errno: EIO, what: "fixture: \(error)") }
        return try EncryptedBundle(path: path, unlock: .identityFile(fixture.identityFile), verifyingSignatureWith: keys)
    }

    private func assertThrows(_ expected: EncryptedBundleError, file: StaticString = #filePath, line: UInt = #line,
                              _ body: () throws(EncryptedBundleError) -> Void) {
        do throws(EncryptedBundleError) {
            try body()
            XCTFail("expected \(expected), nothing was thrown", file: file, line: line)
        } catch {
            XCTAssertEqual(error, expected, file: file, line: line)
        }
    }

    func testSignedByVerifyingKey_OpensAndReads() throws {
        let made = try Self.made.get()
        let fixture = try LibraryFixture.shared()
        let ci = try EncryptedBundle.VerifyingKey(contentsOfFile: made.ciPub)
        let stranger = try EncryptedBundle.VerifyingKey(contentsOfFile: made.strangerPub)
        let bundle = try open(made.signed, [stranger, ci])
        XCTAssertEqual(Array(try bundle.contents(atPath: "docs/a.pdf")), fixture.contents("docs/a.pdf"))
        XCTAssertEqual(bundle.signerFingerprint, ci.fingerprint)
        XCTAssertNotNil(bundle.bundleID.wholeMatch(of: /[0-9a-f]{32}/), bundle.bundleID)
        // The same bytes from memory, the key from PEM text.
        let pem = try ScratchTree.readFile(bytes(made.ciPub))
        let memory = MemoryByteSource(bytes: try fixture.bundleBytes(made.signed))
        let fromMemory = try EncryptedBundle(source: memory, unlock: .identityFile(fixture.identityFile),
                                             verifyingSignatureWith: [try EncryptedBundle.VerifyingKey(pem: pem)])
        XCTAssertEqual(Array(try fromMemory.contents(atPath: "docs/b.txt")), bytes("hello\n"))
    }

    func testForgedUnsigned_Refused() throws {
        let made = try Self.made.get()
        let ci = try EncryptedBundle.VerifyingKey(contentsOfFile: made.ciPub)
        // Without verifying keys the forgery opens: what the option closes.
        let fixture = try LibraryFixture.shared()
        XCTAssertNil(try EncryptedBundle(path: made.unsigned, unlock: .identityFile(fixture.identityFile)).signerFingerprint)
        assertThrows(.notSigned) { () throws(EncryptedBundleError) in _ = try open(made.unsigned, [ci]) }
    }

    func testSignedByAnotherKey_RefusedNamingTheSigner() throws {
        let made = try Self.made.get()
        let ci = try EncryptedBundle.VerifyingKey(contentsOfFile: made.ciPub)
        let stranger = try EncryptedBundle.VerifyingKey(contentsOfFile: made.strangerPub)
        assertThrows(.untrustedSigner(fingerprint: stranger.fingerprint)) { () throws(EncryptedBundleError) in _ = try open(made.strangers, [ci]) }
    }

    func testNoVerifyingKey_RefusedRatherThanUnchecked() throws {
        let made = try Self.made.get()
        assertThrows(.unusableKey(reason: "no verifying key given")) { () throws(EncryptedBundleError) in _ = try open(made.signed, []) }
    }

    func testVerifyingKeyFromAnX25519PublicKey_Refused() throws {
        let fixture = try LibraryFixture.shared()
        do {
            _ = try EncryptedBundle.VerifyingKey(contentsOfFile: fixture.identityFile + ".pub")
            XCTFail("an X25519 key was taken as a verifying key")
        } catch {
            guard case .unusableKey(let reason) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(reason.contains("expected an Ed25519 key, not X25519"), reason)
        }
    }

    /// A flipped byte in the sealed index: refused as a damaged index.
    func testFlippedIndexByte_DamagedIndex() throws {
        let made = try Self.made.get()
        let fixture = try LibraryFixture.shared()
        var data = try fixture.bundleBytes(made.signed)
        let headerLength = (0..<4).reduce(0) { $0 | Int(data[12 + $1]) << (8 * $1) }
        let indexOffset = (0..<8).reduce(0) { $0 | Int(data[48 + $1]) << (8 * $1) }
        data[headerLength + indexOffset + 40] ^= 0x01
        let ci = try EncryptedBundle.VerifyingKey(contentsOfFile: made.ciPub)
        do {
            _ = try EncryptedBundle(source: MemoryByteSource(bytes: data), unlock: .identityFile(fixture.identityFile),
                                    verifyingSignatureWith: [ci])
            XCTFail("opened a damaged bundle")
        } catch {
            guard case .damagedBundle(.index, _) = error else { return XCTFail("\(error)") }
        }
    }
}
