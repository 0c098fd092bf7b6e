import CryptCore

/// Seals and opens single chunks: nonce and associated data in one place.
///
/// - nonce (12 bytes): 4 zero bytes ‖ chunk index as u64 big-endian. Each
///   file has its own key, so (key, nonce) never repeats.
/// - associated data (41 bytes): bundle id (16) ‖ file id (16) ‖ chunk index
///   (u64 little-endian) ‖ last-chunk flag (1 or 0). Moving a chunk to
///   another position, file or bundle, or truncating a file so an inner
///   chunk becomes the last, fails authentication.
///
/// A codec owns an OpenSSL context and scratch buffers and is not
/// thread-safe: one per thread or per pooled workspace.
final class ChunkCodec {
    static let aadSize = 41
    /// Associated data of a compressed bundle's chunks: one byte more.
    static let compressedAADSize = 42
    private let gcm: AESGCM
    private let nonce: UnsafeMutableRawBufferPointer
    private let aad: UnsafeMutableRawBufferPointer

    /// - Parameter compressed: whether the bundle's chunks are compressed
    ///   (``BundleFeatures/isCompressed``): their associated data carries
    ///   how each is stored.
    /// - Throws: `BundleError.crypto` when OpenSSL cannot allocate a context.
    init(bundleID: [UInt8], compressed: Bool = false) throws {
        precondition(bundleID.count == BundleFormat.idSize, "internal error: bundle id size")
        do { gcm = try AESGCM() } catch { throw BundleError.crypto("cannot create cipher context") }
        nonce = .allocate(byteCount: AESGCM.nonceByteCount, alignment: 8)
        nonce.initializeMemory(as: UInt8.self, repeating: 0)
        aad = .allocate(byteCount: compressed ? Self.compressedAADSize : Self.aadSize, alignment: 8)
        aad.initializeMemory(as: UInt8.self, repeating: 0)
        bundleID.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: aad[0..<16]).copyMemory(from: $0) }
    }

    deinit {
        nonce.deallocate()
        aad.deallocate()
    }

    private func prepare(fileID: UnsafeRawBufferPointer, chunk: UInt64, last: Bool, encoding: StoredChunkEncoding) {
        nonce.storeBytes(of: chunk.bigEndian, toByteOffset: 4, as: UInt64.self)
        UnsafeMutableRawBufferPointer(rebasing: aad[16..<32]).copyMemory(from: fileID)
        aad.storeBytes(of: chunk.littleEndian, toByteOffset: 32, as: UInt64.self)
        aad[40] = last ? 1 : 0
        if aad.count == Self.compressedAADSize {
            aad[41] = encoding.rawValue
        } else {
            precondition(encoding == .raw, "internal error: a compressed chunk in an uncompressed bundle")
        }
    }

    /// Seals `plaintext` (the chunk's stored bytes: its plaintext, or its
    /// zstd frame) as chunk `chunk` into `sealed` (plaintext.count + 16 bytes).
    func seal(key: SymmetricKey, fileID: UnsafeRawBufferPointer, chunk: UInt64, last: Bool,
              encoding: StoredChunkEncoding = .raw,
              plaintext: UnsafeRawBufferPointer, into sealed: UnsafeMutableRawBufferPointer) throws {
        prepare(fileID: fileID, chunk: chunk, last: last, encoding: encoding)
        let n = plaintext.count
        do {
            try gcm.seal(key: key, nonce: UnsafeRawBufferPointer(nonce), aad: UnsafeRawBufferPointer(aad), plaintext: plaintext,
                         into: UnsafeMutableRawBufferPointer(rebasing: sealed[0..<n]),
                         tag: UnsafeMutableRawBufferPointer(rebasing: sealed[n..<(n + AESGCM.tagByteCount)]))
        } catch {
            throw BundleError.crypto("chunk encryption failed")
        }
    }

    /// Opens chunk `chunk` from `sealed` into `plaintext` (sealed.count − 16
    /// bytes). On failure `plaintext` is wiped.
    ///
    /// - Returns: false when the chunk does not authenticate.
    /// - Throws: `BundleError.crypto` for failures other than authentication.
    func open(key: SymmetricKey, fileID: UnsafeRawBufferPointer, chunk: UInt64, last: Bool,
              encoding: StoredChunkEncoding = .raw,
              sealed: UnsafeRawBufferPointer, into plaintext: UnsafeMutableRawBufferPointer) throws -> Bool {
        prepare(fileID: fileID, chunk: chunk, last: last, encoding: encoding)
        let n = sealed.count - AESGCM.tagByteCount
        do {
            try gcm.open(key: key, nonce: UnsafeRawBufferPointer(nonce), aad: UnsafeRawBufferPointer(aad),
                         ciphertext: UnsafeRawBufferPointer(rebasing: sealed[0..<n]),
                         tag: UnsafeRawBufferPointer(rebasing: sealed[n...]), into: plaintext)
            return true
        } catch CryptError.authenticationFailure {
            return false
        } catch {
            throw BundleError.crypto("chunk decryption failed")
        }
    }
}
