@testable import EncFSCore
import XCTest

/// `Hex` is the one hex encoder of the code base (fingerprints, key files,
/// temporary names); expected values are literal.
final class HexTests: XCTestCase {
    func testEncode_LiteralRows() {
        XCTAssertEqual(Hex.encode([UInt8]()), "")
        XCTAssertEqual(Hex.encode([0x00]), "00")
        XCTAssertEqual(Hex.encode([0x0A]), "0a", "leading zero kept")
        XCTAssertEqual(Hex.encode([0x00, 0x01, 0x7F, 0x80, 0xAB, 0xFF]), "00017f80abff")
        XCTAssertEqual(Hex.encode([UInt8](0...15)[4...]), "0405060708090a0b0c0d0e0f", "slices too")
    }

    func testDigitsOfByte_LiteralRows() {
        let rows: [(byte: UInt8, digits: String)] = [(0x00, "00"), (0x09, "09"), (0x0A, "0a"), (0x7F, "7f"), (0xA5, "a5"), (0xFF, "ff")]
        for row in rows {
            let (high, low) = Hex.digits(of: row.byte)
            XCTAssertEqual(String(decoding: [high, low], as: UTF8.self), row.digits, "byte \(row.byte)")
        }
    }

    func testEncodeIntoBuffer_WritesOnlyTheDigits() {
        let input: [UInt8] = [0xDE, 0xAD, 0x01]
        var output = [UInt8](repeating: 0x2E, count: 8)
        input.withUnsafeBytes { i in output.withUnsafeMutableBytes { Hex.encode(i, into: $0) } }
        XCTAssertEqual(String(decoding: output, as: UTF8.self), "dead01..")
    }

    func testValueOfDigit_EveryByte() {
        let digits = Array("0123456789abcdef".utf8)
        let upper = Array("0123456789ABCDEF".utf8)
        for byte in UInt8.min...UInt8.max {
            let expected = digits.firstIndex(of: byte) ?? upper.firstIndex(of: byte)
            XCTAssertEqual(Hex.value(ofDigit: byte), expected.map(UInt8.init), "byte \(byte)")
        }
    }
}
