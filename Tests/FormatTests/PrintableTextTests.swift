import CryptCore
@testable import EncFSCore
import XCTest

/// Names and targets shown to people (security review, finding 5): a name
/// holding a newline and a terminal escape must come out as one line of
/// plain text, bytes that are not UTF-8 as `\xNN`, long paths capped.
final class PrintableTextTests: XCTestCase {
    private func shown(_ raw: [UInt8], limit: Int = PrintableText.defaultLimit) -> String {
        PrintableText.escaping(raw, limit: limit)
    }

    func testEscaping_NewlineAndTerminalEscape_ShownAsText() {
        XCTAssertEqual(shown(bytes("evil\n\u{1B}[31mname")), #"evil\x0a\x1b[31mname"#)
        XCTAssertEqual(shown([0x00, 0x09, 0x0D, 0x1F, 0x7F]), #"\x00\x09\x0d\x1f\x7f"#)
    }

    func testEscaping_C1ControlsEscaped() {
        // U+009B is CSI for terminals that obey 8-bit controls; U+0085 NEL.
        XCTAssertEqual(shown([UInt8(ascii: "a"), 0xC2, 0x9B, 0xC2, 0x85, 0xC2, 0xA0]), "a\\xc2\\x9b\\xc2\\x85\u{A0}")
    }

    func testEscaping_BidiAndLineSeparatorsEscaped() {
        // "Trojan Source": U+202E (RLO) would show "txt.exe" as "exe.txt".
        XCTAssertEqual(shown(bytes("a\u{202E}txt.exe")), #"a\xe2\x80\xaetxt.exe"#)
        XCTAssertEqual(shown(bytes("\u{2066}x\u{2069}")), #"\xe2\x81\xa6x\xe2\x81\xa9"#)
        XCTAssertEqual(shown(bytes("l\u{200E}r\u{200F}")), #"l\xe2\x80\x8er\xe2\x80\x8f"#)
        XCTAssertEqual(shown(bytes("\u{061C}")), #"\xd8\x9c"#, "Arabic letter mark")
        XCTAssertEqual(shown(bytes("one\u{2028}two\u{2029}")), #"one\xe2\x80\xa8two\xe2\x80\xa9"#)
        // Neighbours that only look alike stay: dashes, quotes, the joiner
        // that emoji need, the euro sign.
        XCTAssertEqual(shown(bytes("\u{2014}\u{201C}\u{200D}\u{20AC}")), "\u{2014}\u{201C}\u{200D}\u{20AC}")
        XCTAssertEqual(PrintableText.sanitizing("x\u{202E}y"), #"x\xe2\x80\xaey"#)
    }

    func testEscaping_InvalidUTF8_EachByteAsHex() {
        XCTAssertEqual(shown(bytes("bad-") + [0xFF, 0xFE] + bytes("-utf8")), #"bad-\xff\xfe-utf8"#)
        XCTAssertEqual(shown([0xC0, 0x80]), #"\xc0\x80"#, "overlong NUL")
        XCTAssertEqual(shown([0xED, 0xA0, 0x80]), #"\xed\xa0\x80"#, "surrogate")
        XCTAssertEqual(shown([0xF4, 0x90, 0x80, 0x80]), #"\xf4\x90\x80\x80"#, "above U+10FFFF")
        XCTAssertEqual(shown(bytes("x") + [0xE2, 0x82]), #"x\xe2\x82"#, "cut short")
        XCTAssertEqual(shown(bytes("inner") + [0x80]), #"inner\x80"#)
    }

    func testEscaping_ValidTextUnchangedBackslashDoubled() {
        XCTAssertEqual(shown(bytes("ünïcödé 文件 €.txt")), "ünïcödé 文件 €.txt")
        XCTAssertEqual(shown(bytes(#"a\x0a"#)), #"a\\x0a"#, "a literal backslash cannot pass for an escape")
    }

    func testEscaping_LongText_KeepsTheEndWithinTheLimit() {
        let long = [UInt8](repeating: UInt8(ascii: "a"), count: 10_000) + bytes("-end")
        let text = shown(long)
        XCTAssertEqual(text.utf8.count, PrintableText.defaultLimit)
        XCTAssertTrue(text.hasPrefix("…a"), String(text.prefix(10)))
        XCTAssertTrue(text.hasSuffix("a-end"))
        // Escapes are kept or dropped whole, and multi-byte characters too.
        let escapes = shown([UInt8](repeating: 0x0A, count: 100), limit: 22)
        XCTAssertEqual(escapes, "…" + String(repeating: #"\x0a"#, count: 4))
        let wide = shown(Array(String(repeating: "文", count: 100).utf8), limit: 10)
        XCTAssertEqual(wide, "…文文")
    }

    func testSanitizing_EscapesControlsKeepsBackslashes() {
        XCTAssertEqual(PrintableText.sanitizing("a\nb \\x0a \u{1B}[0m"), #"a\x0ab \x0a \x1b[0m"#)
        XCTAssertEqual(PrintableText.sanitizing("plain ünï"), "plain ünï")
    }

    /// A chain of 3,000 nested directories with 200-byte names: the path of
    /// the deepest is 600 KB, but the one built for a message stops after
    /// about 4 KiB (without walking further up) and starts with "…/".
    func testPathForMessage_DeepChain_CappedKeepingTheEnd() throws {
        typealias Record = IndexValidationTests.Record
        let depth = 3000
        var records = [Record(parent: 0, kind: .directory, name: [], size: 1, first: 1)]
        for i in 1...depth {
            let name = [UInt8](repeating: UInt8(ascii: "a") + UInt8(i % 26), count: 199) + [UInt8(ascii: "z")]
            records.append(Record(parent: i - 1, kind: .directory, name: name, size: i < depth ? 1 : 0, first: i < depth ? UInt64(i + 1) : 0))
        }
        let index = try IndexValidationTests.open(records)
        let deepest = try index.entry(at: depth)
        XCTAssertEqual(try index.path(of: deepest).count, depth * 201 - 1)
        let shown = try index.path(of: deepest, maximumLength: 4096)
        XCTAssertTrue(shown.starts(with: Array("…/".utf8)), String(decoding: shown.prefix(10), as: UTF8.self))
        XCTAssertLessThanOrEqual(shown.count, 4096 + 201 + 3)
        XCTAssertTrue(shown.reversed().starts(with: records[depth].name.reversed()))
        XCTAssertEqual(try index.path(of: deepest, maximumLength: .max), try index.path(of: deepest))
    }
}
