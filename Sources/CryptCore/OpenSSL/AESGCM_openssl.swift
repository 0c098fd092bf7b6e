internal import COpenSSL

/// AES-256-GCM with a 96-bit nonce and a 128-bit tag.
///
/// An `AESGCM` value owns one `EVP_CIPHER_CTX` and is reused for many
/// operations; it is not thread-safe, so keep one per thread (or in a pool).
/// The cipher is fetched once per process: implicit fetching takes a global
/// lock in OpenSSL 3.
package final class AESGCM {
    /// Nonce size in bytes.
    package static let nonceByteCount = 12
    /// Tag size in bytes.
    package static let tagByteCount = 16
    /// Largest message one call accepts; OpenSSL lengths are `int`.
    static let maximumPiece = 1 << 30

    private let context: OpaquePointer
    /// The direction the context was last set up for with the cipher.
    /// Later calls in the same direction pass a null cipher, so OpenSSL
    /// only changes key and nonce instead of resetting the context and
    /// rebuilding its provider state (a measurable cost per 4 KiB chunk).
    private var preparedFor: Direction?
    /// The key storage the context's schedule was last built from. A call
    /// with the same key (the common case: consecutive chunks of one file,
    /// whose key the reader caches) passes a null key too, so OpenSSL only
    /// resets the nonce and GHASH state instead of expanding the key and its
    /// GHASH table again, a noticeable part of the cost of a small chunk
    /// (docs/PERFORMANCE.md).
    ///
    /// Compared by identity, not by bytes: no copy of the key is kept in
    /// ordinary memory and no key bytes are compared at all. The strong
    /// reference keeps the storage alive, so its address cannot be reused
    /// by another key while it is remembered; it also keeps the key until
    /// the next key or `deinit`, no longer than the context keeps the key
    /// schedule anyway. A different object holding the same bytes is simply
    /// installed again.
    private var preparedKey: SecureBytes?

    private enum Direction { case encrypt, decrypt }

    /// Opens one-shot messages instead of OpenSSL on CPUs where ipsec-mb's
    /// GCM is faster (``IPSecGCMOpener``); nil elsewhere.
    private let fastOpener = IPSecGCMOpener.make()

    /// Which code opens one-shot messages on this machine: "ipsec-mb (VAES)",
    /// "ipsec-mb (AVX)" or "OpenSSL" (for logs and tests; sealing is always
    /// OpenSSL).
    package static var openingBackend: String { IPSecGCMOpener.cpuCode?.backendName ?? "OpenSSL" }

    /// Allocates a cipher context.
    ///
    /// - Throws: `CryptError.openSSL` when OpenSSL cannot allocate it.
    package init() throws {
        guard let ctx = EVP_CIPHER_CTX_new() else { throw openSSLError("EVP_CIPHER_CTX_new") }
        context = ctx
    }

    deinit {
        // The AES-GCM provider frees its context, key schedule included,
        // with OPENSSL_clear_free.
        EVP_CIPHER_CTX_free(context)
    }

    /// Encrypts `plaintext` into `ciphertext` (same length; may be the same
    /// memory) and writes the tag.
    ///
    /// - Parameters:
    ///   - key: the 256-bit key.
    ///   - nonce: 12 bytes, never reused with the same key.
    ///   - aad: associated data, authenticated but not encrypted.
    ///   - plaintext: the message.
    ///   - ciphertext: receives `plaintext.count` bytes.
    ///   - tag: receives 16 bytes.
    /// - Throws: `CryptError.invalidBufferSize` or `.openSSL`.
    package func seal(key: SymmetricKey, nonce: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer,
                     plaintext: UnsafeRawBufferPointer, into ciphertext: UnsafeMutableRawBufferPointer,
                     tag: UnsafeMutableRawBufferPointer) throws {
        try checkSizes(nonce: nonce, tag: tag.count, input: plaintext.count, output: ciphertext.count)
        try begin(.encrypt, key: key, nonce: nonce)
        try update(aad: aad, encrypt: true)
        try transform(plaintext, into: ciphertext, encrypt: true)
        try finishEncryption(tag: tag)
    }

    /// Decrypts and authenticates. Plaintext is written to `plaintext` (same
    /// length as `ciphertext`; may be the same memory) and, when the tag does
    /// not verify, wiped again before this throws: callers never see
    /// unauthenticated bytes.
    ///
    /// - Throws: `CryptError.authenticationFailure` when the tag does not
    ///   verify; `.invalidBufferSize` or `.openSSL` otherwise.
    package func open(key: SymmetricKey, nonce: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer,
                     ciphertext: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer,
                     into plaintext: UnsafeMutableRawBufferPointer) throws {
        try checkSizes(nonce: nonce, tag: tag.count, input: ciphertext.count, output: plaintext.count)
        if let fastOpener, !ciphertext.isEmpty, !aad.isEmpty {
            guard fastOpener.open(key: key, nonce: nonce, aad: aad, ciphertext: ciphertext, tag: tag, into: plaintext) else {
                throw CryptError.authenticationFailure
            }
            return
        }
        try begin(.decrypt, key: key, nonce: nonce)
        do {
            try update(aad: aad, encrypt: false)
            try transform(ciphertext, into: plaintext, encrypt: false)
            try finishDecryption(tag: tag)
        } catch {
            SecureBytes.wipe(plaintext)
            throw error
        }
    }

    /// Decrypts and authenticates a message too large to hold at once, in
    /// pieces the caller supplies in order.
    ///
    /// `pieces` is called once; it calls the function it is given with each
    /// consecutive piece of ciphertext and a same-sized output buffer (may be
    /// the same memory). After `pieces` returns, the tag is checked.
    ///
    /// Unlike ``open(key:nonce:aad:ciphertext:tag:into:)``, the plaintext of
    /// each piece reaches the caller **before** the tag is checked: when
    /// this throws, everything derived from it must be discarded.
    ///
    /// - Throws: `CryptError.authenticationFailure` when the tag does not
    ///   verify; what `pieces` throws; `.invalidBufferSize` or `.openSSL`.
    package func open(key: SymmetricKey, nonce: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer,
                     tag: UnsafeRawBufferPointer,
                     pieces: ((UnsafeRawBufferPointer, UnsafeMutableRawBufferPointer) throws -> Void) throws -> Void) throws {
        try checkSizes(nonce: nonce, tag: tag.count, input: 0, output: 0)
        try transformPieces(.decrypt, key: key, nonce: nonce, aad: aad, pieces: pieces)
        try finishDecryption(tag: tag)
    }

    /// Encrypts a message too large to hold at once, in pieces the caller
    /// supplies in order, and writes the tag after the last one.
    ///
    /// `pieces` is called once; it calls the function it is given with each
    /// consecutive piece of plaintext and a same-sized output buffer (may be
    /// the same memory). Pieces may have any length: the ciphertext and tag
    /// are those of one ``seal(key:nonce:aad:plaintext:into:tag:)`` over
    /// their concatenation. Another `AESGCM` may run meanwhile (re-sealing
    /// a message under a new key while opening it under the old one).
    ///
    /// - Throws: what `pieces` throws (no tag is written then);
    ///   `CryptError.invalidBufferSize` or `.openSSL`.
    package func seal(key: SymmetricKey, nonce: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer,
                     tag: UnsafeMutableRawBufferPointer,
                     pieces: ((UnsafeRawBufferPointer, UnsafeMutableRawBufferPointer) throws -> Void) throws -> Void) throws {
        try checkSizes(nonce: nonce, tag: tag.count, input: 0, output: 0)
        try transformPieces(.encrypt, key: key, nonce: nonce, aad: aad, pieces: pieces)
        try finishEncryption(tag: tag)
    }

    /// Sets the context up for one message: cipher only when the direction
    /// changed, key only when the cipher changed or the key is another
    /// object (see ``preparedFor`` and ``preparedKey``), nonce always.
    private func begin(_ direction: Direction, key: SymmetricKey, nonce: UnsafeRawBufferPointer) throws {
        let cipher = cipher(for: direction)
        let installKey = cipher != nil || preparedKey !== key.bytes
        try key.withUnsafeBytes { (k: UnsafeRawBufferPointer) throws in
            let keyPointer = installKey ? k.bindMemory(to: UInt8.self).baseAddress : nil
            let iv = nonce.bindMemory(to: UInt8.self).baseAddress
            let ok = direction == .encrypt ? EVP_EncryptInit_ex2(context, cipher, keyPointer, iv, nil)
                                           : EVP_DecryptInit_ex2(context, cipher, keyPointer, iv, nil)
            guard ok == 1 else {
                preparedFor = nil
                preparedKey = nil
                throw openSSLError(direction == .encrypt ? "EVP_EncryptInit_ex2" : "EVP_DecryptInit_ex2")
            }
        }
        if installKey { preparedKey = key.bytes }
    }

    /// Checks the tag after the last ciphertext of a decryption.
    ///
    /// - Throws: `CryptError.authenticationFailure` when it does not verify.
    /// Starts one message in `direction` and runs each piece `pieces`
    /// hands over through the cipher (the shared part of the pieced seal
    /// and open).
    private func transformPieces(_ direction: Direction, key: SymmetricKey, nonce: UnsafeRawBufferPointer,
                                 aad: UnsafeRawBufferPointer,
                                 pieces: ((UnsafeRawBufferPointer, UnsafeMutableRawBufferPointer) throws -> Void) throws -> Void) throws {
        try begin(direction, key: key, nonce: nonce)
        try update(aad: aad, encrypt: direction == .encrypt)
        try pieces { input, output in
            guard output.count == input.count else {
                throw CryptError.invalidBufferSize(what: "output", expected: input.count, actual: output.count)
            }
            try transform(input, into: output, encrypt: direction == .encrypt)
        }
    }

    /// Ends an encryption and writes its tag. The corresponding C functions
    /// are `EVP_EncryptFinal_ex` and `EVP_CIPHER_CTX_ctrl(GET_TAG)`.
    private func finishEncryption(tag: UnsafeMutableRawBufferPointer) throws {
        var outLength: Int32 = 0
        var scratch: UInt8 = 0
        guard EVP_EncryptFinal_ex(context, &scratch, &outLength) == 1 else { throw openSSLError("EVP_EncryptFinal_ex") }
        guard EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, Int32(Self.tagByteCount), tag.baseAddress) == 1 else {
            throw openSSLError("EVP_CIPHER_CTX_ctrl(GET_TAG)")
        }
    }

    private func finishDecryption(tag: UnsafeRawBufferPointer) throws {
        // SET_TAG takes a non-const pointer; give it a private copy.
        var tagCopy: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &tagCopy) { $0.copyMemory(from: tag) }
        guard withUnsafeMutableBytes(of: &tagCopy, { t in
            EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, Int32(Self.tagByteCount), t.baseAddress)
        }) == 1 else { throw openSSLError("EVP_CIPHER_CTX_ctrl(SET_TAG)") }
        var outLength: Int32 = 0
        var scratch: UInt8 = 0
        guard EVP_DecryptFinal_ex(context, &scratch, &outLength) == 1 else {
            ERR_clear_error()
            throw CryptError.authenticationFailure
        }
    }

    /// The cipher to pass to the next init: the fetched AES-256-GCM when the
    /// direction changes, nil (keep the current one) otherwise.
    private func cipher(for direction: Direction) -> OpaquePointer? {
        if preparedFor == direction { return nil }
        preparedFor = direction
        return Ciphers.aes256gcm.pointer
    }

    private func checkSizes(nonce: UnsafeRawBufferPointer, tag: Int, input: Int, output: Int) throws {
        guard nonce.count == Self.nonceByteCount else {
            throw CryptError.invalidBufferSize(what: "nonce", expected: Self.nonceByteCount, actual: nonce.count)
        }
        guard tag == Self.tagByteCount else { throw CryptError.invalidBufferSize(what: "tag", expected: Self.tagByteCount, actual: tag) }
        guard output == input else { throw CryptError.invalidBufferSize(what: "output", expected: input, actual: output) }
    }

    private func update(aad: UnsafeRawBufferPointer, encrypt: Bool) throws {
        var offset = 0
        while offset < aad.count {
            let n = min(aad.count - offset, Self.maximumPiece)
            var outLength: Int32 = 0
            let p = aad.baseAddress.map { $0.advanced(by: offset).assumingMemoryBound(to: UInt8.self) }
            let ok = encrypt ? EVP_EncryptUpdate(context, nil, &outLength, p, Int32(n))
                             : EVP_DecryptUpdate(context, nil, &outLength, p, Int32(n))
            guard ok == 1 else { throw openSSLError("EVP_CipherUpdate(aad)") }
            offset += n
        }
    }

    private func transform(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer,
                           encrypt: Bool) throws {
        var offset = 0
        while offset < input.count {
            let n = min(input.count - offset, Self.maximumPiece)
            var outLength: Int32 = 0
            guard let inBase = input.baseAddress, let outBase = output.baseAddress else { return }
            let i = inBase.advanced(by: offset).assumingMemoryBound(to: UInt8.self)
            let o = outBase.advanced(by: offset).assumingMemoryBound(to: UInt8.self)
            let ok = encrypt ? EVP_EncryptUpdate(context, o, &outLength, i, Int32(n))
                             : EVP_DecryptUpdate(context, o, &outLength, i, Int32(n))
            guard ok == 1, Int(outLength) == n else { throw openSSLError("EVP_CipherUpdate") }
            offset += n
        }
    }
}

extension AESGCM {
    /// Seals a small message and returns `ciphertext || tag` (for header
    /// fields such as wrapped keys).
    package func seal(key: SymmetricKey, nonce: [UInt8], aad: [UInt8], plaintext: SecureBytes) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: plaintext.count + Self.tagByteCount)
        let count = plaintext.count
        try out.withUnsafeMutableBytes { (o: UnsafeMutableRawBufferPointer) throws in
            try nonce.withUnsafeBytes { (n: UnsafeRawBufferPointer) throws in
                try aad.withUnsafeBytes { (a: UnsafeRawBufferPointer) throws in
                    try plaintext.withUnsafeBytes { (p: UnsafeRawBufferPointer) throws in
                        try seal(key: key, nonce: n, aad: a, plaintext: p,
                                 into: UnsafeMutableRawBufferPointer(rebasing: o[0..<count]),
                                 tag: UnsafeMutableRawBufferPointer(rebasing: o[count...]))
                    }
                }
            }
        }
        return out
    }

    /// Opens `ciphertext || tag` produced by ``seal(key:nonce:aad:plaintext:)``
    /// into wiping storage.
    ///
    /// - Throws: `CryptError.authenticationFailure` when it does not verify.
    package func open(key: SymmetricKey, nonce: [UInt8], aad: [UInt8], sealed: UnsafeRawBufferPointer) throws -> SecureBytes {
        guard sealed.count >= Self.tagByteCount else { throw CryptError.authenticationFailure }
        let count = sealed.count - Self.tagByteCount
        return try SecureBytes(count: count) { (p: UnsafeMutableRawBufferPointer) throws in
            try nonce.withUnsafeBytes { (n: UnsafeRawBufferPointer) throws in
                try aad.withUnsafeBytes { (a: UnsafeRawBufferPointer) throws in
                    try open(key: key, nonce: n, aad: a,
                             ciphertext: UnsafeRawBufferPointer(rebasing: sealed[0..<count]),
                             tag: UnsafeRawBufferPointer(rebasing: sealed[count...]), into: p)
                }
            }
        }
    }
}

/// Ciphers fetched once for the life of the process.
final class Ciphers: @unchecked Sendable {
    let pointer: OpaquePointer

    private init(name: String) {
        guard let cipher = EVP_CIPHER_fetch(nil, name, nil) else {
            preconditionFailure("internal error: OpenSSL has no \(name) cipher")
        }
        pointer = cipher
    }

    static let aes256gcm = Ciphers(name: "AES-256-GCM")
    static let aes256ctr = Ciphers(name: "AES-256-CTR")
}
