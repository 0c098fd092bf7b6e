import EncFSRemote

/// Reads back what `encfs-ctl MNT access-log --json` prints, for
/// `--prefetch-list`: every `"path"` string and the `"chunks"` array of
/// `[first, last]` pairs after it (a name that is not UTF-8 is shown
/// escaped there: list such files by path, one per line, instead). A small scanner over JSON tokens, not a general parser:
/// it accepts that document however it was re-indented.
enum AccessLogJSON {
    private enum Token: Equatable {
        case punctuation(UInt8)
        case string([UInt8])
        case number(UInt64)
    }

    /// The files in `text`, or nil when it is not such a document.
    static func items(_ text: [UInt8]) -> [PrefetchItem]? {
        guard let tokens = tokens(text) else { return nil }
        var items: [PrefetchItem] = []
        var at = 0
        func next() -> Token? { at < tokens.count ? tokens[at] : nil }
        while at < tokens.count {
            defer { at += 1 }
            guard case .string(let key) = tokens[at], at + 2 < tokens.count, tokens[at + 1] == .punctuation(UInt8(ascii: ":")) else {
                continue
            }
            if key == Array("path".utf8), case .string(let path) = tokens[at + 2] {
                items.append(PrefetchItem(path: path, chunks: []))
            } else if key == Array("chunks".utf8), !items.isEmpty {
                // [[a,b],[c,d]]: the numbers two by two.
                var numbers: [UInt64] = []
                var depth = 0
                var index = at + 2
                repeat {
                    switch tokens[index] {
                    case .punctuation(UInt8(ascii: "[")): depth += 1
                    case .punctuation(UInt8(ascii: "]")): depth -= 1
                    case .number(let n): numbers.append(n)
                    default: break
                    }
                    index += 1
                } while depth > 0 && index < tokens.count
                guard numbers.count % 2 == 0 else { return nil }
                for pair in stride(from: 0, to: numbers.count, by: 2) where numbers[pair] <= numbers[pair + 1] && numbers[pair + 1] < .max {
                    items[items.count - 1].chunks.append(numbers[pair]..<(numbers[pair + 1] + 1))
                }
                at = index - 1
            }
        }
        return items
    }

    /// JSON tokens: punctuation, strings (escapes decoded; `\u` below 0x80
    /// only, as the printer writes nothing else escaped), whole numbers.
    private static func tokens(_ text: [UInt8]) -> [Token]? {
        var out: [Token] = []
        var i = 0
        while i < text.count {
            let byte = text[i]
            switch byte {
            case 0x20, 0x09, 0x0A, 0x0D: i += 1
            case UInt8(ascii: "{"), UInt8(ascii: "}"), UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: ":"), UInt8(ascii: ","):
                out.append(.punctuation(byte))
                i += 1
            case UInt8(ascii: "\""):
                var value: [UInt8] = []
                i += 1
                while i < text.count, text[i] != UInt8(ascii: "\"") {
                    if text[i] == UInt8(ascii: "\\"), i + 1 < text.count {
                        let escaped = text[i + 1]
                        switch escaped {
                        case UInt8(ascii: "n"): value.append(0x0A)
                        case UInt8(ascii: "t"): value.append(0x09)
                        case UInt8(ascii: "r"): value.append(0x0D)
                        case UInt8(ascii: "u"):
                            guard i + 5 < text.count, let code = UInt8(String(decoding: text[(i + 2)...(i + 5)], as: UTF8.self), radix: 16),
                                  code < 0x80 else { return nil }
                            value.append(code)
                            i += 4
                        default: value.append(escaped)
                        }
                        i += 2
                    } else {
                        value.append(text[i])
                        i += 1
                    }
                }
                guard i < text.count else { return nil }
                out.append(.string(value))
                i += 1
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                var n: UInt64 = 0
                while i < text.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(text[i]) {
                    let (times, o1) = n.multipliedReportingOverflow(by: 10)
                    let (sum, o2) = times.addingReportingOverflow(UInt64(text[i] - UInt8(ascii: "0")))
                    guard !o1, !o2 else { return nil }
                    n = sum
                    i += 1
                }
                out.append(.number(n))
            case UInt8(ascii: "-"), UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
                // Literals and negative numbers carry nothing wanted here.
                i += 1
                while i < text.count, !(text[i] == UInt8(ascii: ",") || text[i] == UInt8(ascii: "}") || text[i] == UInt8(ascii: "]")) {
                    i += 1
                }
            default:
                return nil
            }
        }
        return out
    }
}
