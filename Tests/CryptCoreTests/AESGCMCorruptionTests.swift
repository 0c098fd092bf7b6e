import CryptCore
import XCTest

/// Every modification of a sealed message is refused with
/// `CryptError.authenticationFailure`, and the output buffer holds zeros
/// afterwards: `open` promises never to leave unauthenticated plaintext
/// behind. Output buffers start filled with 0xA5 so a buffer that was never
/// touched cannot pass for a wiped one.
final class AESGCMCorruptionTests: XCTestCase {
    /// Sizes covering a partial block, whole blocks and a multi-block message.
    static let sizes = [1, 16, 33, 4097]

    private typealias Sealed = SealedMessage

    private func makeSealed(size: Int, gcm: AESGCM) throws -> Sealed {
        try SealedMessage(size: size, aad: Array("bundle v1, entry 3, chunk 0".utf8), gcm: gcm)
    }

    /// Opens `s` (out of place) and requires an authentication failure and a
    /// zeroed output buffer.
    private func assertRejected(_ s: Sealed, key: SymmetricKey? = nil, nonce: [UInt8]? = nil, aad: [UInt8]? = nil,
                                _ what: String, gcm: AESGCM, file: StaticString = #filePath, line: UInt = #line) {
        var output = [UInt8](repeating: 0xA5, count: s.ciphertext.count)
        XCTAssertThrowsCryptError(.authenticationFailure, what, file: file, line: line) {
            try gcm.open(key: key ?? s.key, nonce: nonce ?? s.nonce, aad: aad ?? s.aad,
                         ciphertext: s.ciphertext, tag: s.tag, into: &output)
        }
        XCTAssertTrue(output.allSatisfy { $0 == 0 }, "\(what): output buffer not wiped", file: file, line: line)
    }

    func testOpen_FlippedFirstCiphertextByteFails() throws {
        let gcm = try AESGCM()
        for size in Self.sizes {
            var s = try makeSealed(size: size, gcm: gcm)
            s.ciphertext[0] ^= 0x01
            assertRejected(s, "size \(size), first byte", gcm: gcm)
        }
    }

    func testOpen_FlippedLastCiphertextByteFails() throws {
        let gcm = try AESGCM()
        for size in Self.sizes {
            var s = try makeSealed(size: size, gcm: gcm)
            s.ciphertext[size - 1] ^= 0x80
            assertRejected(s, "size \(size), last byte", gcm: gcm)
        }
    }

    func testOpen_FlippedTagByteFails() throws {
        let gcm = try AESGCM()
        for size in [0] + Self.sizes {
            for index in [0, 7, 15] {
                var s = try makeSealed(size: size, gcm: gcm)
                s.tag[index] ^= 0x10
                assertRejected(s, "size \(size), tag byte \(index)", gcm: gcm)
            }
        }
    }

    func testOpen_WrongAADFails() throws {
        let gcm = try AESGCM()
        for size in [0] + Self.sizes {
            let s = try makeSealed(size: size, gcm: gcm)
            var changed = s.aad
            changed[changed.count - 1] ^= 0x01
            assertRejected(s, aad: changed, "size \(size), changed AAD", gcm: gcm)
            assertRejected(s, aad: [], "size \(size), missing AAD", gcm: gcm)
            assertRejected(s, aad: s.aad + [0], "size \(size), longer AAD", gcm: gcm)
        }
    }

    func testOpen_WrongKeyFails() throws {
        let gcm = try AESGCM()
        for size in [0] + Self.sizes {
            let s = try makeSealed(size: size, gcm: gcm)
            assertRejected(s, key: try SymmetricKey.random(), "size \(size), wrong key", gcm: gcm)
            // A key differing in a single bit.
            var raw = s.key.withUnsafeBytes { Array($0) }
            raw[31] ^= 0x01
            assertRejected(s, key: try TestSupport.key(raw), "size \(size), one-bit key change", gcm: gcm)
        }
    }

    func testOpen_WrongNonceFails() throws {
        let gcm = try AESGCM()
        for size in [0] + Self.sizes {
            let s = try makeSealed(size: size, gcm: gcm)
            var nonce = s.nonce
            nonce[11] ^= 0x01
            assertRejected(s, nonce: nonce, "size \(size), wrong nonce", gcm: gcm)
        }
    }

    func testOpen_InPlaceCorruptionWipesBuffer() throws {
        let gcm = try AESGCM()
        for size in Self.sizes {
            let s = try makeSealed(size: size, gcm: gcm)
            var buffer = s.ciphertext
            buffer[size / 2] ^= 0x04
            XCTAssertThrowsCryptError(.authenticationFailure, "size \(size)") {
                try buffer.withUnsafeMutableBytes { b in
                    try s.nonce.withUnsafeBytes { n in
                        try s.aad.withUnsafeBytes { a in
                            try s.tag.withUnsafeBytes { t in
                                try gcm.open(key: s.key, nonce: n, aad: a, ciphertext: UnsafeRawBufferPointer(b), tag: t, into: b)
                            }
                        }
                    }
                }
            }
            XCTAssertTrue(buffer.allSatisfy { $0 == 0 }, "size \(size): in-place buffer not wiped")
        }
    }

    // MARK: - Length changes, through the `ciphertext || tag` array form
    //
    // Here the output is a `SecureBytes` that `open` allocates itself; on a
    // failure it is wiped and freed before the error reaches the caller, so
    // only the error can be checked.

    func testOpenSealed_AppendedByteFails() throws {
        let gcm = try AESGCM()
        for size in [0] + Self.sizes {
            let (key, nonce, aad, sealed) = try makeSealedArray(size: size, gcm: gcm)
            for extra in [UInt8(0), 0xFF] {
                XCTAssertThrowsCryptError(.authenticationFailure, "size \(size), appended \(extra)") {
                    _ = try (sealed + [extra]).withUnsafeBytes { try gcm.open(key: key, nonce: nonce, aad: aad, sealed: $0) }
                }
            }
        }
    }

    func testOpenSealed_TruncatedFails() throws {
        let gcm = try AESGCM()
        for size in [0] + Self.sizes {
            let (key, nonce, aad, sealed) = try makeSealedArray(size: size, gcm: gcm)
            // Drop one byte, drop the whole tag, drop everything but a partial tag.
            for keep in Set([sealed.count - 1, size, min(15, sealed.count - 1), 0]) where keep < sealed.count {
                XCTAssertThrowsCryptError(.authenticationFailure, "size \(size), kept \(keep) of \(sealed.count)") {
                    _ = try Array(sealed[0..<keep]).withUnsafeBytes {
                        try gcm.open(key: key, nonce: nonce, aad: aad, sealed: $0)
                    }
                }
            }
        }
    }

    func testOpenSealed_FlippedBytesFail() throws {
        let gcm = try AESGCM()
        let (key, nonce, aad, sealed) = try makeSealedArray(size: 100, gcm: gcm)
        for index in [0, 50, 99, 100, 115] {
            var tampered = sealed
            tampered[index] ^= 0x01
            XCTAssertThrowsCryptError(.authenticationFailure, "byte \(index)") {
                _ = try tampered.withUnsafeBytes { try gcm.open(key: key, nonce: nonce, aad: aad, sealed: $0) }
            }
        }
        // And the untouched message still opens with the same context.
        let opened = try sealed.withUnsafeBytes { try gcm.open(key: key, nonce: nonce, aad: aad, sealed: $0) }
        XCTAssertEqual(opened.count, 100)
    }

    private func makeSealedArray(size: Int, gcm: AESGCM) throws -> (SymmetricKey, [UInt8], [UInt8], [UInt8]) {
        let key = try SymmetricKey.random()
        let nonce = try SecureRandom.bytes(AESGCM.nonceByteCount)
        let aad = Array("slot 0".utf8)
        let sealed = try gcm.seal(key: key, nonce: nonce, aad: aad, plaintext: SecureBytes.random(count: size))
        return (key, nonce, aad, sealed)
    }
}
