#if canImport(Glibc)
import Glibc
#endif

// Paths and names are byte strings in the library (names need not be
// UTF-8), so the tests build and compare them as `[UInt8]` too.

/// The UTF-8 bytes of `text`.
func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// `a/b/c` from byte components; empty components are left out.
func join(_ parts: [UInt8]...) -> [UInt8] {
    Array(parts.filter { !$0.isEmpty }.joined(separator: [UInt8(ascii: "/")]))
}

extension Array where Element == UInt8 {
    /// Parses a hex string; nil for an odd length or a non-hex digit.
    init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var i = 0
        while i < digits.count {
            guard let hi = Self.hexDigit(digits[i]), let lo = Self.hexDigit(digits[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        self = out
    }

    private static func hexDigit(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x61...0x66: return c - 0x61 + 10
        case 0x41...0x46: return c - 0x41 + 10
        default: return nil
        }
    }

    /// Lowercase hex.
    var hexString: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(count * 2)
        for b in self {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A readable rendering for failure messages: printable ASCII as is,
    /// every other byte as `\xNN`, so two different names never print alike.
    var debugPath: String {
        var out = ""
        for b in self {
            if b >= 0x20, b < 0x7F, b != UInt8(ascii: "\\") {
                out.append(Character(Unicode.Scalar(b)))
            } else {
                out += "\\x" + [b].hexString
            }
        }
        return out
    }
}
