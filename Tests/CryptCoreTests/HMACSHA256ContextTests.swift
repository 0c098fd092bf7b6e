import CryptCore
import XCTest

/// The reusable HMAC-SHA256 context: RFC 4231 through one context re-keyed
/// for every vector, and the same tags as the one-shot HMAC.
final class HMACSHA256ContextTests: XCTestCase {
    private func mac(_ context: HMACSHA256Context, key: [UInt8], data: [UInt8]) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: HMACSHA256.byteCount)
        try key.withUnsafeBytes { k in
            try data.withUnsafeBytes { d in
                try out.withUnsafeMutableBytes { try context.authenticationCode(key: k, data: d, into: $0) }
            }
        }
        return out
    }

    func testVectors_RFC4231TestCasesThroughOneContext() throws {
        let file = try TestVectors.load("hmac-sha256-rfc4231", as: TestVectors.HMAC.self)
        XCTAssertEqual(file.vectors.count, 6)
        let context = try HMACSHA256Context()
        // Twice over: a key must not leak into the next tag.
        for _ in 0..<2 {
            for v in file.vectors {
                XCTAssertEqual(try mac(context, key: v.key.bytes, data: v.data.bytes).hexString, v.mac.description, v.name)
            }
        }
    }

    func testAuthenticationCode_MatchesOneShotAtEveryKeyLength() throws {
        let context = try HMACSHA256Context()
        // Empty, shorter than, equal to and longer than the 64-byte block.
        for keyLength in [0, 1, 16, 32, 63, 64, 65, 200] {
            for dataLength in [0, 1, 55, 64, 1000] {
                let key = try SecureRandom.bytes(keyLength)
                let data = try SecureRandom.bytes(dataLength)
                let oneShot = try key.withUnsafeBytes { k in
                    try data.withUnsafeBytes { d in try HMACSHA256.authenticationCode(key: k, data: d) }
                }
                XCTAssertEqual(try mac(context, key: key, data: data), oneShot, "key \(keyLength), data \(dataLength)")
            }
        }
    }

    func testAuthenticationCode_WrongOutputSizeThrows() throws {
        let context = try HMACSHA256Context()
        for size in [0, 16, 31, 33, 64] {
            var out = [UInt8](repeating: 0, count: size)
            XCTAssertThrowsError(try out.withUnsafeMutableBytes { o in
                try [UInt8](repeating: 1, count: 32).withUnsafeBytes { k in
                    try context.authenticationCode(key: k, data: k, into: o)
                }
            }, "size \(size)")
        }
    }
}
