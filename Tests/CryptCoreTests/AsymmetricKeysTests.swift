import CryptCore
import Foundation
import XCTest
import SharedTestSupport

/// X25519, RSA-OAEP, PEM key parsing and SHA-256: published vectors, round
/// trips with the `openssl` command line tool in both directions, the exact
/// message for each kind of bad key, and a no-crash loop over mutated PEM.
final class AsymmetricKeysTests: XCTestCase {
    /// One 2048-bit RSA key made by `openssl genpkey`, shared by every test in
    /// this class: generating it is the slowest step, so it happens once.
    private static let rsa: Result<RSAFixture, any Error> = Result { try RSAFixture.make() }

    private var openssl: OpenSSLCommandLine!

    override func setUpWithError() throws {
        openssl = try OpenSSLCommandLine()
    }

    override func tearDown() {
        openssl?.removeDirectory()
        openssl = nil
    }

    private func rsaFixture() throws -> RSAFixture { try Self.rsa.get() }

    // MARK: - X25519

    func testX25519_RFC7748Vectors() throws {
        let file = try TestVectors.load("x25519-rfc7748", as: TestVectors.X25519.self)
        XCTAssertEqual(file.vectors.count, 4)
        for v in file.vectors {
            let key = try KeyPEM.privateKey(KeyPEM.x25519PKCS8(raw: v.privateKey.bytes))
            XCTAssertEqual(key.kind, .x25519, v.name)
            if let expected = v.publicKey {
                XCTAssertEqual(key.publicKey.x25519Raw?.hexString, expected.description, v.name)
            }
            let shared = try v.peerPublicKey.bytes.withUnsafeBytes { try key.x25519SharedSecret(withPeer: $0) }
            XCTAssertEqual(TestSupport.bytes(of: shared).hexString, v.sharedSecret.description, v.name)
            let viaPublicKey = try key.x25519SharedSecret(with: v.peerPublicKey.bytes.withUnsafeBytes { try PublicKey(x25519Raw: $0) })
            XCTAssertTrue(viaPublicKey == shared, v.name)
        }
    }

    func testX25519_LowOrderPeerIsRejected() throws {
        let file = try TestVectors.load("x25519-low-order", as: TestVectors.X25519LowOrder.self)
        XCTAssertEqual(file.vectors.count, 9)
        let key = try PrivateKey.generateX25519()
        let expected = CryptError.invalidKey("the X25519 peer key is a low-order point (all-zero shared secret)")
        for v in file.vectors {
            // Every 32-byte string is a valid X25519 public key...
            let peer = try v.publicKey.bytes.withUnsafeBytes { try PublicKey(x25519Raw: $0) }
            XCTAssertEqual(peer.x25519Raw, v.publicKey.bytes, v.name)
            // ...but agreement with a low-order one must fail.
            XCTAssertThrowsCryptError(expected, v.name) { _ = try key.x25519SharedSecret(with: peer) }
            XCTAssertThrowsCryptError(expected, v.name) {
                _ = try v.publicKey.bytes.withUnsafeBytes { try key.x25519SharedSecret(withPeer: $0) }
            }
        }
    }

    func testX25519_GeneratedKeysAgreeAndRoundTripThroughPEM() throws {
        let alice = try PrivateKey.generateX25519()
        let bob = try PrivateKey.generateX25519()
        XCTAssertEqual(alice.kind, .x25519)
        XCTAssertEqual(alice.publicKey.kind, .x25519)
        XCTAssertNil(alice.publicKey.rsaModulusBytes)
        let aliceRaw = try XCTUnwrap(alice.publicKey.x25519Raw)
        let bobRaw = try XCTUnwrap(bob.publicKey.x25519Raw)
        XCTAssertEqual(aliceRaw.count, 32)
        XCTAssertNotEqual(aliceRaw, bobRaw)

        let ab = try bobRaw.withUnsafeBytes { try alice.x25519SharedSecret(withPeer: $0) }
        let ba = try aliceRaw.withUnsafeBytes { try bob.x25519SharedSecret(withPeer: $0) }
        XCTAssertEqual(ab.count, 32)
        XCTAssertTrue(ab == ba)

        // SubjectPublicKeyInfo: SEQUENCE { SEQUENCE { OID 1.3.101.110 }, BIT STRING raw }.
        XCTAssertEqual(try alice.publicKey.subjectPublicKeyInfoDER(), [UInt8](hex: "302a300506032b656e032100")! + aliceRaw)

        let pem = TestSupport.bytes(of: try alice.pemPKCS8())
        XCTAssertTrue(pem.starts(with: Array("-----BEGIN PRIVATE KEY-----\n".utf8)))
        let reloaded = try KeyPEM.privateKey(pem)
        XCTAssertEqual(reloaded.publicKey.x25519Raw, aliceRaw)
        XCTAssertTrue(try bobRaw.withUnsafeBytes { try reloaded.x25519SharedSecret(withPeer: $0) } == ab)

        let publicPEM = try alice.publicKey.pem()
        XCTAssertTrue(publicPEM.starts(with: Array("-----BEGIN PUBLIC KEY-----\n".utf8)))
        XCTAssertEqual(try KeyPEM.publicKey(publicPEM).x25519Raw, aliceRaw)
        XCTAssertEqual(try aliceRaw.withUnsafeBytes { try PublicKey(x25519Raw: $0) }.pem(), publicPEM)
    }

    func testX25519_GeneratedKeyIsReadByOpenSSL() throws {
        let ours = try PrivateKey.generateX25519()
        try openssl.write(TestSupport.bytes(of: ours.pemPKCS8()), to: "ours.pem")
        try openssl.run(["pkey", "-in", "ours.pem", "-noout"])
        XCTAssertEqual(try openssl.run(["pkey", "-in", "ours.pem", "-pubout"]), try ours.publicKey.pem())
        // openssl's own re-encoding of the private key is byte-identical.
        XCTAssertEqual(try openssl.run(["pkey", "-in", "ours.pem"]), TestSupport.bytes(of: try ours.pemPKCS8()))
    }

    func testX25519_SharedSecretMatchesOpenSSLBothWays() throws {
        try openssl.run(["genpkey", "-algorithm", "X25519", "-out", "theirs.pem"])
        try openssl.run(["pkey", "-in", "theirs.pem", "-pubout", "-out", "theirs.pub"])
        let theirs = try KeyPEM.privateKey(openssl.read("theirs.pem"))
        let theirPublic = try KeyPEM.publicKey(openssl.read("theirs.pub"))
        XCTAssertEqual(theirs.kind, .x25519)
        XCTAssertEqual(theirPublic.x25519Raw, theirs.publicKey.x25519Raw)
        XCTAssertEqual(try theirs.publicKey.pem(), try openssl.read("theirs.pub"))

        let ours = try PrivateKey.generateX25519()
        try openssl.write(ours.publicKey.pem(), to: "ours.pub")
        try openssl.write(TestSupport.bytes(of: ours.pemPKCS8()), to: "ours.pem")

        // openssl derives with its private key and our public key, and with
        // our private key and its public key; we derive both ways too.
        let opensslTheirs = try openssl.run(["pkeyutl", "-derive", "-inkey", "theirs.pem", "-peerkey", "ours.pub"])
        let opensslOurs = try openssl.run(["pkeyutl", "-derive", "-inkey", "ours.pem", "-peerkey", "theirs.pub"])
        let ourSide = try ours.x25519SharedSecret(with: theirPublic)
        let theirSide = try XCTUnwrap(ours.publicKey.x25519Raw).withUnsafeBytes { try theirs.x25519SharedSecret(withPeer: $0) }
        XCTAssertEqual(opensslTheirs.count, 32)
        XCTAssertEqual(opensslTheirs, opensslOurs)
        XCTAssertEqual(TestSupport.bytes(of: ourSide), opensslTheirs)
        XCTAssertEqual(TestSupport.bytes(of: theirSide), opensslTheirs)
    }

    func testX25519_RawKeyOfWrongSizeIsRejected() throws {
        let key = try PrivateKey.generateX25519()
        for count in [0, 1, 31, 33, 64] {
            let raw = [UInt8](repeating: 9, count: count)
            XCTAssertThrowsCryptError(.invalidKeySize(count), "\(count) bytes") {
                _ = try raw.withUnsafeBytes { try PublicKey(x25519Raw: $0) }
            }
            XCTAssertThrowsCryptError(.invalidKeySize(count), "\(count) bytes") {
                _ = try raw.withUnsafeBytes { try key.x25519SharedSecret(withPeer: $0) }
            }
        }
    }

    func testKeyKinds_OperationsOfTheOtherAlgorithmAreRefused() throws {
        let rsa = try rsaFixture().privateKey
        let x25519 = try PrivateKey.generateX25519()
        let peer = try XCTUnwrap(x25519.publicKey.x25519Raw)
        XCTAssertThrowsCryptError(.invalidKey("X25519 key agreement needs an X25519 key, not an RSA key")) {
            _ = try peer.withUnsafeBytes { try rsa.x25519SharedSecret(withPeer: $0) }
        }
        XCTAssertThrowsCryptError(.invalidKey("the peer key is not an X25519 key")) {
            _ = try x25519.x25519SharedSecret(with: rsa.publicKey)
        }
        let block = [UInt8](repeating: 1, count: 256)
        XCTAssertThrowsCryptError(.invalidKey("RSA-OAEP needs an RSA key, not an X25519 key")) {
            _ = try block.withUnsafeBytes { try x25519.rsaOAEPDecrypt($0, label: []) }
        }
        XCTAssertThrowsCryptError(.invalidKey("RSA-OAEP needs an RSA key, not an X25519 key")) {
            _ = try block.withUnsafeBytes { try x25519.publicKey.rsaOAEPEncrypt(UnsafeRawBufferPointer(rebasing: $0[0..<16]), label: []) }
        }
        XCTAssertNil(rsa.publicKey.x25519Raw)
        XCTAssertNil(x25519.publicKey.rsaModulusBytes)
    }

    // MARK: - RSA

    func testRSA_OpenSSLKeyLoadsInEveryForm() throws {
        let fixture = try rsaFixture()
        let key = fixture.privateKey
        XCTAssertEqual(key.kind, .rsa(bits: 2048))
        XCTAssertEqual(key.publicKey.kind, .rsa(bits: 2048))
        XCTAssertEqual(key.publicKey.rsaModulusBytes, 256)
        XCTAssertEqual(try key.publicKey.pem(), fixture.publicPEM)

        let publicKey = try KeyPEM.publicKey(fixture.publicPEM)
        XCTAssertEqual(publicKey.kind, .rsa(bits: 2048))
        XCTAssertEqual(try publicKey.subjectPublicKeyInfoDER(), try key.publicKey.subjectPublicKeyInfoDER())

        // Traditional "RSA PRIVATE KEY" (PKCS#1) form.
        try openssl.write(fixture.privatePEM, to: "key.pem")
        let traditional = try openssl.run(["pkey", "-in", "key.pem", "-traditional"])
        XCTAssertTrue(traditional.starts(with: Array("-----BEGIN RSA PRIVATE KEY-----".utf8)))
        XCTAssertEqual(try KeyPEM.privateKey(traditional).publicKey.subjectPublicKeyInfoDER(),
                       try publicKey.subjectPublicKeyInfoDER())

        // Our PKCS#8 output is what openssl writes, and openssl reads it.
        let pkcs8 = TestSupport.bytes(of: try key.pemPKCS8())
        XCTAssertTrue(pkcs8.starts(with: Array("-----BEGIN PRIVATE KEY-----\n".utf8)))
        XCTAssertEqual(pkcs8, try openssl.run(["pkey", "-in", "key.pem"]))
        try openssl.write(pkcs8, to: "ours.pem")
        XCTAssertEqual(try openssl.run(["pkey", "-in", "ours.pem", "-pubout"]), fixture.publicPEM)
        XCTAssertEqual(try openssl.run(["pkey", "-in", "ours.pem", "-pubout", "-outform", "DER"]),
                       try publicKey.subjectPublicKeyInfoDER())
    }

    func testRSA_EncryptHereDecryptWithOpenSSL() throws {
        let fixture = try rsaFixture()
        let publicKey = try KeyPEM.publicKey(fixture.publicPEM)
        try openssl.write(fixture.privatePEM, to: "key.pem")
        for label in [[], Array("encfs key slot".utf8)] {
            let message = try SecureRandom.bytes(32)
            let ciphertext = try message.withUnsafeBytes { try publicKey.rsaOAEPEncrypt($0, label: label) }
            XCTAssertEqual(ciphertext.count, 256)
            try openssl.write(ciphertext, to: "ct.bin")
            let decrypted = try openssl.run(["pkeyutl", "-decrypt", "-inkey", "key.pem", "-in", "ct.bin"]
                                            + OpenSSLCommandLine.oaepOptions(label: label))
            XCTAssertEqual(decrypted, message, "label \(label.hexString)")
        }
    }

    func testRSA_EncryptWithOpenSSLDecryptHere() throws {
        let fixture = try rsaFixture()
        try openssl.write(fixture.publicPEM, to: "key.pub")
        for label in [[], Array("encfs key slot".utf8)] {
            let message = try SecureRandom.bytes(48)
            try openssl.write(message, to: "pt.bin")
            let ciphertext = try openssl.run(["pkeyutl", "-encrypt", "-pubin", "-inkey", "key.pub", "-in", "pt.bin"]
                                             + OpenSSLCommandLine.oaepOptions(label: label))
            XCTAssertEqual(ciphertext.count, 256)
            let decrypted = try ciphertext.withUnsafeBytes { try fixture.privateKey.rsaOAEPDecrypt($0, label: label) }
            XCTAssertEqual(TestSupport.bytes(of: decrypted), message, "label \(label.hexString)")
        }
    }

    func testRSA_RoundTripAtEverySizeEdge() throws {
        let key = try rsaFixture().privateKey
        // 2048 bits: 256 − 2·32 − 2 = 190 bytes fit.
        for count in [0, 1, 31, 32, 33, 189, 190] {
            let message = try SecureRandom.bytes(count)
            let label = try SecureRandom.bytes(count % 7)
            let ciphertext = try message.withUnsafeBytes { try key.publicKey.rsaOAEPEncrypt($0, label: label) }
            let decrypted = try ciphertext.withUnsafeBytes { try key.rsaOAEPDecrypt($0, label: label) }
            XCTAssertEqual(decrypted.count, count)
            XCTAssertEqual(TestSupport.bytes(of: decrypted), message, "\(count) bytes")
        }
        let tooLong = [UInt8](repeating: 7, count: 191)
        XCTAssertThrowsInvalidParameter("191 bytes") {
            _ = try tooLong.withUnsafeBytes { try key.publicKey.rsaOAEPEncrypt($0, label: []) }
        }
    }

    func testRSA_WrongLabelFails() throws {
        let key = try rsaFixture().privateKey
        let message = Array("wrapped bundle key".utf8)
        let label = Array("slot 1".utf8)
        let ciphertext = try message.withUnsafeBytes { try key.publicKey.rsaOAEPEncrypt($0, label: label) }
        for wrong in [[], Array("slot 2".utf8), Array("slot 1\0".utf8)] {
            XCTAssertThrowsCryptError(.authenticationFailure, "label \(wrong.hexString)") {
                _ = try ciphertext.withUnsafeBytes { try key.rsaOAEPDecrypt($0, label: wrong) }
            }
        }
        XCTAssertEqual(TestSupport.bytes(of: try ciphertext.withUnsafeBytes { try key.rsaOAEPDecrypt($0, label: label) }), message)
    }

    func testRSA_CorruptCiphertextFails() throws {
        let key = try rsaFixture().privateKey
        let ciphertext = try Array("secret".utf8).withUnsafeBytes { try key.publicKey.rsaOAEPEncrypt($0, label: []) }
        for index in [0, 1, 128, 255] {
            var corrupt = ciphertext
            corrupt[index] ^= 0x01
            XCTAssertThrowsCryptError(.authenticationFailure, "byte \(index)") {
                _ = try corrupt.withUnsafeBytes { try key.rsaOAEPDecrypt($0, label: []) }
            }
        }
        let allOnes = [UInt8](repeating: 0xFF, count: 256) // larger than the modulus
        XCTAssertThrowsCryptError(.authenticationFailure) {
            _ = try allOnes.withUnsafeBytes { try key.rsaOAEPDecrypt($0, label: []) }
        }
        for count in [0, 255, 257] {
            let wrongSize = [UInt8](repeating: 1, count: count)
            XCTAssertThrowsCryptError(.invalidBufferSize(what: "RSA-OAEP ciphertext", expected: 256, actual: count)) {
                _ = try wrongSize.withUnsafeBytes { try key.rsaOAEPDecrypt($0, label: []) }
            }
        }
    }

    func testKeys_ConcurrentUseOfSharedKeys() throws {
        let rsa = try rsaFixture().privateKey
        let x25519 = try PrivateKey.generateX25519()
        let peer = try PrivateKey.generateX25519()
        let expected = try x25519.x25519SharedSecret(with: peer.publicKey)
        let failures = Failures()
        DispatchQueue.concurrentPerform(iterations: 16) { i in
            do {
                for _ in 0..<4 {
                    let message = [UInt8](repeating: UInt8(i), count: 40)
                    let ciphertext = try message.withUnsafeBytes { try rsa.publicKey.rsaOAEPEncrypt($0, label: [UInt8(i)]) }
                    let decrypted = try ciphertext.withUnsafeBytes { try rsa.rsaOAEPDecrypt($0, label: [UInt8(i)]) }
                    if TestSupport.bytes(of: decrypted) != message { failures.record("RSA round trip \(i)") }
                    if !(try x25519.x25519SharedSecret(with: peer.publicKey) == expected) { failures.record("X25519 \(i)") }
                    _ = try x25519.pemPKCS8()
                }
            } catch {
                failures.record("\(i): \(error)")
            }
        }
        XCTAssertEqual(failures.all, [])
    }

    // MARK: - Bad keys, each with its message

    func testPEM_RSA1024IsRefused() throws {
        try openssl.run(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024", "-out", "small.pem"])
        try openssl.run(["pkey", "-in", "small.pem", "-pubout", "-out", "small.pub"])
        let expected = CryptError.invalidKey("RSA key has 1024 bits; at least 2048 are required")
        XCTAssertThrowsCryptError(expected) { _ = try KeyPEM.privateKey(openssl.read("small.pem")) }
        XCTAssertThrowsCryptError(expected) { _ = try KeyPEM.publicKey(openssl.read("small.pub")) }
        XCTAssertEqual(expected.description, "invalid key: RSA key has 1024 bits; at least 2048 are required")
    }

    func testPEM_ECKeyIsRefused() throws {
        try openssl.run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "ec.pem"])
        try openssl.run(["pkey", "-in", "ec.pem", "-pubout", "-out", "ec.pub"])
        let traditional = try openssl.run(["pkey", "-in", "ec.pem", "-traditional"])
        XCTAssertTrue(traditional.starts(with: Array("-----BEGIN EC PRIVATE KEY-----".utf8)))
        let expected = CryptError.invalidKey("unsupported key type EC")
        XCTAssertThrowsCryptError(expected) { _ = try KeyPEM.privateKey(openssl.read("ec.pem")) }
        XCTAssertThrowsCryptError(expected) { _ = try KeyPEM.privateKey(traditional) }
        XCTAssertThrowsCryptError(expected) { _ = try KeyPEM.publicKey(openssl.read("ec.pub")) }
    }

    func testPEM_Ed25519KeyIsRefused() throws {
        try openssl.run(["genpkey", "-algorithm", "ED25519", "-out", "ed.pem"])
        try openssl.run(["pkey", "-in", "ed.pem", "-pubout", "-out", "ed.pub"])
        let expected = CryptError.invalidKey("unsupported key type Ed25519")
        XCTAssertThrowsCryptError(expected) { _ = try KeyPEM.privateKey(openssl.read("ed.pem")) }
        XCTAssertThrowsCryptError(expected) { _ = try KeyPEM.publicKey(openssl.read("ed.pub")) }
    }

    func testPEM_OtherAlgorithmsAreRefusedByName() throws {
        // RSA-PSS keys are RSA keys restricted to signatures; 1024 bits keeps
        // generation fast, and the type is checked before the size.
        try openssl.run(["genpkey", "-algorithm", "RSA-PSS", "-pkeyopt", "rsa_keygen_bits:1024", "-out", "pss.pem"])
        try openssl.run(["genpkey", "-algorithm", "X448", "-out", "x448.pem"])
        try openssl.run(["pkey", "-in", "x448.pem", "-pubout", "-out", "x448.pub"])
        XCTAssertThrowsCryptError(.invalidKey("unsupported key type RSA-PSS")) { _ = try KeyPEM.privateKey(openssl.read("pss.pem")) }
        XCTAssertThrowsCryptError(.invalidKey("unsupported key type X448")) { _ = try KeyPEM.privateKey(openssl.read("x448.pem")) }
        XCTAssertThrowsCryptError(.invalidKey("unsupported key type X448")) { _ = try KeyPEM.publicKey(openssl.read("x448.pub")) }
    }

    func testPEM_PrivateKeyWherePublicExpected() throws {
        let fixture = try rsaFixture()
        try openssl.write(fixture.privatePEM, to: "key.pem")
        let inputs: [(String, [UInt8])] = [
            ("X25519 PKCS#8", TestSupport.bytes(of: try PrivateKey.generateX25519().pemPKCS8())),
            ("RSA PKCS#8", fixture.privatePEM),
            ("RSA traditional", try openssl.run(["pkey", "-in", "key.pem", "-traditional"])),
            ("encrypted PKCS#8", try openssl.run(["pkey", "-in", "key.pem", "-aes256", "-passout", "pass:x"])),
        ]
        for (name, pem) in inputs {
            XCTAssertThrowsCryptError(.invalidKey("expected a public key but found a private key"), name) {
                _ = try KeyPEM.publicKey(pem)
            }
        }
    }

    func testPEM_PublicKeyWherePrivateExpected() throws {
        let fixture = try rsaFixture()
        try openssl.write(fixture.privatePEM, to: "key.pem")
        let inputs: [(String, [UInt8])] = [
            ("X25519 SubjectPublicKeyInfo", try PrivateKey.generateX25519().publicKey.pem()),
            ("RSA SubjectPublicKeyInfo", fixture.publicPEM),
            ("RSA PKCS#1 public key", try openssl.run(["rsa", "-in", "key.pem", "-RSAPublicKey_out"])),
        ]
        for (name, pem) in inputs {
            XCTAssertThrowsCryptError(.invalidKey("expected a private key but found a public key"), name) {
                _ = try KeyPEM.privateKey(pem)
            }
        }
    }

    func testPEM_EncryptedPrivateKeysAreRefused() throws {
        let fixture = try rsaFixture()
        try openssl.write(fixture.privatePEM, to: "key.pem")
        try openssl.run(["genpkey", "-algorithm", "X25519", "-aes256", "-pass", "pass:x", "-out", "x25519-encrypted.pem"])
        let inputs: [(String, [UInt8])] = [
            ("X25519 encrypted PKCS#8 (genpkey -aes256)", try openssl.read("x25519-encrypted.pem")),
            ("RSA encrypted PKCS#8", try openssl.run(["pkey", "-in", "key.pem", "-aes256", "-passout", "pass:x"])),
            ("RSA traditional with Proc-Type: 4,ENCRYPTED",
             try openssl.run(["pkey", "-in", "key.pem", "-traditional", "-aes256", "-passout", "pass:x"])),
        ]
        for (name, pem) in inputs {
            XCTAssertThrowsCryptError(.invalidKey("encrypted private keys are not supported"), name) {
                _ = try KeyPEM.privateKey(pem)
            }
        }
        let encryptedText = String(decoding: inputs[0].1, as: UTF8.self)
        XCTAssertTrue(encryptedText.hasPrefix("-----BEGIN ENCRYPTED PRIVATE KEY-----"))
        XCTAssertTrue(String(decoding: inputs[2].1, as: UTF8.self).contains("Proc-Type: 4,ENCRYPTED"))
        // An EncryptedPrivateKeyInfo under the plain label is not a
        // PrivateKeyInfo: OpenSSL does not ask for a passphrase, it fails.
        let relabeled = encryptedText.replacingOccurrences(of: "ENCRYPTED PRIVATE KEY", with: "PRIVATE KEY")
        XCTAssertThrowsCryptError(.invalidKey("malformed PEM")) { _ = try KeyPEM.privateKey(Array(relabeled.utf8)) }
    }

    func testPEM_MalformedInputs() throws {
        let privatePEM = TestSupport.bytes(of: try PrivateKey.generateX25519().pemPKCS8())
        let publicPEM = try PrivateKey.generateX25519().publicKey.pem()
        let privateText = String(decoding: privatePEM, as: UTF8.self)
        let body = privateText.split(separator: "\n")[1]
        // Broken armor: refused before the label is looked at, by both parsers.
        let brokenArmor: [(String, [UInt8])] = [
            ("empty", []),
            ("whitespace only", Array(" \n\t\r\n ".utf8)),
            ("text", Array("hello".utf8)),
            ("random bytes", try SecureRandom.bytes(300)),
            ("NUL bytes", [UInt8](repeating: 0, count: 64)),
            ("truncated in the middle", Array(privatePEM[0..<(privatePEM.count / 2)])),
            ("public key truncated", Array(publicPEM.dropLast(30))),
            ("END line missing", Array(privateText.replacingOccurrences(of: "-----END PRIVATE KEY-----", with: "").utf8)),
            ("BEGIN line missing", Array(privateText.replacingOccurrences(of: "-----BEGIN PRIVATE KEY-----\n", with: "").utf8)),
            ("labels differ", Array(privateText.replacingOccurrences(of: "-----END PRIVATE KEY-----", with: "-----END PUBLIC KEY-----").utf8)),
            ("two blocks", privatePEM + privatePEM),
            ("text before the block", Array("key:\n".utf8) + privatePEM),
            ("non-ASCII label", Array("-----BEGIN PRIVATE K\u{C9}Y-----\n\(body)\n-----END PRIVATE K\u{C9}Y-----\n".utf8)),
            ("empty label", Array("-----BEGIN -----\n\(body)\n-----END -----\n".utf8)),
            ("one line", Array("-----BEGIN PRIVATE KEY-----".utf8)),
        ]
        for (name, pem) in brokenArmor {
            XCTAssertThrowsCryptError(.invalidKey("malformed PEM"), "PrivateKey: \(name)") { _ = try KeyPEM.privateKey(pem) }
            XCTAssertThrowsCryptError(.invalidKey("malformed PEM"), "PublicKey: \(name)") { _ = try KeyPEM.publicKey(pem) }
        }
        // Good armor, bad body: refused by OpenSSL's decoder, under each label.
        let brokenBodies: [(String, String)] = [
            ("base64 body shortened", String(body.dropLast(8))),
            ("base64 body missing", ""),
            ("not base64", "!!!not*base64!!!"),
            ("valid base64, not DER", "aGVsbG8gd29ybGQ="),
            ("X25519 public key under the private label", "MCowBQYDK2VuAyEAhSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="),
        ]
        for (name, content) in brokenBodies {
            let lines = content.isEmpty ? "" : content + "\n"
            XCTAssertThrowsCryptError(.invalidKey("malformed PEM"), "PrivateKey: \(name)") {
                _ = try KeyPEM.privateKey(Array("-----BEGIN PRIVATE KEY-----\n\(lines)-----END PRIVATE KEY-----\n".utf8))
            }
            guard !name.hasPrefix("X25519 public key") else { continue }
            XCTAssertThrowsCryptError(.invalidKey("malformed PEM"), "PublicKey: \(name)") {
                _ = try KeyPEM.publicKey(Array("-----BEGIN PUBLIC KEY-----\n\(lines)-----END PUBLIC KEY-----\n".utf8))
            }
        }
        // A private key's DER under the public label.
        XCTAssertThrowsCryptError(.invalidKey("malformed PEM")) {
            _ = try KeyPEM.publicKey(Array("-----BEGIN PUBLIC KEY-----\n\(body)\n-----END PUBLIC KEY-----\n".utf8))
        }
        XCTAssertEqual(CryptError.invalidKey("malformed PEM").description, "invalid key: malformed PEM")
    }

    func testPEM_WhitespaceAroundAndCRLFAreAccepted() throws {
        let key = try PrivateKey.generateX25519()
        let privatePEM = TestSupport.bytes(of: try key.pemPKCS8())
        let publicPEM = try key.publicKey.pem()
        let padded: ([UInt8]) -> [UInt8] = { Array(" \n\t\r\n".utf8) + $0 + Array("\r\n \t\n\n".utf8) }
        let crlf: ([UInt8]) -> [UInt8] = { Array(String(decoding: $0, as: UTF8.self).replacingOccurrences(of: "\n", with: "\r\n").utf8) }
        let noFinalNewline: ([UInt8]) -> [UInt8] = { Array($0.dropLast()) }
        for (name, transform) in [("padded", padded), ("CRLF", crlf), ("no final newline", noFinalNewline)] {
            XCTAssertEqual(try KeyPEM.privateKey(transform(privatePEM)).publicKey.x25519Raw, key.publicKey.x25519Raw, name)
            XCTAssertEqual(try KeyPEM.publicKey(transform(publicPEM)).x25519Raw, key.publicKey.x25519Raw, name)
        }
        let rsa = try rsaFixture()
        XCTAssertEqual(try KeyPEM.privateKey(padded(crlf(rsa.privatePEM))).kind, .rsa(bits: 2048))
        XCTAssertEqual(try KeyPEM.publicKey(padded(crlf(rsa.publicPEM))).kind, .rsa(bits: 2048))
    }

    func testPEM_UnsupportedLabelsAreNamed() throws {
        let body = "MCowBQYDK2VuAyEAhSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="
        let block: (String) -> [UInt8] = { Array("-----BEGIN \($0)-----\n\(body)\n-----END \($0)-----\n".utf8) }
        XCTAssertThrowsCryptError(.invalidKey("unsupported PEM label \"CERTIFICATE\" (expected \"PUBLIC KEY\")")) {
            _ = try KeyPEM.publicKey(block("CERTIFICATE"))
        }
        XCTAssertThrowsCryptError(.invalidKey("unsupported PEM label \"RSA PUBLIC KEY\" (expected \"PUBLIC KEY\")")) {
            _ = try KeyPEM.publicKey(block("RSA PUBLIC KEY"))
        }
        XCTAssertThrowsCryptError(.invalidKey("unsupported PEM label \"CERTIFICATE\" (expected \"PRIVATE KEY\")")) {
            _ = try KeyPEM.privateKey(block("CERTIFICATE"))
        }
        XCTAssertThrowsCryptError(.invalidKey("unsupported PEM label \"OPENSSH PRIVATE KEY\" (expected \"PRIVATE KEY\")")) {
            _ = try KeyPEM.privateKey(block("OPENSSH PRIVATE KEY"))
        }
        XCTAssertThrowsCryptError(.invalidKey("unsupported key type DSA")) { _ = try KeyPEM.privateKey(block("DSA PRIVATE KEY")) }
        // The same body under the right label is Alice's RFC 7748 public key.
        XCTAssertEqual(try KeyPEM.publicKey(block("PUBLIC KEY")).x25519Raw?.hexString,
                       "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
    }

    func testPEM_OversizedInputIsRefused() throws {
        let huge = Array("-----BEGIN PUBLIC KEY-----\n".utf8) + [UInt8](repeating: UInt8(ascii: "A"), count: 70_000)
            + Array("\n-----END PUBLIC KEY-----\n".utf8)
        XCTAssertThrowsCryptError(.invalidKey("PEM input is larger than the 65536-byte limit")) {
            _ = try KeyPEM.publicKey(huge)
        }
    }

    func testPEM_InvalidRSAPublicKeyIsRefused() throws {
        // SubjectPublicKeyInfo of an RSA key with a 2048-bit even modulus and
        // e = 65537: the right size, but not an RSA modulus.
        var modulus = [UInt8](repeating: 0xC3, count: 256)
        modulus[255] = 0x02
        let rsaPublicKey: [UInt8] = [0x30, 0x82, 0x01, 0x0A, 0x02, 0x82, 0x01, 0x01, 0x00] + modulus + [0x02, 0x03, 0x01, 0x00, 0x01]
        let bitString: [UInt8] = [0x03, 0x82, 0x01, 0x0F, 0x00] + rsaPublicKey
        let algorithm = [UInt8](hex: "300d06092a864886f70d0101010500")!
        let spki: [UInt8] = [0x30, 0x82, 0x01, 0x22] + algorithm + bitString
        XCTAssertEqual(spki.count, 0x122 + 4)
        XCTAssertThrowsCryptError(.invalidKey("RSA public key has an invalid modulus or exponent")) {
            _ = try KeyPEM.publicKey(KeyPEM.armor(label: "PUBLIC KEY", der: spki))
        }
        // The same modulus made odd passes the cheap checks only if it has no
        // small factors; 0xC3… is divisible by 3, so it is refused too.
        modulus[255] = 0x03
        let oddSPKI: [UInt8] = [0x30, 0x82, 0x01, 0x22] + algorithm + [0x03, 0x82, 0x01, 0x0F, 0x00, 0x30, 0x82, 0x01, 0x0A, 0x02, 0x82, 0x01, 0x01, 0x00] + modulus + [0x02, 0x03, 0x01, 0x00, 0x01]
        XCTAssertThrowsCryptError(.invalidKey("RSA public key has an invalid modulus or exponent")) {
            _ = try KeyPEM.publicKey(KeyPEM.armor(label: "PUBLIC KEY", der: oddSPKI))
        }
    }

    func testPEM_RSAPrivateHalfNotMatchingPublicHalfIsRefused() throws {
        // A traditional RSAPrivateKey (PKCS#1) is SEQUENCE { version, n, e,
        // d, p, q, dp, dq, qinv }. Flipping a byte inside d leaves a valid
        // public key (n, e) with private numbers that do not belong to it.
        let rsa = try rsaFixture()
        try openssl.write(rsa.privatePEM, to: "key.pem")
        let der = try openssl.run(["pkey", "-in", "key.pem", "-traditional", "-outform", "DER"])
        var cursor = 0
        func readHeader() throws -> (tag: UInt8, length: Int) {
            let tag = der[cursor]
            var length = Int(der[cursor + 1])
            cursor += 2
            if length & 0x80 != 0 {
                let bytes = length & 0x7F
                length = der[cursor..<(cursor + bytes)].reduce(0) { $0 << 8 | Int($1) }
                cursor += bytes
            }
            return (tag, length)
        }
        XCTAssertEqual(try readHeader().tag, 0x30)
        var integers: [Range<Int>] = []
        while integers.count < 4 {
            let (tag, length) = try readHeader()
            XCTAssertEqual(tag, 0x02)
            integers.append(cursor..<(cursor + length))
            cursor += length
        }
        let d = integers[3]
        var damaged = der
        damaged[d.lowerBound + d.count / 2] ^= 0x5A
        XCTAssertNoThrow(try KeyPEM.privateKey(KeyPEM.armor(label: "RSA PRIVATE KEY", der: der)), "the undamaged key must load")
        XCTAssertThrowsCryptError(.invalidKey("RSA private key does not match its public key")) {
            _ = try KeyPEM.privateKey(KeyPEM.armor(label: "RSA PRIVATE KEY", der: damaged))
        }
    }

    /// Mutates valid PEM keys a few thousand times, in the text and in the
    /// DER under the base64, and feeds each result to both parsers. Nothing
    /// may crash; a refused input must give `CryptError.invalidKey`; a key
    /// that still parses must survive being used.
    func testPEM_MutatedInputsNeverCrash() throws {
        let rsa = try rsaFixture()
        let x25519 = try PrivateKey.generateX25519()
        try openssl.write(rsa.privatePEM, to: "key.pem")
        let seeds: [[UInt8]] = [
            TestSupport.bytes(of: try x25519.pemPKCS8()),
            try x25519.publicKey.pem(),
            rsa.privatePEM,
            rsa.publicPEM,
            try openssl.run(["pkey", "-in", "key.pem", "-traditional"]),
        ]
        let rsaCiphertext = try Array("probe".utf8).withUnsafeBytes { try rsa.privateKey.publicKey.rsaOAEPEncrypt($0, label: []) }
        let peer = try XCTUnwrap(x25519.publicKey.x25519Raw)
        var rng = SeededGenerator(seed: 0x656E_6366_735F_706B) // fixed: a failure must reproduce
        var parsed = 0
        let iterations = 3000
        for iteration in 0..<iterations {
            let seed = seeds[iteration % seeds.count]
            let input = iteration % 2 == 0 ? Mutator.mutateText(seed, using: &rng) : Mutator.mutateDER(seed, using: &rng)
            let context = { "iteration \(iteration): \(String(decoding: input, as: UTF8.self).debugDescription)" }
            do {
                let key = try KeyPEM.privateKey(input)
                parsed += 1
                _ = try key.publicKey.pem()
                _ = try key.pemPKCS8()
                switch key.kind {
                case .x25519: _ = try? peer.withUnsafeBytes { try key.x25519SharedSecret(withPeer: $0) }
                case .rsa: _ = try? rsaCiphertext.withUnsafeBytes { try key.rsaOAEPDecrypt(UnsafeRawBufferPointer(rebasing: $0[0..<min($0.count, (key.publicKey.rsaModulusBytes ?? 0))]), label: []) }
                }
            } catch CryptError.invalidKey {
                // refused with a reason: fine
            } catch {
                XCTFail("PrivateKey: unexpected \(error); \(context())")
            }
            do {
                let key = try KeyPEM.publicKey(input)
                parsed += 1
                _ = try key.subjectPublicKeyInfoDER()
                switch key.kind {
                case .x25519: _ = try key.pem()
                case .rsa: _ = try Array("probe".utf8).withUnsafeBytes { try key.rsaOAEPEncrypt($0, label: [1]) }
                }
            } catch CryptError.invalidKey {
                // refused with a reason: fine
            } catch {
                XCTFail("PublicKey: unexpected \(error); \(context())")
            }
        }
        // Some mutations (a flipped bit in a public value, whitespace) keep
        // the key usable; most do not. Both must have happened.
        XCTAssertGreaterThan(parsed, 0)
        XCTAssertLessThan(parsed, iterations)
    }

    // MARK: - SHA-256

    func testSHA256_NISTVectors() throws {
        let file = try TestVectors.load("sha256-nist", as: TestVectors.SHA256.self)
        XCTAssertEqual(file.vectors.count, 3)
        for v in file.vectors {
            XCTAssertEqual(v.message.bytes.withUnsafeBytes { SHA256.hash($0) }.hexString, v.digest.description, v.name)
        }
        XCTAssertEqual(SHA256.hash(UnsafeRawBufferPointer(start: nil, count: 0)).hexString,
                       "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    func testSHA256_OneMillionA() {
        // FIPS 180-2 Appendix B.3.
        let message = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        XCTAssertEqual(message.withUnsafeBytes { SHA256.hash($0) }.hexString,
                       "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }
}

/// One RSA key pair made by `openssl genpkey`, with its PEM texts.
private struct RSAFixture: Sendable {
    let privatePEM: [UInt8]
    let publicPEM: [UInt8]
    let privateKey: PrivateKey

    static func make() throws -> RSAFixture {
        let openssl = try OpenSSLCommandLine()
        defer { openssl.removeDirectory() }
        let privatePEM = try openssl.run(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"])
        try openssl.write(privatePEM, to: "key.pem")
        let publicPEM = try openssl.run(["pkey", "-in", "key.pem", "-pubout"])
        return RSAFixture(privatePEM: privatePEM, publicPEM: publicPEM, privateKey: try KeyPEM.privateKey(privatePEM))
    }
}

/// PEM helpers for the tests.
private enum KeyPEM {
    static func privateKey(_ pem: [UInt8]) throws -> PrivateKey {
        try pem.withUnsafeBytes { try PrivateKey(pem: $0) }
    }

    static func publicKey(_ pem: [UInt8]) throws -> PublicKey {
        try pem.withUnsafeBytes { try PublicKey(pem: $0) }
    }

    /// PEM text for `der` under `label`, 64 base64 characters per line.
    static func armor(label: String, der: [UInt8]) -> [UInt8] {
        let base64 = Data(der).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return Array("-----BEGIN \(label)-----\n\(base64)\n-----END \(label)-----\n".utf8)
    }

    /// An X25519 private key as PKCS#8 PEM (RFC 8410):
    /// SEQUENCE { INTEGER 0, SEQUENCE { OID 1.3.101.110 }, OCTET STRING { OCTET STRING raw } }.
    static func x25519PKCS8(raw: [UInt8]) -> [UInt8] {
        armor(label: "PRIVATE KEY", der: [UInt8](hex: "302e020100300506032b656e04220420")! + raw)
    }
}

/// Random damage to PEM text, reproducible from the generator's seed.
private enum Mutator {
    /// One to three edits of the text: a flipped bit, a replaced byte, a
    /// deleted, inserted or duplicated run, or a truncation.
    static func mutateText(_ input: [UInt8], using rng: inout SeededGenerator) -> [UInt8] {
        var bytes = input
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            edit(&bytes, alphabet: base64Alphabet + Array(" \n\r\t-:=\0\u{7F}".utf8) + [0xC3, 0xFF], using: &rng)
        }
        return bytes
    }

    /// Decodes the base64 body, damages the DER the same way, and armors it
    /// again under the original label, so the damage reaches the ASN.1 and
    /// key decoders rather than the base64 decoder.
    static func mutateDER(_ input: [UInt8], using rng: inout SeededGenerator) -> [UInt8] {
        let lines = String(decoding: input, as: UTF8.self).split(separator: "\n")
        guard lines.count >= 3, let first = lines.first, first.hasPrefix("-----BEGIN "),
              let der = Data(base64Encoded: lines.dropFirst().dropLast().joined()) else { return mutateText(input, using: &rng) }
        let label = String(first.dropFirst("-----BEGIN ".count).dropLast("-----".count))
        var bytes = [UInt8](der)
        for _ in 0..<Int.random(in: 1...2, using: &rng) {
            edit(&bytes, alphabet: Array(0...255), using: &rng)
        }
        return KeyPEM.armor(label: label, der: bytes)
    }

    private static let base64Alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    private static func edit(_ bytes: inout [UInt8], alphabet: [UInt8], using rng: inout SeededGenerator) {
        guard !bytes.isEmpty else {
            bytes.append(alphabet.randomElement(using: &rng) ?? 0)
            return
        }
        let at = Int.random(in: 0..<bytes.count, using: &rng)
        switch Int.random(in: 0..<6, using: &rng) {
        case 0:
            bytes[at] ^= UInt8(1) << UInt8.random(in: 0..<8, using: &rng)
        case 1:
            bytes[at] = alphabet.randomElement(using: &rng) ?? 0
        case 2:
            bytes.removeSubrange(at..<min(bytes.count, at + Int.random(in: 1...16, using: &rng)))
        case 3:
            let count = Int.random(in: 1...8, using: &rng)
            bytes.insert(contentsOf: (0..<count).map { _ in alphabet.randomElement(using: &rng) ?? 0 }, at: at)
        case 4:
            bytes.removeSubrange(at...)
        default:
            let run = Array(bytes[at..<min(bytes.count, at + Int.random(in: 1...64, using: &rng))])
            bytes.insert(contentsOf: run, at: Int.random(in: 0...bytes.count, using: &rng))
        }
    }
}

/// Failure messages collected from concurrent work.
private final class Failures: @unchecked Sendable {
    private let lock = NSLock()
    private var messages: [String] = []

    func record(_ message: String) {
        lock.lock()
        messages.append(message)
        lock.unlock()
    }

    var all: [String] {
        lock.lock()
        defer { lock.unlock() }
        return messages
    }
}
