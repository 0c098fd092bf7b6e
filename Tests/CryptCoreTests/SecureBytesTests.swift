import CryptCore
import XCTest

/// Self-wiping secret storage: equality, randomness, empty secrets.
final class SecureBytesTests: XCTestCase {
    func testEquality_SameBytesAreEqual() {
        let bytes: [UInt8] = Array(0..<32)
        XCTAssertTrue(SecureBytes(copying: bytes) == SecureBytes(copying: bytes))
        let a = SecureBytes(copying: bytes)
        XCTAssertTrue(a == a)
    }

    func testEquality_DifferentBytesAreNotEqual() {
        var other: [UInt8] = Array(0..<32)
        other[31] ^= 1
        XCTAssertFalse(SecureBytes(copying: Array(0..<32)) == SecureBytes(copying: other))
        other = Array(0..<32)
        other[0] ^= 0x80
        XCTAssertFalse(SecureBytes(copying: Array(0..<32)) == SecureBytes(copying: other))
    }

    func testEquality_DifferentLengthsAreNotEqual() {
        XCTAssertFalse(SecureBytes(copying: [1, 2, 3]) == SecureBytes(copying: [1, 2]))
        XCTAssertFalse(SecureBytes(copying: []) == SecureBytes(copying: [0]))
    }

    func testRandom_ProducesDifferentValues() throws {
        let values = try (0..<16).map { _ in try SecureBytes.random(count: 32) }
        for i in values.indices {
            XCTAssertEqual(values[i].count, 32)
            for j in values.indices where j > i {
                XCTAssertFalse(values[i] == values[j], "random values \(i) and \(j) are equal")
            }
        }
        // Not all zero (the storage starts zeroed, so this proves it was filled).
        XCTAssertFalse(values[0].withUnsafeBytes(TestSupport.isAllZero))
    }

    func testCountZero_Works() throws {
        let empty = try SecureBytes.random(count: 0)
        XCTAssertEqual(empty.count, 0)
        XCTAssertEqual(empty.withUnsafeBytes { $0.count }, 0)
        XCTAssertTrue(empty == SecureBytes(copying: []))
        XCTAssertTrue(empty == SecureBytes(count: 0) { _ in })
        let fromEmptyBuffer = SecureBytes(copying: UnsafeRawBufferPointer(start: nil, count: 0))
        XCTAssertEqual(fromEmptyBuffer.count, 0)
    }

    func testInit_CopiesAndInitializerFills() {
        let source: [UInt8] = [9, 8, 7, 6, 5]
        XCTAssertEqual(TestSupport.bytes(of: SecureBytes(copying: source)), source)
        let filled = SecureBytes(count: 4) { buffer in
            for i in buffer.indices { buffer[i] = UInt8(i * 3) }
        }
        XCTAssertEqual(TestSupport.bytes(of: filled), [0, 3, 6, 9])
    }

    func testInit_ThrowingInitializerRethrows() {
        struct Refused: Error, Equatable {}
        XCTAssertThrowsError(try SecureBytes(count: 16) { (_: UnsafeMutableRawBufferPointer) throws(Refused) in
            throw Refused()
        }) { error in
            XCTAssertEqual(error as? Refused, Refused())
        }
    }

    func testWipe_ZeroesCallerBuffer() {
        var buffer = [UInt8](repeating: 0xEE, count: 100)
        buffer.withUnsafeMutableBytes { SecureBytes.wipe($0) }
        XCTAssertTrue(buffer.allSatisfy { $0 == 0 })
        // An empty buffer is fine.
        SecureBytes.wipe(UnsafeMutableRawBufferPointer(start: nil, count: 0))
    }

    func testConstantTimeEqual_ComparesLengthAndBytes() {
        let a: [UInt8] = [1, 2, 3, 4]
        a.withUnsafeBytes { x in
            [UInt8]([1, 2, 3, 4]).withUnsafeBytes { XCTAssertTrue(ConstantTime.equal(x, $0)) }
            [UInt8]([1, 2, 3, 5]).withUnsafeBytes { XCTAssertFalse(ConstantTime.equal(x, $0)) }
            [UInt8]([1, 2, 3]).withUnsafeBytes { XCTAssertFalse(ConstantTime.equal(x, $0)) }
        }
        XCTAssertTrue(ConstantTime.equal(UnsafeRawBufferPointer(start: nil, count: 0), UnsafeRawBufferPointer(start: nil, count: 0)))
    }

    func testSecureRandom_FillsRequestedCount() throws {
        for count in [0, 1, 12, 4097] {
            XCTAssertEqual(try SecureRandom.bytes(count).count, count)
        }
        XCTAssertNotEqual(try SecureRandom.bytes(32), try SecureRandom.bytes(32))
    }
}
