@testable import EncFSMount
import XCTest

/// Names in log lines (with --log-names) cannot break or forge lines.
final class MountLoggerTests: XCTestCase {
    private func escaped(_ bytes: [UInt8]) -> String {
        String(decoding: MountLogger.escaped(bytes), as: UTF8.self)
    }

    func testEscaped_ControlBytesBecomeHex() {
        XCTAssertEqual(escaped(Array("a\u{1b}[31mred".utf8)), "a\\x1b[31mred")
        XCTAssertEqual(escaped(Array("line\nforged: error".utf8)), "line\\x0aforged: error")
        XCTAssertEqual(escaped([0x00, 0x09, 0x0D, 0x1F, 0x7F]), "\\x00\\x09\\x0d\\x1f\\x7f")
    }

    func testEscaped_BackslashIsDoubledSoEscapesStayUnambiguous() {
        XCTAssertEqual(escaped(Array("a\\x1b".utf8)), "a\\\\x1b")
    }

    func testEscaped_PrintableAndUTF8PassThrough() {
        XCTAssertEqual(MountLogger.escaped(Array("dir/naïve file.txt".utf8)), Array("dir/naïve file.txt".utf8))
        XCTAssertEqual(MountLogger.escaped([0x20, 0x7E]), [0x20, 0x7E])
    }

    /// The same escaping as every other tool's output (PrintableText): a
    /// log line is valid UTF-8 however the name was encoded.
    func testEscaped_InvalidUTF8AndC1ControlsBecomeHex() {
        XCTAssertEqual(escaped([0x80, 0xFF, 0x20, 0x7E]), "\\x80\\xff ~")
        XCTAssertEqual(escaped([0xC2, 0x9B]), "\\xc2\\x9b")
    }
}
