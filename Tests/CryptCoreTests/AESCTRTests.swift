import CryptCore
import XCTest

/// `AESCTR.decryptSegment` reproduces any 16-byte-aligned segment of an
/// AES-GCM message, and `AESGCM.open(…pieces:)` opens a message fed in
/// pieces exactly like the one-shot call, refusing the same corruptions:
/// the two halves of the paged index (verify once in pieces, read pages
/// later by segment).
final class AESCTRTests: XCTestCase {
    private typealias Message = SealedMessage

    private func makeMessage(size: Int, gcm: AESGCM) throws -> Message {
        try SealedMessage(size: size, aad: Array("index aad".utf8), gcm: gcm)
    }

    private func segment(_ m: Message, offset: Int, count: Int, ctr: AESCTR) throws -> [UInt8] {
        var out = [UInt8](repeating: 0xA5, count: count)
        try m.nonce.withUnsafeBytes { n in
            try m.ciphertext.withUnsafeBytes { c in
                try out.withUnsafeMutableBytes { o in
                    try ctr.decryptSegment(key: m.key, nonce: n, messageOffset: offset,
                                           ciphertext: UnsafeRawBufferPointer(rebasing: c[offset..<(offset + count)]), into: o)
                }
            }
        }
        return out
    }

    func testDecryptSegment_EqualsGCMPlaintextAtEveryAlignedOffset() throws {
        let gcm = try AESGCM()
        let ctr = try AESCTR()
        let m = try makeMessage(size: 3 * 4096 + 7, gcm: gcm)
        for offset in stride(from: 0, to: m.plaintext.count, by: 16) {
            for count in [0, 1, 15, 16, 17, 100, m.plaintext.count - offset] where offset + count <= m.plaintext.count {
                XCTAssertEqual(try segment(m, offset: offset, count: count, ctr: ctr), Array(m.plaintext[offset..<(offset + count)]),
                               "offset \(offset), \(count) bytes")
            }
        }
    }

    func testDecryptSegment_KeyAndNonceMatter() throws {
        let gcm = try AESGCM()
        let ctr = try AESCTR()
        let m = try makeMessage(size: 1000, gcm: gcm)
        var otherNonce = m
        otherNonce.nonce = m.nonce.map { $0 ^ 1 }
        XCTAssertNotEqual(try segment(otherNonce, offset: 32, count: 64, ctr: ctr), Array(m.plaintext[32..<96]))
        var otherKey = m
        otherKey.key = try SymmetricKey.random()
        XCTAssertNotEqual(try segment(otherKey, offset: 32, count: 64, ctr: ctr), Array(m.plaintext[32..<96]))
    }

    func testDecryptSegment_MisalignedOffsetThrows() throws {
        let gcm = try AESGCM()
        let ctr = try AESCTR()
        let m = try makeMessage(size: 64, gcm: gcm)
        for offset in [1, 8, 15, 17] {
            XCTAssertThrowsError(try segment(m, offset: offset, count: 16, ctr: ctr), "offset \(offset)") { error in
                guard case CryptError.invalidBufferSize = error else { return XCTFail("\(error)") }
            }
        }
    }

    private func openInPieces(_ m: Message, pieces sizes: [Int], gcm: AESGCM) throws -> [UInt8] {
        var out = [UInt8](repeating: 0xA5, count: m.ciphertext.count)
        try m.nonce.withUnsafeBytes { n in
            try m.aad.withUnsafeBytes { a in
                try m.tag.withUnsafeBytes { t in
                    try m.ciphertext.withUnsafeBytes { c in
                        try out.withUnsafeMutableBytes { o in
                            try gcm.open(key: m.key, nonce: n, aad: a, tag: t) { decrypt in
                                var at = 0
                                var k = 0
                                while at < c.count {
                                    let size = min(sizes[k % sizes.count], c.count - at)
                                    try decrypt(UnsafeRawBufferPointer(rebasing: c[at..<(at + size)]),
                                                UnsafeMutableRawBufferPointer(rebasing: o[at..<(at + size)]))
                                    at += size
                                    k += 1
                                }
                            }
                        }
                    }
                }
            }
        }
        return out
    }

    func testOpenInPieces_EqualsOneShot() throws {
        let gcm = try AESGCM()
        for size in [0, 1, 16, 4097, 70_000] {
            let m = try makeMessage(size: size, gcm: gcm)
            for pieces in [[1], [15, 16, 17], [16384], [size + 1]] {
                XCTAssertEqual(try openInPieces(m, pieces: pieces, gcm: gcm), m.plaintext, "\(size) bytes in pieces of \(pieces)")
            }
        }
    }

    func testOpenInPieces_CorruptionFails() throws {
        let gcm = try AESGCM()
        let m = try makeMessage(size: 5000, gcm: gcm)
        var badTag = m
        badTag.tag[0] ^= 1
        var badCiphertext = m
        badCiphertext.ciphertext[4999] ^= 0x80
        var badAAD = m
        badAAD.aad = m.aad + [0]
        for (what, bad) in [("tag", badTag), ("ciphertext", badCiphertext), ("aad", badAAD)] {
            XCTAssertThrowsCryptError(.authenticationFailure, what) { _ = try openInPieces(bad, pieces: [1000], gcm: gcm) }
        }
        // A piece whose output size differs is refused before decrypting.
        XCTAssertThrowsError(try m.nonce.withUnsafeBytes { n in
            try m.aad.withUnsafeBytes { a in
                try m.tag.withUnsafeBytes { t in
                    try gcm.open(key: m.key, nonce: n, aad: a, tag: t) { decrypt in
                        var out = [UInt8](repeating: 0, count: 10)
                        try m.ciphertext.withUnsafeBytes { c in
                            try out.withUnsafeMutableBytes { try decrypt(UnsafeRawBufferPointer(rebasing: c[0..<11]), $0) }
                        }
                    }
                }
            }
        })
        // The context still works afterwards.
        XCTAssertEqual(try openInPieces(m, pieces: [333], gcm: gcm), m.plaintext)
    }
}
