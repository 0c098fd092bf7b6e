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
    private let gcm: AESGCM
    private let nonce: UnsafeMutableRawBufferPointer
    private let aad: UnsafeMutableRawBufferPointer

    /// - Throws: `BundleError.crypto` when OpenSSL cannot allocate a context.
    init(bundleID: [UInt8]) throws {
        precondition(bundleID.count == BundleFormat.idSize, "internal error: bundle id size")
        do { gcm = try AESGCM() } catch { throw BundleError.crypto("cannot create cipher context") }
        nonce = .allocate(byteCount: AESGCM.nonceByteCount, alignment: 8)
        nonce.initializeMemory(as: UInt8.self, repeating: 0)
        aad = .allocate(byteCount: Self.aadSize, alignment: 8)
        aad.initializeMemory(as: UInt8.self, repeating: 0)
        bundleID.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: aad[0..<16]).copyMemory(from: $0) }
    }

    deinit {
        nonce.deallocate()
        aad.deallocate()
    }

    private func prepare(fileID: UnsafeRawBufferPointer, chunk: UInt64, last: Bool) {
        nonce.storeBytes(of: chunk.bigEndian, toByteOffset: 4, as: UInt64.self)
        UnsafeMutableRawBufferPointer(rebasing: aad[16..<32]).copyMemory(from: fileID)
        aad.storeBytes(of: chunk.littleEndian, toByteOffset: 32, as: UInt64.self)
        aad[40] = last ? 1 : 0
    }

    /// Seals `plaintext` as chunk `chunk` into `sealed` (plaintext.count + 16 bytes).
    func seal(key: SymmetricKey, fileID: UnsafeRawBufferPointer, chunk: UInt64, last: Bool,
              plaintext: UnsafeRawBufferPointer, into sealed: UnsafeMutableRawBufferPointer) throws {
        prepare(fileID: fileID, chunk: chunk, last: last)
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
              sealed: UnsafeRawBufferPointer, into plaintext: UnsafeMutableRawBufferPointer) throws -> Bool {
        prepare(fileID: fileID, chunk: chunk, last: last)
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
