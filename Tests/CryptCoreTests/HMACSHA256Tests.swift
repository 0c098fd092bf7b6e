import CryptCore
import XCTest

/// HMAC-SHA256 against RFC 4231 and with empty and mis-sized buffers.
final class HMACSHA256Tests: XCTestCase {
    private func mac(key: [UInt8], data: [UInt8]) throws -> [UInt8] {
        try key.withUnsafeBytes { k in
            try data.withUnsafeBytes { d in try HMACSHA256.authenticationCode(key: k, data: d) }
        }
    }

    func testVectors_RFC4231TestCases() throws {
        let file = try TestVectors.load("hmac-sha256-rfc4231", as: TestVectors.HMAC.self)
        XCTAssertEqual(file.vectors.count, 6)
        for v in file.vectors {
            XCTAssertEqual(try mac(key: v.key.bytes, data: v.data.bytes).hexString, v.mac.description, v.name)
        }
    }

    func testAuthenticationCode_EmptyKeyAndData() throws {
        // HMAC-SHA256("", ""), cross-checked with Python's hmac module.
        XCTAssertEqual(try mac(key: [], data: []).hexString,
                       "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
    }

    func testAuthenticationCode_IntoBufferMatchesArrayForm() throws {
        let key = try SecureRandom.bytes(32)
        let data = try SecureRandom.bytes(1000)
        var out = [UInt8](repeating: 0, count: 32)
        try key.withUnsafeBytes { k in
            try data.withUnsafeBytes { d in
                try out.withUnsafeMutableBytes { try HMACSHA256.authenticationCode(key: k, data: d, into: $0) }
            }
        }
        XCTAssertEqual(out, try mac(key: key, data: data))
    }

    func testAuthenticationCode_WrongOutputSizeThrows() throws {
        for size in [0, 16, 31, 33, 64] {
            var out = [UInt8](repeating: 0, count: size)
            XCTAssertThrowsCryptError(.invalidBufferSize(what: "HMAC output", expected: 32, actual: size)) {
                try [UInt8(1)].withUnsafeBytes { k in
                    try out.withUnsafeMutableBytes { try HMACSHA256.authenticationCode(key: k, data: k, into: $0) }
                }
            }
        }
    }
}
