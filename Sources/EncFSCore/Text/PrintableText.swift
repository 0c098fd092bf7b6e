/// Outside bytes (names and symlink targets from a bundle or a source tree,
/// paths from argv) made safe to show on a terminal or in a log line.
///
/// A name may hold a newline (which forges a second log line or listing
/// entry) or terminal escape sequences (which recolour, move the cursor or
/// retitle the window of whoever reads the output). Every human-readable
/// output goes through this one type; `--json` output uses JSON escaping.
package enum PrintableText {
    /// The longest text shown, in bytes of output: a path can be longer than
    /// anything worth printing (a chain of nested directories), and a log
    /// line should stay one line a reader can take in.
    package static let defaultLimit = 4096

    /// What stands for the part of a long text that is left out.
    package static let ellipsis = "…"

    /// `bytes` as printable text.
    ///
    /// Valid UTF-8 is kept as it is, except control characters — C0
    /// (0x00–0x1F), DEL (0x7F), C1 (U+0080–U+009F, which some terminals
    /// obey as escape introducers), the bidirectional formatting characters
    /// (U+061C, U+200E–U+200F, U+202A–U+202E, U+2066–U+2069, which reorder
    /// what follows them on screen: a name could make a listing or a log
    /// line read differently from its bytes) and the line and paragraph
    /// separators U+2028–U+2029 (a line break to some readers) — and bytes
    /// that are not UTF-8: each of their bytes becomes `\xNN` (lowercase
    /// hex). A backslash becomes `\\`,
    /// so the result reads back unambiguously.
    ///
    /// - Parameters:
    ///   - bytes: the raw bytes.
    ///   - limit: at most this many bytes of output; a longer text keeps its
    ///     end (for a path, the name that matters) after ``ellipsis``.
    /// - Returns: text that holds no control character.
    package static func escaping(_ bytes: some Collection<UInt8>, limit: Int = defaultLimit) -> String {
        let input = Array(bytes)
        // Fast path: printable ASCII, short enough (most names).
        if input.count <= limit, input.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\\") }) {
            return String(decoding: input, as: UTF8.self)
        }
        // Every input byte gives at least one output byte, so the shown end
        // comes from the last `limit` input bytes: bounded work on any input.
        var start = max(0, input.count - limit)
        let skipped = start > 0
        // Begin on a character boundary: skip up to three continuation bytes.
        if skipped {
            var k = 0
            while k < 3, start < input.count, input[start] & 0xC0 == 0x80 {
                start += 1
                k += 1
            }
        }
        // Escaped units, each kept or dropped whole.
        var units: [[UInt8]] = []
        var i = start
        while i < input.count {
            let length = validSequenceLength(input, at: i)
            if length == 0 || isControl(input, at: i, length: length) {
                // A control of several bytes (C1, bidi) is escaped byte by
                // byte, like invalid UTF-8.
                for k in i..<(i + max(length, 1)) { units.append(escaped(input[k])) }
                i += max(length, 1)
            } else if input[i] == UInt8(ascii: "\\") {
                units.append([UInt8(ascii: "\\"), UInt8(ascii: "\\")])
                i += 1
            } else {
                units.append(Array(input[i..<(i + length)]))
                i += length
            }
        }
        var total = units.reduce(0) { $0 + $1.count }
        if total <= limit, !skipped { return String(decoding: units.joined(), as: UTF8.self) }
        let room = max(0, limit - ellipsis.utf8.count)
        var first = 0
        while total > room, first < units.count {
            total -= units[first].count
            first += 1
        }
        return ellipsis + String(decoding: units[first...].joined(), as: UTF8.self)
    }

    /// Text this code built, with outside bytes already passed through
    /// ``escaping(_:limit:)``, made safe once more: any control character
    /// left (from a description of an error of unknown kind, say) becomes
    /// `\xNN`. Backslashes are kept, so escaped text is not escaped twice.
    package static func sanitizing(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            if isControl(scalar) {
                for byte in String(scalar).utf8 { out += String(decoding: escaped(byte), as: UTF8.self) }
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    // MARK: - Helpers

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || isLayoutControl(scalar.value)
    }

    /// The bidirectional formatting characters and the line and paragraph
    /// separators: invisible, yet they change how the text around them is
    /// laid out.
    private static func isLayoutControl(_ value: UInt32) -> Bool {
        value == 0x061C || (0x200E...0x200F).contains(value) || (0x2028...0x202E).contains(value)
            || (0x2066...0x2069).contains(value)
    }

    /// Whether the valid sequence at `i` is a C0, DEL, C1 or layout control.
    private static func isControl(_ bytes: [UInt8], at i: Int, length: Int) -> Bool {
        switch length {
        case 1: return bytes[i] < 0x20 || bytes[i] == 0x7F
        case 2: return (bytes[i] == 0xC2 && bytes[i + 1] <= 0x9F) || (bytes[i] == 0xD8 && bytes[i + 1] == 0x9C)
        case 3:
            // U+2000–U+207F are E2 80 xx and E2 81 xx; the rest of the
            // three-byte range holds no layout control.
            guard bytes[i] == 0xE2, bytes[i + 1] == 0x80 || bytes[i + 1] == 0x81 else { return false }
            let value = 0x2000 + (UInt32(bytes[i + 1] & 0x3F) << 6) + UInt32(bytes[i + 2] & 0x3F)
            return isLayoutControl(value)
        default: return false
        }
    }

    /// `\xNN`.
    private static func escaped(_ byte: UInt8) -> [UInt8] {
        let (high, low) = Hex.digits(of: byte)
        return [UInt8(ascii: "\\"), UInt8(ascii: "x"), high, low]
    }

    /// The length of the well-formed UTF-8 sequence at `i` (RFC 3629: no
    /// overlong forms, no surrogates, nothing above U+10FFFF), or 0.
    private static func validSequenceLength(_ b: [UInt8], at i: Int) -> Int {
        let lead = b[i]
        let length: Int
        var secondRange: ClosedRange<UInt8> = 0x80...0xBF
        switch lead {
        case 0x00...0x7F: return 1
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; secondRange = 0xA0...0xBF
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; secondRange = 0x80...0x9F
        case 0xF0: length = 4; secondRange = 0x90...0xBF
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; secondRange = 0x80...0x8F
        default: return 0
        }
        guard b.count - i >= length, secondRange.contains(b[i + 1]) else { return 0 }
        for k in 2..<length where !(0x80...0xBF).contains(b[i + k]) { return 0 }
        return length
    }
}
