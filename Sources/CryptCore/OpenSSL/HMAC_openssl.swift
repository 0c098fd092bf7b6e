internal import COpenSSL

/// HMAC-SHA256.
public enum HMACSHA256 {
    /// The tag size in bytes.
    public static let byteCount = 32

    /// Computes HMAC-SHA256(key, data) into `output` (32 bytes). The
    /// corresponding C function is `HMAC` with `EVP_sha256`.
    ///
    /// - Throws: `CryptError.invalidBufferSize` or `.openSSL`.
    public static func authenticationCode(key: UnsafeRawBufferPointer, data: UnsafeRawBufferPointer,
                                          into output: UnsafeMutableRawBufferPointer) throws {
        guard output.count == byteCount, let out = output.baseAddress else {
            throw CryptError.invalidBufferSize(what: "HMAC output", expected: byteCount, actual: output.count)
        }
        var length: UInt32 = 0
        // HMAC() accepts a null key pointer only with length 0; pass a valid
        // one-byte dummy for empty inputs so no null pointer reaches C.
        var zero: UInt8 = 0
        let result = withUnsafeMutablePointer(to: &zero) { dummy -> UnsafeMutablePointer<UInt8>? in
            HMAC(Digests.sha256.pointer,
                 key.baseAddress ?? UnsafeRawPointer(dummy), Int32(key.count),
                 data.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafePointer(dummy), data.count,
                 out.assumingMemoryBound(to: UInt8.self), &length)
        }
        guard result != nil, length == UInt32(byteCount) else { throw openSSLError("HMAC") }
    }

    /// Convenience form returning a new array (for public values only).
    public static func authenticationCode(key: UnsafeRawBufferPointer, data: UnsafeRawBufferPointer) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: byteCount)
        try out.withUnsafeMutableBytes { (o: UnsafeMutableRawBufferPointer) throws in
            try authenticationCode(key: key, data: data, into: o)
        }
        return out
    }
}

/// Digests fetched once: implicit fetching takes a global lock in OpenSSL 3.
final class Digests: @unchecked Sendable {
    let pointer: OpaquePointer

    private init(name: String) {
        guard let md = EVP_MD_fetch(nil, name, nil) else {
            preconditionFailure("internal error: OpenSSL has no \(name) digest")
        }
        pointer = md
    }

    /// SHA-256, fetched on first use and kept for the life of the process.
    static let sha256 = Digests(name: "SHA256")
}
