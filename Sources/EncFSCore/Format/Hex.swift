/// Lowercase hexadecimal: the one encoder and digit decoder of the code
/// base (slot and key fingerprints, raw key files, temporary names, escaped
/// bytes in names shown to people: `PrintableText`).
package enum Hex {
    /// The digits, indexed by nibble.
    private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    /// The two hex digits of `byte` (ASCII), high nibble first.
    package static func digits(of byte: UInt8) -> (high: UInt8, low: UInt8) {
        (digits[Int(byte >> 4)], digits[Int(byte & 0x0F)])
    }

    /// `bytes` as lowercase hex, two digits per byte.
    package static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var text: [UInt8] = []
        text.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            let (high, low) = digits(of: byte)
            text.append(high)
            text.append(low)
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Writes the hex digits of `bytes` into the start of `output`, without
    /// allocating: for secrets, which must not pass through a `String`.
    ///
    /// - Precondition: `output` holds at least `2 · bytes.count` bytes (the
    ///   caller sizes it; nothing from outside chooses these lengths).
    package static func encode(_ bytes: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) {
        precondition(output.count >= 2 * bytes.count, "internal error: hex output of \(output.count) bytes for \(bytes.count)")
        for (i, byte) in bytes.enumerated() {
            (output[2 * i], output[2 * i + 1]) = digits(of: byte)
        }
    }

    /// The value of one hex digit (either case), or nil for any other byte.
    package static func value(ofDigit digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return digit - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
