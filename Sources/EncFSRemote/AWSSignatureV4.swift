import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// AWS Signature Version 4 of one request, computed here over CryptCore's
/// HMAC-SHA256 (AWS's "Signature Calculations for the Authorization
/// Header").
///
/// Why not libcurl's `CURLOPT_AWS_SIGV4`: it takes the secret key as
/// `CURLOPT_PASSWORD`, keeps a copy per connection and frees it without
/// wiping. Here the secret key is read only inside wiping storage: the
/// signing key chain lives in one ``SecureBytes`` per request, wiped when
/// it goes; what leaves is the signature, good for this request only.
package struct AWSSignatureV4: Sendable {
    /// The region the scope names.
    package let region: String
    /// The service the scope names (`s3`).
    package let service: String

    package init(region: String, service: String = "s3") {
        self.region = region
        self.service = service
    }

    /// The `Authorization` header line of a request.
    ///
    /// - Parameters:
    ///   - method: `GET`.
    ///   - path: the canonical URI, already percent-encoded as S3 wants it
    ///     (``S3Settings/encoded(_:)``; S3 does not encode it twice).
    ///   - query: the canonical query string (empty here).
    ///   - headers: the signed headers, names lowercase, values trimmed,
    ///     sorted by name; `host` and `x-amz-date` among them.
    ///   - payloadHash: the `x-amz-content-sha256` value.
    ///   - amzDate: `YYYYMMDDTHHMMSSZ`, as sent in `x-amz-date`.
    ///   - credentials: the key id and the secret key.
    /// - Returns: `Authorization: AWS4-HMAC-SHA256 Credential=…,
    ///   SignedHeaders=…, Signature=…`.
    /// - Throws: `CryptError` when HMAC fails.
    package func authorization(method: String, path: [UInt8], query: [UInt8], headers: [(name: [UInt8], value: [UInt8])],
                               payloadHash: [UInt8], amzDate: [UInt8], credentials: AWSCredentials) throws -> [UInt8] {
        let newline = UInt8(ascii: "\n")
        let date = Array(amzDate.prefix(8))
        let scope = date + Array("/\(region)/\(service)/aws4_request".utf8)
        let signedHeaders = Array(headers.map { String(decoding: $0.name, as: UTF8.self) }.joined(separator: ";").utf8)
        // The canonical request holds the session token's value: made in
        // one buffer of its final size (no copy left behind by a growth),
        // wiped once hashed.
        var canonical: [UInt8] = []
        canonical.reserveCapacity(method.utf8.count + path.count + query.count + signedHeaders.count + payloadHash.count + 6
                                  + headers.reduce(0) { $0 + $1.name.count + $1.value.count + 2 })
        canonical += method.utf8
        for part in [[newline], path, [newline], query, [newline]] { canonical += part }
        for header in headers {
            canonical += header.name
            canonical.append(UInt8(ascii: ":"))
            canonical += header.value
            canonical.append(newline)
        }
        for part in [[newline], signedHeaders, [newline], payloadHash] { canonical += part }
        let canonicalHash = canonical.withUnsafeBytes { SHA256.hash($0) }
        canonical.withUnsafeMutableBytes { SecureBytes.wipe($0) }
        let toSign = Array("AWS4-HMAC-SHA256\n".utf8) + amzDate + [newline] + scope + [newline] + Self.hex(canonicalHash)
        // The signature is good for this request only, but until S3's
        // clock window closes: its copies are wiped too (the caller wipes
        // the line returned).
        var signature = try signature(of: toSign, date: date, secret: credentials.secretAccessKey)
        var signatureHex = Self.hex(signature)
        signature.withUnsafeMutableBytes { SecureBytes.wipe($0) }
        defer { signatureHex.withUnsafeMutableBytes { SecureBytes.wipe($0) } }
        let prefix = Array("Authorization: AWS4-HMAC-SHA256 Credential=".utf8) + credentials.accessKeyID + [UInt8(ascii: "/")] + scope
            + Array(", SignedHeaders=".utf8) + signedHeaders + Array(", Signature=".utf8)
        var line: [UInt8] = []
        line.reserveCapacity(prefix.count + signatureHex.count)
        line += prefix
        line += signatureHex
        return line
    }

    /// HMAC-SHA256 of `message` under the signing key of `date`: kSecret =
    /// "AWS4" + secret, kDate, kRegion, kService, kSigning, each the HMAC
    /// of the next name under the one before, all in one wiping buffer.
    private func signature(of message: [UInt8], date: [UInt8], secret: SecureBytes) throws -> [UInt8] {
        let keyLength = HMACSHA256.byteCount
        let prefix = 4 + secret.count
        var signature = [UInt8](repeating: 0, count: keyLength)
        var failure: (any Error)?
        // The chain is computed while the buffer is being made: it is
        // writable only then, and wiped when `chain` goes.
        let chain = SecureBytes(count: prefix + 4 * keyLength) { (buffer: UnsafeMutableRawBufferPointer) in
            buffer.copyBytes(from: Array("AWS4".utf8))
            secret.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: buffer[4..<prefix]).copyMemory(from: $0) }
            var key = 0..<prefix
            for (step, name) in [date, Array(region.utf8), Array(service.utf8), Array("aws4_request".utf8)].enumerated() {
                let next = (prefix + step * keyLength)..<(prefix + (step + 1) * keyLength)
                do {
                    try name.withUnsafeBytes { data in
                        try HMACSHA256.authenticationCode(key: UnsafeRawBufferPointer(rebasing: buffer[key]), data: data,
                                                          into: UnsafeMutableRawBufferPointer(rebasing: buffer[next]))
                    }
                } catch {
                    failure = error
                    return
                }
                key = next
            }
        }
        if let failure { throw failure }
        try chain.withUnsafeBytes { buffer in
            try message.withUnsafeBytes { data in
                try signature.withUnsafeMutableBytes { out in
                    try HMACSHA256.authenticationCode(key: UnsafeRawBufferPointer(rebasing: buffer[(prefix + 3 * keyLength)...]),
                                                      data: data, into: out)
                }
            }
        }
        return signature
    }

    /// `YYYYMMDDTHHMMSSZ` of `seconds` since the epoch, UTC.
    package static func amzDate(_ seconds: time_t = time(nil)) -> [UInt8] {
        var when = seconds
        var parts = tm()
        gmtime_r(&when, &parts)
        var out = [CChar](repeating: 0, count: 32)
        let length = strftime(&out, out.count, "%Y%m%dT%H%M%SZ", &parts)
        return out.prefix(length).map { UInt8(bitPattern: $0) }
    }

    /// Lowercase hexadecimal.
    static func hex(_ bytes: [UInt8]) -> [UInt8] {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        // Appended digit by digit: no temporary array holds a piece.
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return out
    }
}
