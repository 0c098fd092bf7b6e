import CryptCore

extension PagedIndexStore {
    /// Opens every page of the index under the old key and seals it under
    /// a new one (rekeying): page sizes do not depend on keys, so each
    /// page keeps its place and length; only tags and ciphertext change.
    ///
    /// - Parameters:
    ///   - source: the old bundle.
    ///   - start: where its index region starts.
    ///   - headLength: page 0's sealed length.
    ///   - old, new: index key and associated data (`IndexBuilder.associatedData`) before and after.
    ///   - write: gets each new sealed page and its offset in the index region, in order.
    /// - Throws: `BundleError.corruptIndex` when a page fails, `.io`, `.crypto`, what `write` throws.
    func reseal(source: any ByteSource, start: UInt64, headLength: UInt32,
                old: (key: SymmetricKey, aad: [UInt8]), new: (key: SymmetricKey, aad: [UInt8]),
                write: (UnsafeRawBufferPointer, UInt64) throws -> Void) throws {
        let gcm: AESGCM
        do { gcm = try AESGCM() } catch { throw BundleError.crypto("index re-encryption failed") }
        for page in 0..<directory.pageCount {
            let offset = page == 0 ? 0 : UInt64(headLength) + directory.pageOffsets[page - 1]
            let length = Int(page == 0 ? headLength : directory.sealedLengths[page - 1])
            var sealed = [UInt8](repeating: 0, count: length)
            let got = try sealed.withUnsafeMutableBytes { try source.read(into: $0, atOffset: start + offset) }
            guard got == length else { throw BundleError.corruptIndex("index page \(page) is truncated") }
            let count = page == 0 ? nil : directory.pageCount
            let plain = try SecureBytes(count: length - AESGCM.tagByteCount) { (out: UnsafeMutableRawBufferPointer) throws in
                try sealed.withUnsafeBytes {
                    try IndexPageSeal.open($0, page: page, aad: IndexPageSeal.associatedData(base: old.aad, page: page, pageCount: count),
                                           key: old.key, gcm: gcm, into: out)
                }
            }
            var resealed: [UInt8] = []
            try plain.withUnsafeBytes {
                try IndexPageSeal.seal($0, page: page, aad: IndexPageSeal.associatedData(base: new.aad, page: page, pageCount: count),
                                       key: new.key, gcm: gcm, appendingTo: &resealed)
            }
            try resealed.withUnsafeBytes { try write($0, offset) }
        }
    }
}
