import CryptCore

/// How each page of a paged index is sealed: AES-256-GCM under the index
/// key, one nonce per page, associated data that binds the page to its
/// bundle, its number and the page count.
///
/// - nonce (12 bytes): 4 zero bytes ‖ page number as u64 big-endian;
/// - associated data: the flat index's (`IndexBuilder.associatedData`:
///   bundle id ‖ chunk size log2 ‖ payload length ‖ index offset ‖ version
///   ‖ method) ‖ page number (u32 LE) ‖ page count (u32 LE; page 0, which
///   holds the count, has none).
///
/// A page moved to another position, another bundle or an index with
/// another page count fails its tag.
enum IndexPageSeal {
    /// The nonce of page `page`.
    static func nonce(ofPage page: Int) -> [UInt8] {
        var nonce = [UInt8](repeating: 0, count: 4)
        Swift.withUnsafeBytes(of: UInt64(page).bigEndian) { nonce.append(contentsOf: $0) }
        return nonce
    }

    /// The associated data of page `page` of `pageCount` (nil for page 0).
    static func associatedData(base: [UInt8], page: Int, pageCount: Int?) -> [UInt8] {
        var aad = base
        aad.appendLE(UInt32(page))
        if let pageCount { aad.appendLE(UInt32(pageCount)) }
        return aad
    }

    /// Opens sealed page bytes (ciphertext ‖ tag) into `plaintext`
    /// (`sealed.count − 16` bytes).
    ///
    /// - Throws: `BundleError.corruptIndex` when the tag fails (the output
    ///   is wiped then), `.crypto`.
    static func open(_ sealed: UnsafeRawBufferPointer, page: Int, aad: [UInt8], key: SymmetricKey, gcm: AESGCM,
                     into plaintext: UnsafeMutableRawBufferPointer) throws {
        let length = sealed.count - AESGCM.tagByteCount
        precondition(length >= 0 && plaintext.count == length, "internal error: index page \(page) sizes")
        do {
            try nonce(ofPage: page).withUnsafeBytes { n in
                try aad.withUnsafeBytes { a in
                    try gcm.open(key: key, nonce: n, aad: a, ciphertext: UnsafeRawBufferPointer(rebasing: sealed[0..<length]),
                                 tag: UnsafeRawBufferPointer(rebasing: sealed[length...]), into: plaintext)
                }
            }
        } catch CryptError.authenticationFailure {
            throw BundleError.corruptIndex("index page \(page) failed authentication")
        } catch {
            throw BundleError.crypto("index decryption failed")
        }
    }

    /// Seals `plaintext` as page `page`, appending ciphertext ‖ tag to `out`.
    static func seal(_ plaintext: UnsafeRawBufferPointer, page: Int, aad: [UInt8], key: SymmetricKey, gcm: AESGCM,
                     appendingTo out: inout [UInt8]) throws {
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: plaintext.count + AESGCM.tagByteCount))
        do {
            try out.withUnsafeMutableBytes { o in
                try nonce(ofPage: page).withUnsafeBytes { n in
                    try aad.withUnsafeBytes { a in
                        try gcm.seal(key: key, nonce: n, aad: a, plaintext: plaintext,
                                     into: UnsafeMutableRawBufferPointer(rebasing: o[start..<(start + plaintext.count)]),
                                     tag: UnsafeMutableRawBufferPointer(rebasing: o[(start + plaintext.count)...]))
                    }
                }
            }
        } catch {
            throw BundleError.crypto("index encryption failed")
        }
    }
}
