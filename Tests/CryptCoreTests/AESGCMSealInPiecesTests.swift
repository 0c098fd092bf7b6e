import CryptCore
import XCTest

/// `AESGCM.seal(…pieces:)` gives exactly the ciphertext and tag of the
/// one-shot seal, however the message is cut, also while a second context
/// opens the same message under another key in pieces (how `rekey --remove`
/// re-seals a bundle's index without holding it whole).
final class AESGCMSealInPiecesTests: XCTestCase {
    /// Seals `message` fed in pieces of `sizes` (cycled), in place when
    /// `inPlace` is set.
    private func sealInPieces(_ message: [UInt8], key: SymmetricKey, nonce: [UInt8], aad: [UInt8], pieces sizes: [Int],
                              inPlace: Bool = false, gcm: AESGCM) throws -> (ciphertext: [UInt8], tag: [UInt8]) {
        var out = inPlace ? message : [UInt8](repeating: 0xA5, count: message.count)
        var tag = [UInt8](repeating: 0, count: AESGCM.tagByteCount)
        try nonce.withUnsafeBytes { n in
            try aad.withUnsafeBytes { a in
                try tag.withUnsafeMutableBytes { t in
                    try message.withUnsafeBytes { m in
                        try out.withUnsafeMutableBytes { o in
                            try gcm.seal(key: key, nonce: n, aad: a, tag: t) { encrypt in
                                var at = 0
                                var k = 0
                                while at < m.count {
                                    let size = min(sizes[k % sizes.count], m.count - at)
                                    let input = inPlace ? UnsafeRawBufferPointer(rebasing: o[at..<(at + size)])
                                                        : UnsafeRawBufferPointer(rebasing: m[at..<(at + size)])
                                    try encrypt(input, UnsafeMutableRawBufferPointer(rebasing: o[at..<(at + size)]))
                                    at += size
                                    k += 1
                                }
                            }
                        }
                    }
                }
            }
        }
        return (out, tag)
    }

    func testSealInPieces_EqualsOneShot() throws {
        let gcm = try AESGCM()
        for size in [0, 1, 15, 16, 17, 4097, 70_000] {
            let m = try SealedMessage(size: size, aad: Array("index aad".utf8), gcm: gcm)
            for pieces in [[1], [15, 16, 17], [16384], [size + 1]] {
                for inPlace in [false, true] {
                    let sealed = try sealInPieces(m.plaintext, key: m.key, nonce: m.nonce, aad: m.aad, pieces: pieces,
                                                  inPlace: inPlace, gcm: gcm)
                    XCTAssertEqual(sealed.ciphertext, m.ciphertext, "\(size) bytes in pieces of \(pieces), in place \(inPlace)")
                    XCTAssertEqual(sealed.tag, m.tag, "\(size) bytes in pieces of \(pieces), in place \(inPlace)")
                }
            }
        }
    }

    func testSealInPieces_PublishedVectors() throws {
        let file = try TestVectors.load("aes-256-gcm-spec", as: TestVectors.AESGCM.self)
        let gcm = try AESGCM()
        for v in file.vectors {
            let sealed = try sealInPieces(v.plaintext.bytes, key: try TestSupport.key(v.key.bytes), nonce: v.iv.bytes,
                                          aad: v.aad.bytes, pieces: [7, 33], gcm: gcm)
            XCTAssertEqual(sealed.ciphertext.hexString, v.ciphertext.description, v.name)
            XCTAssertEqual(sealed.tag.hexString, v.tag.description, v.name)
        }
    }

    /// Opening under the old key and sealing under the new one, piece by
    /// piece with two contexts, equals sealing the plaintext under the new
    /// key at once; a damaged old message fails the open after the pieces.
    func testResealWhileOpening_EqualsOneShotUnderTheNewKey() throws {
        let old = try SealedMessage(size: 50_000, aad: Array("old".utf8), gcm: try AESGCM())
        let newKey = try SymmetricKey.random()
        let newNonce = try SecureRandom.bytes(AESGCM.nonceByteCount)
        let newAAD = Array("new".utf8)
        var expected = [UInt8](repeating: 0, count: old.plaintext.count)
        var expectedTag = [UInt8](repeating: 0, count: AESGCM.tagByteCount)
        try AESGCM().seal(key: newKey, nonce: newNonce, aad: newAAD, plaintext: old.plaintext, into: &expected, tag: &expectedTag)

        func reseal(_ m: SealedMessage) throws -> (ciphertext: [UInt8], tag: [UInt8]) {
            let opener = try AESGCM()
            let sealer = try AESGCM()
            var out = [UInt8](repeating: 0, count: m.ciphertext.count)
            var scratch = [UInt8](repeating: 0, count: 4096)
            var tag = [UInt8](repeating: 0, count: AESGCM.tagByteCount)
            try newNonce.withUnsafeBytes { nn in
                try newAAD.withUnsafeBytes { na in
                    try tag.withUnsafeMutableBytes { t in
                        try sealer.seal(key: newKey, nonce: nn, aad: na, tag: t) { encrypt in
                            try m.nonce.withUnsafeBytes { on in
                                try m.aad.withUnsafeBytes { oa in
                                    try m.tag.withUnsafeBytes { ot in
                                        try opener.open(key: m.key, nonce: on, aad: oa, tag: ot) { decrypt in
                                            try m.ciphertext.withUnsafeBytes { c in
                                                try out.withUnsafeMutableBytes { o in
                                                    try scratch.withUnsafeMutableBytes { s in
                                                        var at = 0
                                                        while at < c.count {
                                                            let n = min(s.count, c.count - at)
                                                            let plain = UnsafeMutableRawBufferPointer(rebasing: s[0..<n])
                                                            try decrypt(UnsafeRawBufferPointer(rebasing: c[at..<(at + n)]), plain)
                                                            try encrypt(UnsafeRawBufferPointer(plain),
                                                                        UnsafeMutableRawBufferPointer(rebasing: o[at..<(at + n)]))
                                                            at += n
                                                        }
                                                    }
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            return (out, tag)
        }

        let resealed = try reseal(old)
        XCTAssertEqual(resealed.ciphertext, expected)
        XCTAssertEqual(resealed.tag, expectedTag)
        var damaged = old
        damaged.ciphertext[49_999] ^= 1
        XCTAssertThrowsCryptError(.authenticationFailure, "damaged old message") { _ = try reseal(damaged) }
    }

    func testSealInPieces_ErrorInPiecesPropagates_ContextReusable() throws {
        struct Stop: Error {}
        let gcm = try AESGCM()
        let m = try SealedMessage(size: 1000, aad: [], gcm: gcm)
        var tag = [UInt8](repeating: 0, count: AESGCM.tagByteCount)
        XCTAssertThrowsError(try m.nonce.withUnsafeBytes { n in
            try m.aad.withUnsafeBytes { a in
                try tag.withUnsafeMutableBytes { t in
                    try gcm.seal(key: m.key, nonce: n, aad: a, tag: t) { _ in throw Stop() }
                }
            }
        }) { XCTAssertTrue($0 is Stop, "\($0)") }
        XCTAssertEqual(tag, [UInt8](repeating: 0, count: AESGCM.tagByteCount), "a tag was written after a failure")
        // A piece whose output size differs is refused.
        XCTAssertThrowsError(try m.nonce.withUnsafeBytes { n in
            try m.aad.withUnsafeBytes { a in
                try tag.withUnsafeMutableBytes { t in
                    try gcm.seal(key: m.key, nonce: n, aad: a, tag: t) { encrypt in
                        var out = [UInt8](repeating: 0, count: 10)
                        try m.plaintext.withUnsafeBytes { p in
                            try out.withUnsafeMutableBytes { try encrypt(UnsafeRawBufferPointer(rebasing: p[0..<11]), $0) }
                        }
                    }
                }
            }
        }) { error in
            guard case CryptError.invalidBufferSize = error else { return XCTFail("\(error)") }
        }
        let sealed = try sealInPieces(m.plaintext, key: m.key, nonce: m.nonce, aad: m.aad, pieces: [333], gcm: gcm)
        XCTAssertEqual(sealed.ciphertext, m.ciphertext)
        XCTAssertEqual(sealed.tag, m.tag)
    }
}
