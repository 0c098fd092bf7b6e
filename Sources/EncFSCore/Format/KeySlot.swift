import CryptCore

/// One key slot: the content key wrapped under a key the user holds.
///
/// Stored as `kind (u8) ‖ reserved (u8, 0) ‖ body length (u16 LE) ‖ body`.
/// Bodies (docs/FORMAT.md has the byte tables):
/// - raw key (kind 1, 72 bytes): key id (8) ‖ salt (16) ‖ wrapped key (32 + 16 tag);
///   KEK = HKDF(raw key, salt, "encfs v1 raw-key slot"); key id = first 8 bytes of
///   HKDF(raw key, no salt, "encfs v1 key id"), so the right slot is found
///   without trial decryption.
/// - passphrase (kind 2, 76 bytes): log2 N (u8) ‖ 3 zero bytes ‖ r (u32 LE) ‖ p (u32 LE) ‖
///   salt (16) ‖ wrapped key (48); KEK = scrypt(passphrase, salt, N, r, p).
/// - X25519 recipient (kind 3, 88 bytes): fingerprint (8) ‖ ephemeral public key (32) ‖
///   wrapped key (48); KEK = HKDF(X25519(ephemeral, recipient), salt = ephemeral ‖
///   recipient public key, "encfs v1 x25519 slot"), as age does.
/// - RSA recipient (kind 4, 8 + modulus bytes): fingerprint (8) ‖ RSA-OAEP-SHA256
///   ciphertext of the content key, label "encfs v1 rsa slot" ‖ bundle id.
/// - signature (kind 5, 164 bytes in version 1): not a key slot but the
///   bundle's Ed25519 signature, at most one per header (``BundleSignature``
///   has the body). It wraps nothing, so it never opens the bundle and does
///   not count where key slots are counted; older readers skip it.
/// A recipient's fingerprint is the first 8 bytes of SHA-256 over its
/// DER SubjectPublicKeyInfo, so the right slot is found without trial
/// decryption.
/// The wrap is AES-256-GCM with an all-zero nonce (every KEK is unique to
/// its slot's random salt) and associated data `bundle id ‖ kind ‖ body
/// without the wrapped key`, so the parameters cannot be changed unnoticed.
/// Readers skip kinds they do not know: a later version can add slot kinds
/// that older readers ignore as long as another slot opens.
package struct KeySlot: Sendable, Equatable {
    /// Slot kinds.
    package enum Kind: UInt8, Sendable {
        /// A raw 256-bit key.
        case rawKey = 1
        /// A passphrase through scrypt.
        case passphrase = 2
        /// An X25519 recipient (public key); opened with its identity.
        case x25519 = 3
        /// An RSA recipient (OAEP, SHA-256); opened with its private key.
        case rsa = 4
        /// The bundle's signature (``BundleSignature``): holds no key.
        case signature = 5

        /// The name used in messages and by `encfs-inspect`.
        package var name: String {
            switch self {
            case .rawKey: return "raw-key"
            case .passphrase: return "passphrase"
            case .x25519: return "x25519"
            case .rsa: return "rsa"
            case .signature: return "signature"
            }
        }
    }

    /// The kind byte as stored (may be a kind this build does not know).
    package let kindCode: UInt8
    /// The slot body as stored.
    package let body: [UInt8]

    static let wrappedSize = SymmetricKey.byteCount + AESGCM.tagByteCount
    static let saltSize = 16
    static let keyIDSize = 8
    static let rawKeyBodySize = keyIDSize + saltSize + wrappedSize
    static let passphraseBodySize = 12 + saltSize + wrappedSize
    static let fingerprintSize = 8
    /// The most scrypt work (N · r · p) a reader spends on one passphrase
    /// slot: twice the costliest slot encfs writes (N = 2^20, r = 8, p = 1).
    /// The 2 GiB memory limit does not bound time: p multiplies the work
    /// while adding little memory, so a damaged slot with p = 2^20 + 1 (one
    /// flipped bit) would keep a mount busy for hours before failing.
    static let maximumScryptWork: UInt64 = 1 << 24
    /// The most scrypt work a reader spends on all passphrase slots of one
    /// bundle for one passphrase: four slots at ``maximumScryptWork`` or 64
    /// at encfs-pack's default cost. Without it, 64 slots at the per-slot
    /// limit would cost 16 times as much for every wrong passphrase
    /// (timings: docs/PERFORMANCE.md).
    package static let maximumTotalScryptWork: UInt64 = 1 << 26

    /// The scrypt work (N · r · p) of a passphrase slot, at most
    /// ``maximumScryptWork`` + 1 (a slot over the limit is refused before
    /// any work is spent on it); nil for other slots.
    var scryptWork: UInt64? {
        guard let parameters = scryptParameters else { return nil }
        return Self.work(of: parameters)
    }

    /// N · r · p, at most ``maximumScryptWork`` + 1.
    static func work(of parameters: Scrypt.Parameters) -> UInt64 {
        guard parameters.logN < 40 else { return maximumScryptWork + 1 }
        let (nr, o1) = (UInt64(1) << parameters.logN).multipliedReportingOverflow(by: UInt64(parameters.r))
        let (nrp, o2) = nr.multipliedReportingOverflow(by: UInt64(parameters.p))
        return o1 || o2 ? maximumScryptWork + 1 : min(nrp, maximumScryptWork + 1)
    }

    /// Refuses slot sets whose passphrase slots together need more than
    /// ``maximumTotalScryptWork`` per passphrase, so no writer makes a
    /// bundle readers refuse, and no reader spends minutes on a hostile one.
    ///
    /// - Parameter works: the scrypt work of each passphrase slot.
    /// - Throws: `BundleError.limitExceeded` naming the totals.
    static func checkTotalScryptWork(_ works: [UInt64]) throws {
        let total = works.reduce(UInt64(0)) { $0 &+ $1 }
        guard total <= maximumTotalScryptWork else {
            throw BundleError.limitExceeded("\(works.count) passphrase slots need scrypt work \(total) (N · r · p summed) for each "
                                            + "passphrase tried, more than \(maximumTotalScryptWork) (2^26); "
                                            + "use fewer passphrase slots or a lower cost, or a key file or identity")
        }
    }
    /// The memory scrypt needs for `parameters` as readers count it against
    /// `OpenOptions.scryptMemoryLimit`: 128 · r · N bytes (OpenSSL adds a
    /// few KiB more; see `Scrypt.Parameters.memoryBytes`), saturating at
    /// `UInt64.max` for parameters no valid slot has.
    package static func scryptMemory(of parameters: Scrypt.Parameters) -> UInt64 {
        guard parameters.logN < 57 else { return .max }
        let (bytes, overflow) = (UInt64(128) << UInt64(parameters.logN)).multipliedReportingOverflow(by: UInt64(parameters.r))
        return overflow ? .max : bytes
    }

    static let x25519BodySize = fingerprintSize + AsymmetricKeyKind.x25519ByteCount + wrappedSize
    static let rsaBodySizes = (fingerprintSize + AsymmetricKeyKind.minimumRSABits / 8)...(fingerprintSize + AsymmetricKeyKind.maximumRSABits / 8)

    /// The slot's kind, or nil for a kind this build does not know.
    package var kind: Kind? { Kind(rawValue: kindCode) }

    /// The kind's name, or `unknown(N)`.
    package var kindName: String { kind?.name ?? "unknown(\(kindCode))" }

    /// Whether this slot may hold the content key: every kind but the
    /// signature (unknown kinds included, since a later version's key slot
    /// is still a key slot).
    package var isKeySlot: Bool { kind != .signature }

    /// Bytes the slot takes in the header.
    var encodedSize: Int { 4 + body.count }

    init(kindCode: UInt8, body: [UInt8]) {
        self.kindCode = kindCode
        self.body = body
    }

    /// The scrypt parameters of a passphrase slot.
    package var scryptParameters: Scrypt.Parameters? {
        guard kind == .passphrase, body.count == Self.passphraseBodySize else { return nil }
        return body.withUnsafeBytes { b in Scrypt.Parameters(logN: b[0], r: b.le32(at: 4), p: b.le32(at: 8)) }
    }

    /// The first 8 body bytes of a raw-key slot (its key id) or a recipient
    /// slot (the recipient's fingerprint); nil for other kinds.
    package var keyID: [UInt8]? {
        guard kind == .rawKey || kind == .x25519 || kind == .rsa, body.count >= Self.keyIDSize else { return nil }
        return Array(body[0..<Self.keyIDSize])
    }

    /// A short, stable name for the slot, 16 hex digits: the key id of a
    /// raw-key slot, the first 8 bytes of the salt of a passphrase slot,
    /// the signer's fingerprint for a signature, the first 8 body bytes
    /// otherwise. `encfs-inspect` lists it and `rekey --remove` takes it
    /// (for key slots).
    package var fingerprint: String {
        let bytes: ArraySlice<UInt8>
        switch kind {
        case .passphrase?: bytes = body.count >= 20 ? body[12..<20] : body[...]
        case .signature?:
            guard let signature = try? BundleSignature(slot: self, position: 0) else { bytes = body.prefix(8); break }
            return signature.signerFingerprint
        default: bytes = body.prefix(8)
        }
        return Hex.encode(bytes)
    }

    /// Checks the body length for known kinds.
    func validate(position: Int) throws {
        switch kind {
        case .rawKey?:
            guard body.count == Self.rawKeyBodySize else {
                throw BundleError.corruptHeader("key slot \(position) (raw-key) has \(body.count) bytes, expected \(Self.rawKeyBodySize)")
            }
        case .passphrase?:
            guard body.count == Self.passphraseBodySize else {
                throw BundleError.corruptHeader("key slot \(position) (passphrase) has \(body.count) bytes, expected \(Self.passphraseBodySize)")
            }
            guard body[1] == 0, body[2] == 0, body[3] == 0 else {
                throw BundleError.corruptHeader("key slot \(position) (passphrase) has non-zero reserved bytes")
            }
        case .x25519?:
            guard body.count == Self.x25519BodySize else {
                throw BundleError.corruptHeader("key slot \(position) (x25519) has \(body.count) bytes, expected \(Self.x25519BodySize)")
            }
        case .rsa?:
            guard Self.rsaBodySizes.contains(body.count) else {
                throw BundleError.corruptHeader("key slot \(position) (rsa) has \(body.count) bytes")
            }
        case .signature?:
            // Version 1 is checked field by field; a later version is
            // skipped here and refused only where a signature is required.
            if body.first == BundleSignature.version { _ = try BundleSignature(slot: self, position: position) }
        case nil:
            break
        }
    }

    // MARK: - Making slots

    /// A slot that `material` will open: raw-key, passphrase, or a
    /// recipient slot for an identity's public half.
    static func make(for material: KeyMaterial, wrapping contentKey: SymmetricKey, bundleID: [UInt8],
                     scrypt: Scrypt.Parameters) throws -> KeySlot {
        switch material {
        case .rawKey(let key):
            return try rawKey(wrapping: contentKey, with: key, bundleID: bundleID)
        case .passphrase(let passphrase):
            return try self.passphrase(wrapping: contentKey, with: passphrase, parameters: scrypt, bundleID: bundleID)
        case .identity(let identity):
            return try recipient(wrapping: contentKey, to: identity.publicKey, bundleID: bundleID)
        }
    }

    /// A raw-key slot wrapping `contentKey` under `key`.
    static func rawKey(wrapping contentKey: SymmetricKey, with key: SymmetricKey, bundleID: [UInt8]) throws -> KeySlot {
        let salt = try randomBytes(Self.saltSize)
        let kek = try derive(key, salt: salt, info: BundleFormat.labelRawKeySlot)
        let prefix = try Self.keyID(of: key) + salt
        return try seal(kind: .rawKey, prefix: prefix, contentKey: contentKey, kek: kek, bundleID: bundleID)
    }

    /// A passphrase slot wrapping `contentKey` under scrypt(`passphrase`).
    static func passphrase(wrapping contentKey: SymmetricKey, with passphrase: SecureBytes,
                           parameters: Scrypt.Parameters, bundleID: [UInt8]) throws -> KeySlot {
        let salt = try randomBytes(Self.saltSize)
        let kek = try scrypt(passphrase, salt: salt, parameters: parameters)
        var prefix: [UInt8] = [parameters.logN, 0, 0, 0]
        prefix.appendLE(parameters.r)
        prefix.appendLE(parameters.p)
        prefix += salt
        return try seal(kind: .passphrase, prefix: prefix, contentKey: contentKey, kek: kek, bundleID: bundleID)
    }

    /// A recipient slot wrapping `contentKey` to `recipient`'s public key.
    static func recipient(wrapping contentKey: SymmetricKey, to recipient: PublicKey, bundleID: [UInt8]) throws -> KeySlot {
        let fingerprint = try Self.fingerprint(of: recipient)
        do {
            switch recipient.kind {
            case .x25519:
                guard let recipientRaw = recipient.x25519Raw else { throw BundleError.crypto("recipient has no X25519 key") }
                let ephemeral = try PrivateKey.generateX25519()
                guard let ephemeralRaw = ephemeral.publicKey.x25519Raw else { throw BundleError.crypto("X25519 key generation failed") }
                let kek = try x25519KEK(secret: ephemeral.x25519SharedSecret(with: recipient), ephemeral: ephemeralRaw,
                                        recipient: recipientRaw)
                return try seal(kind: .x25519, prefix: fingerprint + ephemeralRaw, contentKey: contentKey, kek: kek, bundleID: bundleID)
            case .rsa:
                let ciphertext = try contentKey.withUnsafeBytes { key in
                    try recipient.rsaOAEPEncrypt(key, label: BundleFormat.labelRSASlot + bundleID)
                }
                return KeySlot(kindCode: Kind.rsa.rawValue, body: fingerprint + ciphertext)
            }
        } catch let error as BundleError {
            throw error
        } catch {
            throw BundleError.crypto("recipient slot: \(error)")
        }
    }

    /// A recipient's fingerprint: the first 8 bytes of SHA-256 over its DER
    /// SubjectPublicKeyInfo.
    package static func fingerprint(of key: PublicKey) throws -> [UInt8] {
        do {
            let der = try key.subjectPublicKeyInfoDER()
            return Array(der.withUnsafeBytes { SHA256.hash($0) }.prefix(fingerprintSize))
        } catch {
            throw BundleError.crypto("cannot encode public key: \(error)")
        }
    }

    /// The fingerprint as 16 hex digits.
    package static func hexFingerprint(of key: PublicKey) throws -> String {
        Hex.encode(try fingerprint(of: key))
    }

    private static func x25519KEK(secret: SecureBytes, ephemeral: [UInt8], recipient: [UInt8]) throws -> SymmetricKey {
        let salt = ephemeral + recipient
        let bytes = try secret.withUnsafeBytes { s in
            try salt.withUnsafeBytes { salt in
                try BundleFormat.labelX25519Slot.withUnsafeBytes { info in
                    try HKDF.deriveKey(inputKey: s, salt: salt, info: info, outputCount: SymmetricKey.byteCount)
                }
            }
        }
        return try SymmetricKey(bytes)
    }

    /// The 8-byte id of a raw key.
    package static func keyID(of key: SymmetricKey) throws -> [UInt8] {
        do {
            let id = try key.withUnsafeBytes { k in
                try BundleFormat.labelKeyID.withUnsafeBytes { info in
                    try HKDF.deriveKey(inputKey: k, salt: UnsafeRawBufferPointer(start: nil, count: 0), info: info, outputCount: keyIDSize)
                }
            }
            return id.withUnsafeBytes { Array($0) }
        } catch {
            throw BundleError.crypto("key id derivation failed")
        }
    }

    // MARK: - Opening slots

    /// Tries to unwrap the content key with `material`.
    ///
    /// - Returns: the content key, or nil when the material is of another
    ///   kind or (for raw keys) has another key id.
    /// - Parameter scryptMemoryLimit: the most scrypt memory (see
    ///   ``scryptMemory(of:)``) a passphrase slot may need.
    /// - Throws: `BundleError.corruptHeader` when the slot should open with
    ///   this material (matching key id) but does not, or has out-of-range
    ///   parameters; `.scryptMemoryLimit` (before any scrypt run) when a
    ///   passphrase slot needs more memory than allowed. Nil is returned for
    ///   a passphrase that does not open it, since a wrong passphrase cannot
    ///   be told from a damaged slot.
    func unwrap(with material: KeyMaterial, bundleID: [UInt8], position: Int,
                scryptMemoryLimit: UInt64 = OpenOptions.defaultScryptMemoryLimit) throws -> SymmetricKey? {
        switch (kind, material) {
        case (.rawKey?, .rawKey(let key)):
            guard let id = keyID, try Self.keyID(of: key) == id else { return nil }
            let salt = Array(body[Self.keyIDSize..<(Self.keyIDSize + Self.saltSize)])
            let kek = try Self.derive(key, salt: salt, info: BundleFormat.labelRawKeySlot)
            guard let contentKey = try open(kek: kek, bundleID: bundleID) else {
                throw BundleError.corruptHeader("key slot \(position) (raw-key) matches the key id but fails authentication")
            }
            return contentKey
        case (.passphrase?, .passphrase(let passphrase)):
            guard let parameters = scryptParameters else { return nil }
            do {
                try parameters.validate()
            } catch {
                throw BundleError.corruptHeader("key slot \(position) (passphrase): \(error)")
            }
            // validate() bounds log2 N ≤ 30 and r · p < 2^30: no overflow.
            guard (UInt64(1) << parameters.logN) * UInt64(parameters.r) * UInt64(parameters.p) <= Self.maximumScryptWork else {
                throw BundleError.corruptHeader("key slot \(position) (passphrase): scrypt N = 2^\(parameters.logN), r = \(parameters.r), "
                                                + "p = \(parameters.p) is more work than a reader allows")
            }
            let memory = Self.scryptMemory(of: parameters)
            guard memory <= scryptMemoryLimit else {
                throw BundleError.scryptMemoryLimit(slot: position, needs: memory, limit: scryptMemoryLimit)
            }
            let salt = Array(body[12..<(12 + Self.saltSize)])
            let kek = try Self.scrypt(passphrase, salt: salt, parameters: parameters)
            return try open(kek: kek, bundleID: bundleID)
        case (.x25519?, .identity(let identity)):
            guard identity.kind == .x25519, let id = keyID, try Self.fingerprint(of: identity.publicKey) == id,
                  let recipientRaw = identity.publicKey.x25519Raw else { return nil }
            let ephemeral = Array(body[Self.fingerprintSize..<(Self.fingerprintSize + AsymmetricKeyKind.x25519ByteCount)])
            let kek: SymmetricKey
            do {
                let secret = try ephemeral.withUnsafeBytes { try identity.x25519SharedSecret(withPeer: $0) }
                kek = try Self.x25519KEK(secret: secret, ephemeral: ephemeral, recipient: recipientRaw)
            } catch {
                throw BundleError.corruptHeader("key slot \(position) (x25519) has an invalid ephemeral key")
            }
            guard let contentKey = try open(kek: kek, bundleID: bundleID) else {
                throw BundleError.corruptHeader("key slot \(position) (x25519) matches the identity but fails authentication")
            }
            return contentKey
        case (.rsa?, .identity(let identity)):
            guard case .rsa = identity.kind, let id = keyID, try Self.fingerprint(of: identity.publicKey) == id else { return nil }
            do {
                let opened = try body[Self.fingerprintSize...].withUnsafeBytes {
                    try identity.rsaOAEPDecrypt($0, label: BundleFormat.labelRSASlot + bundleID)
                }
                return try SymmetricKey(opened)
            } catch {
                throw BundleError.corruptHeader("key slot \(position) (rsa) matches the identity but does not open")
            }
        default:
            return nil
        }
    }

    private func open(kek: SymmetricKey, bundleID: [UInt8]) throws -> SymmetricKey? {
        let split = body.count - Self.wrappedSize
        let aad = bundleID + [kindCode] + body[0..<split]
        do {
            let gcm = try AESGCM()
            let opened = try body[split...].withUnsafeBytes { sealed in
                try gcm.open(key: kek, nonce: Self.zeroNonce, aad: aad, sealed: sealed)
            }
            return try SymmetricKey(opened)
        } catch CryptError.authenticationFailure {
            return nil
        } catch {
            throw BundleError.crypto("key slot unwrap failed")
        }
    }

    private static func seal(kind: Kind, prefix: [UInt8], contentKey: SymmetricKey, kek: SymmetricKey,
                             bundleID: [UInt8]) throws -> KeySlot {
        let aad = bundleID + [kind.rawValue] + prefix
        do {
            let wrapped = try AESGCM().seal(key: kek, nonce: zeroNonce, aad: aad, plaintext: contentKey.bytes)
            return KeySlot(kindCode: kind.rawValue, body: prefix + wrapped)
        } catch {
            throw BundleError.crypto("key slot wrap failed")
        }
    }

    private static let zeroNonce = [UInt8](repeating: 0, count: AESGCM.nonceByteCount)

    private static func derive(_ key: SymmetricKey, salt: [UInt8], info: [UInt8]) throws -> SymmetricKey {
        do { return try HKDF.deriveKey(from: key, salt: salt, info: info) } catch {
            throw BundleError.crypto("key derivation failed")
        }
    }

    private static func scrypt(_ passphrase: SecureBytes, salt: [UInt8], parameters: Scrypt.Parameters) throws -> SymmetricKey {
        do {
            let bytes = try passphrase.withUnsafeBytes { p in
                try salt.withUnsafeBytes { s in
                    try Scrypt.deriveKey(passphrase: p, salt: s, parameters: parameters, outputCount: SymmetricKey.byteCount)
                }
            }
            return try SymmetricKey(bytes)
        } catch {
            throw BundleError.crypto("scrypt failed: \(error)")
        }
    }
}

func randomBytes(_ count: Int) throws -> [UInt8] {
    do { return try SecureRandom.bytes(count) } catch { throw BundleError.crypto("random generator failed") }
}
