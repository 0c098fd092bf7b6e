import CryptCore
import XCTest

/// 256-bit keys: exact size, randomness, equality.
final class SymmetricKeyTests: XCTestCase {
    func testInit_Rejects31And33Bytes() {
        for size in [31, 33] {
            XCTAssertThrowsCryptError(.invalidKeySize(size)) {
                _ = try [UInt8](repeating: 1, count: size).withUnsafeBytes { try SymmetricKey(copying: $0) }
            }
            XCTAssertThrowsCryptError(.invalidKeySize(size)) {
                _ = try SymmetricKey(SecureBytes(copying: [UInt8](repeating: 1, count: size)))
            }
        }
    }

    func testInit_RejectsOtherSizes() {
        for size in [0, 1, 16, 24, 64] {
            XCTAssertThrowsCryptError(.invalidKeySize(size)) {
                _ = try SymmetricKey(SecureBytes(copying: [UInt8](repeating: 1, count: size)))
            }
        }
    }

    func testInit_Accepts32BytesAndKeepsThem() throws {
        let raw: [UInt8] = Array(100..<132)
        let key = try TestSupport.key(raw)
        XCTAssertEqual(key.withUnsafeBytes { Array($0) }, raw)
        XCTAssertEqual(SymmetricKey.byteCount, 32)
        XCTAssertTrue(key == (try TestSupport.key(raw)))
    }

    func testRandom_ProducesDifferentKeys() throws {
        let a = try SymmetricKey.random()
        let b = try SymmetricKey.random()
        XCTAssertEqual(a.bytes.count, 32)
        XCTAssertFalse(a == b)
    }

    func testErrorDescription_NamesLengthNeverBytes() {
        XCTAssertEqual(CryptError.invalidKeySize(31).description, "invalid key size (31 bytes)")
        XCTAssertEqual(CryptError.authenticationFailure.description, "authentication failed")
    }
}
