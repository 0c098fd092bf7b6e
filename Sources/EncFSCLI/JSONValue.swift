import EncFSCore

/// A JSON document as the tools print it for `--json`: built as a value,
/// written in one piece, so stdout never holds half a document.
///
/// The command layer has no Foundation (it would cost every tool about
/// 1.7 MiB of memory, docs/ARCHITECTURE.md), hence this small writer.
/// Objects keep their keys in the order given; keys are snake_case by
/// convention of the callers; numbers are integers (sizes, counts, times)
/// and stay numbers; names that are byte strings go through
/// ``byteString(_:key:)``.
package indirect enum JSONValue {
    case null
    case bool(Bool)
    case integer(Int64)
    case unsigned(UInt64)
    case string(String)
    case array([JSONValue])
    case object([(key: String, value: JSONValue)])

    /// The fields for a byte string (a name, a path, a link target) under
    /// `key`: `key` holds the text itself when the bytes are UTF-8, else a
    /// display form with each invalid byte as `\xNN` (and a backslash as
    /// `\\`, so the display form is unambiguous), and then `key_base64`
    /// holds the raw bytes too.
    package static func byteString(_ bytes: [UInt8], key: String) -> [(key: String, value: JSONValue)] {
        if let text = String(validating: bytes, as: UTF8.self) { return [(key, .string(text))] }
        return [(key, .string(PrintableText.escaping(bytes, limit: Int.max))), (key + "_base64", .string(Base64.encode(bytes)))]
    }

    /// The document as UTF-8, one line, ending with a newline.
    package var serialized: [UInt8] {
        var out: [UInt8] = []
        write(to: &out)
        out.append(0x0A)
        return out
    }

    private func write(to out: inout [UInt8]) {
        switch self {
        case .null: out += Array("null".utf8)
        case .bool(let value): out += Array((value ? "true" : "false").utf8)
        case .integer(let value): out += Array(String(value).utf8)
        case .unsigned(let value): out += Array(String(value).utf8)
        case .string(let text): Self.writeString(text, to: &out)
        case .array(let values):
            out.append(UInt8(ascii: "["))
            for (i, value) in values.enumerated() {
                if i > 0 { out += [UInt8(ascii: ","), 0x20] }
                value.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let fields):
            out.append(UInt8(ascii: "{"))
            for (i, field) in fields.enumerated() {
                if i > 0 { out += [UInt8(ascii: ","), 0x20] }
                Self.writeString(field.key, to: &out)
                out += [UInt8(ascii: ":"), 0x20]
                field.value.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// A JSON string: quote, backslash and control characters escaped
    /// (DEL too, so that no raw control byte reaches a terminal).
    private static func writeString(_ text: String, to out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out += Array("\\\"".utf8)
            case UInt8(ascii: "\\"): out += Array("\\\\".utf8)
            case 0x0A: out += Array("\\n".utf8)
            case 0x09: out += Array("\\t".utf8)
            case 0x0D: out += Array("\\r".utf8)
            case 0..<0x20, 0x7F: out += Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral {
    package init(stringLiteral value: String) { self = .string(value) }
    package init(booleanLiteral value: Bool) { self = .bool(value) }
    package init(integerLiteral value: Int64) { self = .integer(value) }
}

extension JSONValue {
    /// A count or size.
    package static func number<T: BinaryInteger>(_ value: T) -> JSONValue {
        if let signed = Int64(exactly: value) { return .integer(signed) }
        return .unsigned(UInt64(clamping: value))
    }
}
