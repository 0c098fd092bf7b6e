@testable import CryptCore
import Foundation
import XCTest

/// Ed25519 signing keys: RFC 8032 vectors, round trips through PEM, signing
/// and verifying both ways with the `openssl` command line tool, rejected
/// signatures, refused keys each with its message, and damaged input that
/// must never crash.
final class SigningKeyTests: XCTestCase {
    private var openssl: OpenSSLCommandLine!

    override func setUpWithError() throws {
        openssl = try OpenSSLCommandLine()
    }

    override func tearDown() {
        openssl?.removeDirectory()
        openssl = nil
    }

    // MARK: - Published vectors

    func testRFC8032_Vectors() throws {
        let file = try TestVectors.load("ed25519-rfc8032", as: TestVectors.Ed25519.self)
        XCTAssertEqual(file.vectors.map(\.message.bytes.count), [0, 1, 2, 1023, 64])
        for v in file.vectors {
            let key = try SigningPEM.signingKey(SigningPEM.pkcs8(seed: v.secretKey.bytes))
            XCTAssertEqual(key.publicKey.rawRepresentation.hexString, v.publicKey.description, v.name)
            let signature = try v.message.bytes.withUnsafeBytes { try key.signature(for: $0) }
            XCTAssertEqual(signature.hexString, v.signature.description, v.name)

            // The published signature verifies under the published public
            // key, without the private key anywhere.
            let publicKey = try v.publicKey.bytes.withUnsafeBytes { try SigningPublicKey(rawRepresentation: $0) }
            XCTAssertEqual(publicKey, key.publicKey, v.name)
            XCTAssertTrue(publicKey.verifies(v.signature.bytes, for: v.message.bytes), v.name)
            for index in [0, 31, 32, 63] {
                var flipped = v.signature.bytes
                flipped[index] ^= 0x01
                XCTAssertFalse(publicKey.verifies(flipped, for: v.message.bytes), "\(v.name): signature byte \(index)")
            }
            if !v.message.bytes.isEmpty {
                var altered = v.message.bytes
                altered[altered.count - 1] ^= 0x80
                XCTAssertFalse(publicKey.verifies(v.signature.bytes, for: altered), "\(v.name): altered message")
            }
            XCTAssertFalse(publicKey.verifies(v.signature.bytes, for: v.message.bytes + [0]), "\(v.name): appended byte")
        }
    }

    // MARK: - Round trips

    func testRoundTrip_GenerateWritePEMReadSignVerify() throws {
        let key = try SigningKey.generate()
        let other = try SigningKey.generate()
        XCTAssertNotEqual(key.publicKey, other.publicKey)
        XCTAssertEqual(key.publicKey.rawRepresentation.count, SigningPublicKey.byteCount)

        let pem = TestSupport.bytes(of: try key.pemRepresentation)
        XCTAssertTrue(pem.starts(with: Array("-----BEGIN PRIVATE KEY-----\n".utf8)))
        let reloaded = try SigningPEM.signingKey(pem)
        XCTAssertEqual(reloaded.publicKey, key.publicKey)
        XCTAssertTrue(try reloaded.pemRepresentation == key.pemRepresentation)

        // SubjectPublicKeyInfo: SEQUENCE { SEQUENCE { OID 1.3.101.112 }, BIT STRING raw }.
        let publicPEM = key.publicKey.pemRepresentation
        XCTAssertEqual(publicPEM, SigningPEM.armor(label: "PUBLIC KEY",
                                                   der: [UInt8](hex: "302a300506032b6570032100")! + key.publicKey.rawRepresentation))
        let fromPEM = try SigningPEM.publicKey(publicPEM)
        XCTAssertEqual(fromPEM, key.publicKey)
        XCTAssertEqual(fromPEM.pemRepresentation, publicPEM)

        for count in [0, 1, 63, 64, 65, 1023, 1 << 20] {
            let message = try SecureRandom.bytes(count)
            let signature = try message.withUnsafeBytes { try reloaded.signature(for: $0) }
            XCTAssertEqual(signature.count, SigningKey.signatureByteCount)
            XCTAssertEqual(try message.withUnsafeBytes { try key.signature(for: $0) }, signature, "deterministic")
            XCTAssertTrue(key.publicKey.verifies(signature, for: message), "\(count) bytes")
            XCTAssertTrue(fromPEM.verifies(signature, for: message), "\(count) bytes")
            XCTAssertFalse(other.publicKey.verifies(signature, for: message), "\(count) bytes, other key")
        }
    }

    func testPublicKey_EqualityFollowsTheBytes() throws {
        let key = try SigningKey.generate()
        let copy = try key.publicKey.rawRepresentation.withUnsafeBytes { try SigningPublicKey(rawRepresentation: $0) }
        XCTAssertEqual(copy, key.publicKey)
        XCTAssertNotEqual(try SigningKey.generate().publicKey, key.publicKey)
    }

    // MARK: - The openssl command line tool

    func testOpenSSL_ItsKeySignsHereAsItSignsThere() throws {
        try openssl.run(["genpkey", "-algorithm", "ed25519", "-out", "key.pem"])
        try openssl.run(["pkey", "-in", "key.pem", "-pubout", "-out", "key.pub"])
        let key = try SigningPEM.signingKey(openssl.read("key.pem"))
        let publicKey = try SigningPEM.publicKey(openssl.read("key.pub"))
        XCTAssertEqual(key.publicKey, publicKey)
        XCTAssertEqual(publicKey.pemRepresentation, try openssl.read("key.pub"))
        // openssl's own PKCS#8 text and ours are the same bytes.
        XCTAssertEqual(TestSupport.bytes(of: try key.pemRepresentation), try openssl.read("key.pem"))

        // openssl 3.0's pkeyutl refuses an empty input, so no 0-byte message.
        for count in [1, 100, 4096, 1 << 16] {
            let message = try SecureRandom.bytes(count)
            try openssl.write(message, to: "message.bin")
            let theirs = try openssl.run(["pkeyutl", "-sign", "-rawin", "-inkey", "key.pem", "-in", "message.bin"])
            XCTAssertEqual(theirs.count, SigningKey.signatureByteCount)
            XCTAssertEqual(try message.withUnsafeBytes { try key.signature(for: $0) }, theirs, "\(count) bytes")
            XCTAssertTrue(publicKey.verifies(theirs, for: message), "\(count) bytes")
        }
    }

    func testOpenSSL_VerifiesOurSignaturesAndReadsOurKeys() throws {
        let key = try SigningKey.generate()
        try openssl.write(TestSupport.bytes(of: key.pemRepresentation), to: "ours.pem")
        try openssl.write(key.publicKey.pemRepresentation, to: "ours.pub")
        XCTAssertEqual(try openssl.run(["pkey", "-in", "ours.pem", "-pubout"]), key.publicKey.pemRepresentation)
        XCTAssertEqual(try openssl.run(["pkey", "-in", "ours.pem"]), TestSupport.bytes(of: try key.pemRepresentation))

        for count in [1, 1000, 1 << 16] {
            let message = try SecureRandom.bytes(count)
            var signature = try message.withUnsafeBytes { try key.signature(for: $0) }
            try openssl.write(message, to: "message.bin")
            try openssl.write(signature, to: "signature.bin")
            let verify = ["pkeyutl", "-verify", "-pubin", "-inkey", "ours.pub", "-rawin", "-in", "message.bin", "-sigfile", "signature.bin"]
            XCTAssertNoThrow(try openssl.run(verify), "\(count) bytes")
            signature[40] ^= 0x04
            try openssl.write(signature, to: "signature.bin")
            XCTAssertThrowsError(try openssl.run(verify), "\(count) bytes: openssl accepted a damaged signature")
        }
    }

    // MARK: - Rejected signatures

    func testVerify_WrongKeyFlippedBitsAndWrongLengthsAreRejected() throws {
        let key = try SigningKey.generate()
        let message = Array("bundle index digest".utf8)
        let signature = try message.withUnsafeBytes { try key.signature(for: $0) }
        XCTAssertTrue(key.publicKey.verifies(signature, for: message))
        XCTAssertFalse(try SigningKey.generate().publicKey.verifies(signature, for: message))

        for index in signature.indices {
            for bit in [0, 3, 7] {
                var flipped = signature
                flipped[index] ^= UInt8(1 << bit)
                XCTAssertFalse(key.publicKey.verifies(flipped, for: message), "byte \(index) bit \(bit)")
            }
        }
        for index in message.indices {
            var altered = message
            altered[index] ^= 0x20
            XCTAssertFalse(key.publicKey.verifies(signature, for: altered), "message byte \(index)")
        }
        XCTAssertFalse(key.publicKey.verifies(signature, for: []))
        XCTAssertFalse(key.publicKey.verifies(signature, for: Array(message.dropLast())))
        for count in [0, 1, 32, 63, 65, 128] {
            let resized = Array((signature + signature).prefix(count))
            XCTAssertFalse(key.publicKey.verifies(resized, for: message), "\(count)-byte signature")
        }
        XCTAssertFalse(key.publicKey.isValidSignature(UnsafeRawBufferPointer(start: nil, count: 0),
                                                      for: UnsafeRawBufferPointer(start: nil, count: 0)))
        XCTAssertFalse(key.publicKey.verifies([UInt8](repeating: 0, count: 64), for: message))
        XCTAssertFalse(key.publicKey.verifies([UInt8](repeating: 0xFF, count: 64), for: message))
    }

    /// RFC 8032 section 5.1.7 requires S < L; S + L would otherwise verify
    /// too (the same point), a second signature for the same message.
    func testVerify_MalleatedScalarIsRejected() throws {
        let key = try SigningKey.generate()
        let message = Array("release 1.2.3".utf8)
        let signature = try message.withUnsafeBytes { try key.signature(for: $0) }
        let order = [UInt8](hex: "edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010")! // L, little-endian
        var malleated = signature
        var carry = 0
        for i in 0..<32 {
            let sum = Int(signature[32 + i]) + Int(order[i]) + carry
            malleated[32 + i] = UInt8(sum & 0xFF)
            carry = sum >> 8
        }
        XCTAssertEqual(carry, 0)
        XCTAssertFalse(key.publicKey.verifies(malleated, for: message))
    }

    func testVerify_LeavesOpenSSLErrorQueueAlone() throws {
        let key = try SigningKey.generate()
        OpenSSLErrorQueue.clear()
        XCTAssertFalse(key.publicKey.verifies([UInt8](repeating: 1, count: 64), for: [1, 2, 3]))
        XCTAssertEqual(OpenSSLErrorQueue.oldest, 0)
        OpenSSLErrorQueue.queueUnrelatedError()
        let queued = OpenSSLErrorQueue.oldest
        XCTAssertNotEqual(queued, 0)
        XCTAssertFalse(key.publicKey.verifies([UInt8](repeating: 1, count: 64), for: [1, 2, 3]))
        XCTAssertEqual(OpenSSLErrorQueue.oldest, queued)
        OpenSSLErrorQueue.clear()
    }

    // MARK: - Refused keys

    func testPEM_OtherAlgorithmsAreRefusedByName() throws {
        try openssl.run(["genpkey", "-algorithm", "X25519", "-out", "x25519.pem"])
        // RSA keys are refused for their type before their size is looked at.
        try openssl.run(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024", "-out", "rsa.pem"])
        try openssl.run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "ec.pem"])
        try openssl.run(["genpkey", "-algorithm", "ED448", "-out", "ed448.pem"])
        for (file, name) in [("x25519", "X25519"), ("rsa", "RSA"), ("ec", "EC"), ("ed448", "Ed448")] {
            try openssl.run(["pkey", "-in", "\(file).pem", "-pubout", "-out", "\(file).pub"])
            let expected = CryptError.invalidKey("expected an Ed25519 key, not \(name)")
            XCTAssertThrowsCryptError(expected, file) { _ = try SigningPEM.signingKey(openssl.read("\(file).pem")) }
            XCTAssertThrowsCryptError(expected, file) { _ = try SigningPEM.publicKey(openssl.read("\(file).pub")) }
        }
        // Traditional (non-PKCS#8) forms are refused by their label.
        let traditionalRSA = try openssl.run(["pkey", "-in", "rsa.pem", "-traditional"])
        XCTAssertThrowsCryptError(.invalidKey("expected an Ed25519 key, not RSA")) { _ = try SigningPEM.signingKey(traditionalRSA) }
        let traditionalEC = try openssl.run(["pkey", "-in", "ec.pem", "-traditional"])
        XCTAssertThrowsCryptError(.invalidKey("unsupported key type EC")) { _ = try SigningPEM.signingKey(traditionalEC) }

        // CryptCore's own content keys are not signing keys, and a signing
        // key is not a content key.
        let x25519 = try PrivateKey.generateX25519()
        XCTAssertThrowsCryptError(.invalidKey("expected an Ed25519 key, not X25519")) {
            _ = try SigningPEM.signingKey(TestSupport.bytes(of: x25519.pemPKCS8()))
        }
        XCTAssertThrowsCryptError(.invalidKey("expected an Ed25519 key, not X25519")) {
            _ = try SigningPEM.publicKey(x25519.publicKey.pem())
        }
        let signing = try SigningKey.generate()
        XCTAssertThrowsCryptError(.invalidKey("unsupported key type Ed25519")) {
            _ = try TestSupport.bytes(of: signing.pemRepresentation).withUnsafeBytes { try PrivateKey(pem: $0) }
        }
        XCTAssertThrowsCryptError(.invalidKey("unsupported key type Ed25519")) {
            _ = try signing.publicKey.pemRepresentation.withUnsafeBytes { try PublicKey(pem: $0) }
        }
    }

    func testPEM_EncryptedKeyIsRefused() throws {
        try openssl.run(["genpkey", "-algorithm", "ed25519", "-aes-256-cbc", "-pass", "pass:secret", "-out", "encrypted.pem"])
        let encrypted = try openssl.read("encrypted.pem")
        XCTAssertTrue(encrypted.starts(with: Array("-----BEGIN ENCRYPTED PRIVATE KEY-----".utf8)))
        XCTAssertThrowsCryptError(.invalidKey("encrypted private keys are not supported")) {
            _ = try SigningPEM.signingKey(encrypted)
        }
    }

    func testPEM_PublicAndPrivateMixedUpAreRefused() throws {
        let key = try SigningKey.generate()
        XCTAssertThrowsCryptError(.invalidKey("expected a private key but found a public key")) {
            _ = try SigningPEM.signingKey(key.publicKey.pemRepresentation)
        }
        XCTAssertThrowsCryptError(.invalidKey("expected a public key but found a private key")) {
            _ = try SigningPEM.publicKey(TestSupport.bytes(of: key.pemRepresentation))
        }
    }

    func testPEM_TruncatedAndGarbageInputIsRefused() throws {
        let key = try SigningKey.generate()
        let privatePEM = TestSupport.bytes(of: try key.pemRepresentation)
        let publicPEM = key.publicKey.pemRepresentation
        for (pem, endLine) in [(privatePEM, "-----END PRIVATE KEY-----"), (publicPEM, "-----END PUBLIC KEY-----")] {
            let isPrivate = pem == privatePEM
            for length in 0..<pem.count {
                let prefix = Array(pem.prefix(length))
                // Only the final newline may go: the END line must be whole.
                let whole = String(decoding: prefix, as: UTF8.self).hasSuffix(endLine)
                do {
                    let parsed = isPrivate ? try SigningPEM.signingKey(prefix).publicKey : try SigningPEM.publicKey(prefix)
                    XCTAssertEqual(parsed, key.publicKey)
                    XCTAssertTrue(whole, "a \(length)-byte prefix was accepted")
                } catch CryptError.invalidKey {
                    XCTAssertFalse(whole, "the whole block (\(length) bytes) was refused")
                }
            }
        }
        var rng = SystemRandomNumberGenerator()
        let garbage: [[UInt8]] = [
            [], Array(" \n\t".utf8), [0], Array("-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n".utf8),
            Array("-----BEGIN PUBLIC KEY-----\n!!!!\n-----END PUBLIC KEY-----\n".utf8),
            Array("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEI\n-----END PRIVATE KEY-----\n".utf8),
            (0..<200).map { _ in UInt8.random(in: 0...255, using: &rng) },
            SigningPEM.armor(label: "PRIVATE KEY", der: (0..<48).map { _ in UInt8.random(in: 0...255, using: &rng) }),
            SigningPEM.armor(label: "PUBLIC KEY", der: (0..<44).map { _ in UInt8.random(in: 0...255, using: &rng) }),
        ]
        for input in garbage {
            XCTAssertThrowsInvalidKey(String(decoding: input, as: UTF8.self).debugDescription) { _ = try SigningPEM.signingKey(input) }
            XCTAssertThrowsInvalidKey(String(decoding: input, as: UTF8.self).debugDescription) { _ = try SigningPEM.publicKey(input) }
        }
    }

    /// Every single-bit change to the DER under the base64 of both PEM forms:
    /// refused with a reason, or read as a key that signs and verifies
    /// consistently: a different key when the bit was in the key itself, the
    /// same key when OpenSSL tolerates the change (the PKCS#8 version number,
    /// unused bits of the BIT STRING).
    func testPEM_EveryBitFlipInTheDERIsHandled() throws {
        let key = try SigningKey.generate()
        let message = Array("probe".utf8)
        let privateDER = try SigningPEM.der(of: TestSupport.bytes(of: key.pemRepresentation))
        let publicDER = try SigningPEM.der(of: key.publicKey.pemRepresentation)
        XCTAssertEqual(privateDER.count, 48)
        XCTAssertEqual(publicDER.count, 44)
        var parsed = 0
        var refused = 0
        for (der, label) in [(privateDER, "PRIVATE KEY"), (publicDER, "PUBLIC KEY")] {
            for bit in 0..<(der.count * 8) {
                var damaged = der
                damaged[bit / 8] ^= UInt8(1 << (bit % 8))
                let pem = SigningPEM.armor(label: label, der: damaged)
                do {
                    if label == "PRIVATE KEY" {
                        let other = try SigningPEM.signingKey(pem)
                        let signature = try message.withUnsafeBytes { try other.signature(for: $0) }
                        XCTAssertTrue(other.publicKey.verifies(signature, for: message), "\(label) bit \(bit)")
                        XCTAssertEqual(key.publicKey.verifies(signature, for: message), other.publicKey == key.publicKey,
                                       "\(label) bit \(bit)")
                    } else {
                        let other = try SigningPEM.publicKey(pem)
                        let signature = try message.withUnsafeBytes { try key.signature(for: $0) }
                        XCTAssertEqual(other.verifies(signature, for: message), other == key.publicKey, "\(label) bit \(bit)")
                        XCTAssertEqual(other.rawRepresentation.count, SigningPublicKey.byteCount)
                    }
                    parsed += 1
                } catch CryptError.invalidKey {
                    refused += 1
                } catch {
                    XCTFail("\(label) bit \(bit): unexpected \(error)")
                }
            }
        }
        XCTAssertGreaterThan(parsed, 0)
        XCTAssertGreaterThan(refused, 0)
    }

    func testRawPublicKey_WrongSizesAreRefused() {
        for count in [0, 1, 31, 33, 64] {
            XCTAssertThrowsCryptError(.invalidKeySize(count), "\(count) bytes") {
                _ = try [UInt8](repeating: 0x42, count: count).withUnsafeBytes { try SigningPublicKey(rawRepresentation: $0) }
            }
        }
    }

    func testRawPublicKey_SmallOrderPointsAreRefused() throws {
        let file = try TestVectors.load("ed25519-small-order", as: TestVectors.Ed25519SmallOrder.self)
        XCTAssertEqual(file.vectors.count, 14)
        let expected = CryptError.invalidKey("Ed25519 public key is a small-order point")
        for v in file.vectors {
            XCTAssertThrowsCryptError(expected, v.name) {
                _ = try v.publicKey.bytes.withUnsafeBytes { try SigningPublicKey(rawRepresentation: $0) }
            }
            let pem = SigningPEM.armor(label: "PUBLIC KEY", der: [UInt8](hex: "302a300506032b6570032100")! + v.publicKey.bytes)
            XCTAssertThrowsCryptError(expected, v.name) { _ = try SigningPEM.publicKey(pem) }
        }
    }

    func testRawPublicKey_NonCanonicalEncodingIsRefused() throws {
        // y = p + 2 … p + 18 (y ≥ p = 2^255 − 19), with either sign bit.
        for low in UInt8(0xEF)...0xFF {
            for top in [UInt8(0x7F), 0xFF] {
                let raw = [low] + [UInt8](repeating: 0xFF, count: 30) + [top]
                XCTAssertThrowsCryptError(.invalidKey("Ed25519 public key is not canonically encoded"), raw.hexString) {
                    _ = try raw.withUnsafeBytes { try SigningPublicKey(rawRepresentation: $0) }
                }
            }
        }
    }

    /// Encodings that decode to no curve point are refused when the key is
    /// made; points are taken. The expected split comes from an independent
    /// computation (Vectors/ed25519-off-curve.json, with its derivation).
    func testRawPublicKey_PointsOffTheCurveAreRefused() throws {
        struct Split: Decodable { let onCurve: [String]; let offCurve: [String] }
        let url = try XCTUnwrap(Bundle.module.url(forResource: "ed25519-off-curve", withExtension: "json",
                                                  subdirectory: "Vectors"))
        let split = try JSONDecoder().decode(Split.self, from: Data(contentsOf: url))
        XCTAssertGreaterThan(split.onCurve.count, 40)
        XCTAssertGreaterThan(split.offCurve.count, 40)
        for hex in split.offCurve {
            let raw = try XCTUnwrap([UInt8](hex: hex))
            XCTAssertThrowsCryptError(.invalidKey("Ed25519 public key is not a point on the curve"), hex) {
                _ = try raw.withUnsafeBytes { try SigningPublicKey(rawRepresentation: $0) }
            }
            let pem = SigningPEM.armor(label: "PUBLIC KEY", der: [UInt8](hex: "302a300506032b6570032100")! + raw)
            XCTAssertThrowsCryptError(.invalidKey("Ed25519 public key is not a point on the curve"), hex) {
                _ = try SigningPEM.publicKey(pem)
            }
        }
        for hex in split.onCurve {
            let raw = try XCTUnwrap([UInt8](hex: hex))
            XCTAssertNoThrow(try raw.withUnsafeBytes { try SigningPublicKey(rawRepresentation: $0) }, hex)
        }
    }

    /// Every key OpenSSL generates passes the point check (no false refusal).
    func testGeneratedKeys_AllPassThePointCheck() throws {
        for _ in 0..<200 {
            let key = try SigningKey.generate()
            let raw = key.publicKey.rawRepresentation
            XCTAssertNoThrow(try raw.withUnsafeBytes { try SigningPublicKey(rawRepresentation: $0) }, raw.hexString)
        }
    }

    // MARK: - Where the private key lives

    /// OpenSSL keeps the private key in its secure memory, which is
    /// CryptCore's locked heap; freeing the key gives the space back.
    func testPrivateKey_LivesInTheSecureHeap() throws {
        // The first keys after the heap exists may leave OpenSSL's own
        // long-lived state there (its DRBG); make that happen first.
        let pem = TestSupport.bytes(of: try SigningKey.generate().pemRepresentation)
        _ = try SigningPEM.signingKey(pem)
        let before = SecureHeap.usedBytes
        var generated: SigningKey? = try SigningKey.generate()
        var read: SigningKey? = try SigningPEM.signingKey(pem)
        XCTAssertGreaterThanOrEqual(SecureHeap.usedBytes - before, 2 * 32)
        XCTAssertNotNil(generated)
        XCTAssertNotNil(read)
        generated = nil
        read = nil
        XCTAssertEqual(SecureHeap.usedBytes, before)
    }

    // MARK: - Threads

    func testConcurrentSigningAndVerifyingWithSharedKeys() throws {
        let key = try SigningKey.generate()
        let publicKey = key.publicKey
        let failures = LockedFailures()
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            do {
                for round in 0..<50 {
                    let message = [UInt8](repeating: UInt8(thread), count: round)
                    let signature = try message.withUnsafeBytes { try key.signature(for: $0) }
                    if !publicKey.verifies(signature, for: message) { failures.record("thread \(thread) round \(round)") }
                    if publicKey.verifies(signature, for: message + [1]) { failures.record("thread \(thread) round \(round): altered") }
                }
            } catch {
                failures.record("thread \(thread): \(error)")
            }
        }
        XCTAssertEqual(failures.all, [])
    }
}

extension TestVectors {
    /// An Ed25519 vector: `secretKey` (the 32-byte seed) has `publicKey`,
    /// and signs `message` as `signature`.
    struct Ed25519: Decodable {
        let name: String
        let secretKey: Hex
        let publicKey: Hex
        let message: Hex
        let signature: Hex
    }

    /// A small-order Ed25519 public key, which must be refused.
    struct Ed25519SmallOrder: Decodable {
        let name: String
        let publicKey: Hex
    }
}

extension SigningPublicKey {
    /// ``isValidSignature(_:for:)`` over arrays.
    func verifies(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        signature.withUnsafeBytes { s in message.withUnsafeBytes { m in isValidSignature(s, for: m) } }
    }
}

/// PEM helpers for the signing key tests.
private enum SigningPEM {
    static func signingKey(_ pem: [UInt8]) throws -> SigningKey {
        try pem.withUnsafeBytes { try SigningKey(pemRepresentation: $0) }
    }

    static func publicKey(_ pem: [UInt8]) throws -> SigningPublicKey {
        try pem.withUnsafeBytes { try SigningPublicKey(pemRepresentation: $0) }
    }

    /// An Ed25519 private key as PKCS#8 PEM (RFC 8410):
    /// SEQUENCE { INTEGER 0, SEQUENCE { OID 1.3.101.112 }, OCTET STRING { OCTET STRING seed } }.
    static func pkcs8(seed: [UInt8]) -> [UInt8] {
        armor(label: "PRIVATE KEY", der: [UInt8](hex: "302e020100300506032b657004220420")! + seed)
    }

    /// PEM text for `der` under `label`, 64 base64 characters per line.
    static func armor(label: String, der: [UInt8]) -> [UInt8] {
        let base64 = Data(der).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return Array("-----BEGIN \(label)-----\n\(base64)\n-----END \(label)-----\n".utf8)
    }

    /// The DER under one PEM block.
    static func der(of pem: [UInt8]) throws -> [UInt8] {
        let lines = String(decoding: pem, as: UTF8.self).split(separator: "\n")
        return try XCTUnwrap(Data(base64Encoded: lines.dropFirst().dropLast().joined()).map { [UInt8]($0) })
    }
}

/// Asserts that `body` throws `CryptError.invalidKey` (any message).
private func XCTAssertThrowsInvalidKey(_ message: @autoclosure () -> String = "",
                                       file: StaticString = #filePath, line: UInt = #line,
                                       _ body: () throws -> Void) {
    do {
        try body()
        XCTFail("expected CryptError.invalidKey, nothing was thrown. \(message())", file: file, line: line)
    } catch CryptError.invalidKey {
        // expected
    } catch {
        XCTFail("expected CryptError.invalidKey, got \(error). \(message())", file: file, line: line)
    }
}

/// Failure messages collected from concurrent work.
private final class LockedFailures: @unchecked Sendable {
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
