/// The armor of one PEM block (RFC 7468), checked in Swift before OpenSSL
/// sees any byte of it.
///
/// OpenSSL's PEM reader skips text before `-----BEGIN`, picks the first
/// block whose label it likes, and reports "no start line" for anything
/// else. Reading the armor here first gives the caller a specific message
/// (a private key where a public key was expected, an encrypted key) and
/// means only one well-formed block reaches OpenSSL.
///
/// Accepted: optional whitespace, `-----BEGIN <label>-----`, body lines,
/// `-----END <label>-----` with the same label, optional whitespace. Lines
/// end in LF or CRLF; spaces and tabs at the end of a line are ignored. The
/// body (base64 and RFC 1421 headers) is decoded by OpenSSL, not here.
struct PEMArmor {
    /// Where the block says it belongs, judged by its label alone.
    enum Role: Equatable {
        /// A label ending in `PRIVATE KEY` (`PRIVATE KEY`, `RSA PRIVATE KEY`,
        /// `ENCRYPTED PRIVATE KEY`, `OPENSSH PRIVATE KEY`, …).
        case privateKey
        /// A label ending in `PUBLIC KEY` (`PUBLIC KEY`, `RSA PUBLIC KEY`).
        case publicKey
        /// Anything else (`CERTIFICATE`, `EC PARAMETERS`, …).
        case other
    }

    /// Largest input accepted. A PEM RSA key at the 16384-bit limit is about
    /// 13 KiB; the cap keeps a hostile input from costing more than that.
    static let maximumByteCount = 1 << 16
    /// Longest label accepted; the longest real one is `ENCRYPTED PRIVATE KEY`.
    static let maximumLabelLength = 64

    /// The label between `-----BEGIN ` and `-----`, e.g. `PRIVATE KEY`.
    /// Printable ASCII only, so it is safe to put in an error message.
    let label: String
    /// True when an RFC 1421 header (`Proc-Type: 4,ENCRYPTED` or `DEK-Info:`)
    /// says the body is encrypted, as in a traditional encrypted RSA key.
    let hasEncryptionHeader: Bool
    /// The block inside the input: from the first `-` of the BEGIN line to
    /// the last `-` of the END line.
    let range: Range<Int>

    /// The role the label gives the block.
    var role: Role {
        if label.hasSuffix("PRIVATE KEY") { return .privateKey }
        if label.hasSuffix("PUBLIC KEY") { return .publicKey }
        return .other
    }

    /// True for an encrypted private key, in either PKCS#8 or traditional form.
    var isEncrypted: Bool { label == "ENCRYPTED PRIVATE KEY" || hasEncryptionHeader }

    /// Reads the armor of `input`.
    ///
    /// - Throws: `CryptError.invalidKey("malformed PEM")` unless `input` is
    ///   one PEM block with matching BEGIN and END lines.
    init(parsing input: UnsafeRawBufferPointer) throws(CryptError) {
        let malformed = CryptError.invalidKey("malformed PEM")
        guard input.count <= Self.maximumByteCount else {
            throw CryptError.invalidKey("PEM input is larger than the \(Self.maximumByteCount)-byte limit")
        }
        var start = 0
        var end = input.count
        while start < end, Self.isWhitespace(input[start]) { start += 1 }
        while end > start, Self.isWhitespace(input[end - 1]) { end -= 1 }
        guard start < end else { throw malformed }

        // Split into lines, each trimmed of trailing CR, spaces and tabs.
        var lines: [Range<Int>] = []
        var lineStart = start
        for index in start...end where index == end || input[index] == UInt8(ascii: "\n") {
            var lineEnd = index
            while lineEnd > lineStart, Self.isLineEndPadding(input[lineEnd - 1]) { lineEnd -= 1 }
            lines.append(lineStart..<lineEnd)
            lineStart = index + 1
        }
        guard lines.count >= 2, let first = lines.first, let last = lines.last,
              let beginLabel = Self.label(of: first, in: input, prefix: "-----BEGIN "),
              let endLabel = Self.label(of: last, in: input, prefix: "-----END "),
              beginLabel == endLabel else { throw malformed }

        var encrypted = false
        for line in lines.dropFirst().dropLast() {
            let bytes = input[line]
            // A second BEGIN or END inside the block: more than one block.
            if bytes.starts(with: "-----".utf8) { throw malformed }
            // RFC 1421 headers ("Name: value") only appear in encrypted
            // traditional keys; base64 never contains a colon.
            if bytes.contains(UInt8(ascii: ":")) {
                let text = String(decoding: bytes, as: UTF8.self).uppercased()
                if text.hasPrefix("DEK-INFO") || (text.hasPrefix("PROC-TYPE") && text.contains("ENCRYPTED")) {
                    encrypted = true
                }
            }
        }
        label = beginLabel
        hasEncryptionHeader = encrypted
        range = first.lowerBound..<last.upperBound
    }

    /// The label of a `<prefix><label>-----` line, or nil when the line has
    /// another shape or the label is not printable ASCII.
    private static func label(of line: Range<Int>, in input: UnsafeRawBufferPointer, prefix: String) -> String? {
        let bytes = input[line]
        let suffix = "-----".utf8
        guard bytes.starts(with: prefix.utf8), bytes.count >= prefix.utf8.count + suffix.count,
              bytes.suffix(suffix.count).elementsEqual(suffix) else { return nil }
        let labelBytes = bytes.dropFirst(prefix.utf8.count).dropLast(suffix.count)
        guard !labelBytes.isEmpty, labelBytes.count <= maximumLabelLength,
              labelBytes.allSatisfy({ $0 >= 0x20 && $0 <= 0x7E }),
              labelBytes.first != UInt8(ascii: " "), labelBytes.last != UInt8(ascii: " "),
              labelBytes.first != UInt8(ascii: "-"), labelBytes.last != UInt8(ascii: "-") else { return nil }
        return String(decoding: labelBytes, as: UTF8.self)
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || (byte >= 0x09 && byte <= 0x0D) // space, \t \n \v \f \r
    }

    private static func isLineEndPadding(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0D
    }
}
