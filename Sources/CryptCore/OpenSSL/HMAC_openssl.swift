internal import COpenSSL

/// HMAC-SHA256.
package enum HMACSHA256 {
    /// The tag size in bytes.
    package static let byteCount = 32

    /// SHA-256's block size: HMAC pads its key to this length.
    static let blockSize = 64

    /// Computes HMAC-SHA256(key, data) into `output` (32 bytes), as RFC 2104
    /// builds it from SHA-256: H((K ⊕ opad) ‖ H((K ⊕ ipad) ‖ data)). The
    /// corresponding C functions are `EVP_DigestInit_ex2`,
    /// `EVP_DigestUpdate` and `EVP_DigestFinal_ex` with the digest fetched
    /// once per process.
    ///
    /// Not OpenSSL's one-shot `HMAC`: that fetches the HMAC algorithm and
    /// the digest by name and builds a MAC context on every call, twice
    /// the instructions of the construction itself, and the mount daemon
    /// derives a file key (two HMACs) for every file it reads
    /// (docs/PERFORMANCE.md). Nothing secret outlives the call: the padded
    /// key and the inner hash are in wiped scratch, and freeing the digest
    /// context wipes the hash state (OpenSSL clears it when it frees it).
    ///
    /// - Throws: `CryptError.invalidBufferSize` or `.openSSL`.
    package static func authenticationCode(key: UnsafeRawBufferPointer, data: UnsafeRawBufferPointer,
                                          into output: UnsafeMutableRawBufferPointer) throws {
        guard output.count == byteCount, output.baseAddress != nil else {
            throw CryptError.invalidBufferSize(what: "HMAC output", expected: byteCount, actual: output.count)
        }
        guard let context = EVP_MD_CTX_new() else { throw openSSLError("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        try SecureBytes.withScratch(count: blockSize + byteCount) { (scratch: UnsafeMutableRawBufferPointer) throws in
            let pad = UnsafeMutableRawBufferPointer(rebasing: scratch[0..<blockSize])
            let inner = UnsafeMutableRawBufferPointer(rebasing: scratch[blockSize...])
            // A key longer than a block is hashed first; shorter ones are
            // padded with the scratch's zeros.
            if key.count > blockSize {
                try digest(key, UnsafeRawBufferPointer(start: nil, count: 0), context: context,
                           into: UnsafeMutableRawBufferPointer(rebasing: pad[0..<byteCount]))
            } else if key.count > 0 {
                UnsafeMutableRawBufferPointer(rebasing: pad[0..<key.count]).copyMemory(from: key)
            }
            for i in 0..<blockSize { pad[i] ^= 0x36 }
            try digest(UnsafeRawBufferPointer(pad), data, context: context, into: inner)
            for i in 0..<blockSize { pad[i] ^= 0x36 ^ 0x5c }
            try digest(UnsafeRawBufferPointer(pad), UnsafeRawBufferPointer(inner), context: context, into: output)
        }
    }

    /// SHA-256 of `first` ‖ `second` into `output` (32 bytes), on `context`.
    private static func digest(_ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer, context: OpaquePointer,
                               into output: UnsafeMutableRawBufferPointer) throws {
        guard EVP_DigestInit_ex2(context, Digests.sha256.pointer, nil) == 1 else { throw openSSLError("EVP_DigestInit_ex2") }
        try update(context, with: first)
        try update(context, with: second)
        var length: UInt32 = 0
        guard EVP_DigestFinal_ex(context, output.bindMemory(to: UInt8.self).baseAddress, &length) == 1,
              length == UInt32(byteCount) else { throw openSSLError("EVP_DigestFinal_ex") }
    }

    private static func update(_ context: OpaquePointer, with part: UnsafeRawBufferPointer) throws {
        guard let bytes = part.baseAddress, part.count > 0 else { return }
        guard EVP_DigestUpdate(context, bytes, part.count) == 1 else { throw openSSLError("EVP_DigestUpdate") }
    }

    /// Convenience form returning a new array (for public values only).
    package static func authenticationCode(key: UnsafeRawBufferPointer, data: UnsafeRawBufferPointer) throws -> [UInt8] {
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
