import CryptCore
import XCTest

/// HKDF-SHA256 against RFC 5869 and at the edges of its output length.
final class HKDFTests: XCTestCase {
    private func derive(_ ikm: [UInt8], salt: [UInt8], info: [UInt8], count: Int) throws -> [UInt8] {
        let okm = try ikm.withUnsafeBytes { i in
            try salt.withUnsafeBytes { s in
                try info.withUnsafeBytes { n in
                    try HKDF.deriveKey(inputKey: i, salt: s, info: n, outputCount: count)
                }
            }
        }
        XCTAssertEqual(okm.count, count)
        return TestSupport.bytes(of: okm)
    }

    func testVectors_RFC5869TestCases1To3() throws {
        let file = try TestVectors.load("hkdf-sha256-rfc5869", as: TestVectors.HKDF.self)
        XCTAssertEqual(file.vectors.count, 3)
        for v in file.vectors {
            let okm = try derive(v.ikm.bytes, salt: v.salt.bytes, info: v.info.bytes, count: v.okm.bytes.count)
            XCTAssertEqual(okm.hexString, v.okm.description, v.name)
        }
    }

    func testVectors_RFC5869ThroughOneReusedContext() throws {
        let file = try TestVectors.load("hkdf-sha256-rfc5869", as: TestVectors.HKDF.self)
        let context = try HMACSHA256Context()
        // Each derivation re-keys the context twice (extract, expand):
        // twice over, so no vector depends on a fresh context.
        for _ in 0..<2 {
            for v in file.vectors {
                let okm = try v.ikm.bytes.withUnsafeBytes { i in
                    try v.salt.bytes.withUnsafeBytes { s in
                        try v.info.bytes.withUnsafeBytes { n in
                            try HKDF.deriveKey(inputKey: i, salt: s, info: n, outputCount: v.okm.bytes.count, using: context)
                        }
                    }
                }
                XCTAssertEqual(TestSupport.bytes(of: okm).hexString, v.okm.description, v.name)
            }
        }
    }

    func testDerive_EmptySaltMeansHashLengthZeros() throws {
        let ikm = try SecureRandom.bytes(32)
        let info = Array("encfs chunk key".utf8)
        XCTAssertEqual(try derive(ikm, salt: [], info: info, count: 64),
                       try derive(ikm, salt: [UInt8](repeating: 0, count: 32), info: info, count: 64))
    }

    func testDerive_MaximumLengthAndPrefixProperty() throws {
        // 255 blocks is the most HKDF allows; the counter byte reaches 255.
        let ikm = try SecureRandom.bytes(32)
        let salt = try SecureRandom.bytes(16)
        let info = Array("info".utf8)
        let longest = try derive(ikm, salt: salt, info: info, count: 255 * 32)
        for count in [1, 31, 32, 33, 64, 100, 255 * 32 - 1] {
            XCTAssertEqual(try derive(ikm, salt: salt, info: info, count: count), Array(longest[0..<count]), "length \(count)")
        }
    }

    func testDerive_InvalidLengthThrows() throws {
        let ikm = [UInt8](repeating: 1, count: 32)
        for count in [0, -1, 255 * 32 + 1] {
            XCTAssertThrowsInvalidParameter("length \(count)") {
                _ = try derive(ikm, salt: [], info: [], count: count)
            }
        }
    }

    func testDeriveKey_MatchesRawDerivation() throws {
        let master = try SymmetricKey.random()
        let salt = try SecureRandom.bytes(32)
        let info = Array("encfs v1 index key".utf8)
        let derived = try HKDF.deriveKey(from: master, salt: salt, info: info)
        let raw = try derive(master.withUnsafeBytes { Array($0) }, salt: salt, info: info, count: 32)
        XCTAssertEqual(derived.withUnsafeBytes { Array($0) }, raw)
        // Different info, different key.
        let other = try HKDF.deriveKey(from: master, salt: salt, info: Array("encfs v1 chunk key".utf8))
        XCTAssertFalse(derived == other)
    }
}
