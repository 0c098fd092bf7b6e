@testable import EncFSCLI
import SharedTestSupport
import XCTest

/// The JSON writer of the command layer: exact output for every value
/// kind, escaping, and Base64 against RFC 4648's vectors.
final class JSONValueTests: XCTestCase {
    private func text(_ value: JSONValue) -> String { String(decoding: value.serialized, as: UTF8.self) }

    func testSerialized_EveryKindInOrder() {
        let value = JSONValue.object([("b", true), ("n", .null), ("i", .number(-3)), ("u", .number(UInt64.max)),
                                      ("a", .array(["x", .array([]), .object([])]))])
        XCTAssertEqual(text(value), #"{"b": true, "n": null, "i": -3, "u": 18446744073709551615, "a": ["x", [], {}]}"# + "\n")
    }

    func testStrings_EscapeQuotesBackslashesAndControlBytes() {
        XCTAssertEqual(text(.string("a\"b\\c\nd\te\r\u{1b}[0m\u{7f}ü")), #""a\"b\\c\nd\te\r\u001b[0m\u007fü""# + "\n")
    }

    func testByteString_Utf8AloneOtherwiseDisplayAndBase64() {
        let utf8 = JSONValue.byteString(Array("ünï".utf8), key: "name")
        XCTAssertEqual(utf8.map(\.key), ["name"])
        let raw = JSONValue.byteString([0x61, 0xFF, 0x5C], key: "name")
        XCTAssertEqual(text(.object(raw)), #"{"name": "a\\xff\\\\", "name_base64": "Yf9c"}"# + "\n")
    }

    func testBase64_RFC4648Vectors() {
        let vectors = ["": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=", "foobar": "Zm9vYmFy"]
        for (input, expected) in vectors { XCTAssertEqual(Base64.encode(Array(input.utf8)), expected, input) }
        XCTAssertEqual(Base64.encode([0xFF, 0xFE, 0xFD]), "//79")
    }
}
