import CryptCore

/// The bundle header: fixed fields, key slots, and an authentication code.
///
/// Layout (little-endian; docs/FORMAT.md has the full table):
/// ```
///  0  8  magic "ENCFSBDL"
///  8  2  format version (1, or 2 when compressed or deduplicated)
/// 10  2  flags (0; bit 0: fragments, bits 8…15: fragment unit, ``BundleFeatures``)
/// 12  4  header length H, from byte 0 through the MAC
/// 16 16  bundle id (random)
/// 32  1  chunk size log2 (12 … 20)
/// 33  1  slot count (1 … 64, the signature slot included)
/// 34  6  version 1: reserved (0); version 2: see ``BundleFeatures``
/// 40  8  payload length: bytes after the header (chunk data, then index)
/// 48  8  index offset, within the payload
/// 56  8  index length (sealed: plaintext + 16-byte tag)
/// 64  …  key slots
/// H−32 32 HMAC-SHA256(header MAC key, bytes 0 ..< H−32)
/// ```
/// The MAC can be checked only after a slot has given the content key; until
/// then every field is untrusted and only bounds-checked.
package struct BundleHeader: Sendable {
    /// The random 128-bit bundle id.
    package let bundleID: [UInt8]
    /// The chunk layout.
    package let layout: ChunkLayout
    /// The layout fragments are cut into (``BundleFeatures/fragmentLayout(files:)``).
    package var fragmentLayout: ChunkLayout { features.fragmentLayout(files: layout) }
    /// The slots as stored, in order: the key slots and, when the bundle
    /// is signed, its signature slot (``signatureSlot``).
    package let slots: [KeySlot]
    /// Bytes after the header.
    package let payloadLength: UInt64
    /// Where the sealed index starts within the payload.
    package let indexOffset: UInt64
    /// Sealed index length.
    package let indexLength: UInt64
    /// Format version and compression (header bytes 8 and 34 … 39).
    package let features: BundleFeatures
    /// The stored authentication code.
    let mac: [UInt8]

    /// Largest header this reader accepts.
    static let maximumHeaderSize = 1 << 20

    /// Header length H.
    package var headerLength: Int {
        BundleFormat.fixedHeaderSize + slots.reduce(0) { $0 + $1.encodedSize } + BundleFormat.headerMACSize
    }

    /// Total bundle length this header records.
    package var bundleLength: UInt64 { UInt64(headerLength) + payloadLength }

    /// The slots that may hold the content key: all but the signature.
    package var keySlots: [KeySlot] { slots.filter(\.isKeySlot) }

    /// The signature slot, if the bundle is signed (the parser allows one).
    package var signatureSlot: KeySlot? { slots.first { !$0.isKeySlot } }

    /// The bundle's version 1 signature, if it has one.
    ///
    /// - Throws: `BundleError.unsupportedSignature` for a signature slot of
    ///   a later version (the parser checked version 1 slots already).
    package func signature() throws -> BundleSignature? {
        guard let slot = signatureSlot, let position = slots.firstIndex(of: slot) else { return nil }
        return try BundleSignature(slot: slot, position: position + 1)
    }

    /// This header with `signature` as its signature slot, in place of any
    /// it had (or none, for nil); a new one goes last. The result has no
    /// MAC: it is for writing, under ``serialized(keys:)``.
    func replacingSignature(with signature: KeySlot?) -> BundleHeader {
        var slots = self.slots
        if let at = slots.firstIndex(where: { !$0.isKeySlot }) {
            if let signature { slots[at] = signature } else { slots.remove(at: at) }
        } else if let signature {
            slots.append(signature)
        }
        return BundleHeader(bundleID: bundleID, layout: layout, slots: slots, payloadLength: payloadLength,
                            indexOffset: indexOffset, indexLength: indexLength, features: features)
    }

    init(bundleID: [UInt8], layout: ChunkLayout, slots: [KeySlot], payloadLength: UInt64,
         indexOffset: UInt64, indexLength: UInt64, features: BundleFeatures = .version1, mac: [UInt8] = []) {
        self.features = features
        self.bundleID = bundleID
        self.layout = layout
        self.slots = slots
        self.payloadLength = payloadLength
        self.indexOffset = indexOffset
        self.indexLength = indexLength
        self.mac = mac
    }

    // MARK: - Parsing

    /// How many bytes must be read to parse the header, from its first 16.
    ///
    /// - Throws: `BundleError.notABundle`, `.unsupportedVersion` or
    ///   `.corruptHeader`.
    static func headerLength(fromPrefix prefix: UnsafeRawBufferPointer) throws -> Int {
        guard prefix.count >= 16, prefix.starts(with: BundleFormat.magic) else { throw BundleError.notABundle }
        let version = prefix.le16(at: 8)
        guard BundleFormat.readableVersions.contains(version) else { throw BundleError.unsupportedVersion(version) }
        let length = Int(prefix.le32(at: 12))
        let minimum = BundleFormat.fixedHeaderSize + 4 + BundleFormat.headerMACSize
        guard length >= minimum, length <= maximumHeaderSize else {
            throw BundleError.corruptHeader("header length \(length) out of range")
        }
        return length
    }

    /// Parses an unauthenticated header; every field is range-checked.
    ///
    /// - Parameter bytes: exactly the H header bytes.
    /// - Throws: `BundleError.notABundle`, `.unsupportedVersion`, `.corruptHeader`.
    package static func parse(_ bytes: UnsafeRawBufferPointer) throws -> BundleHeader {
        let length = try headerLength(fromPrefix: bytes)
        guard bytes.count == length else { throw BundleError.corruptHeader("header is \(bytes.count) bytes, expected \(length)") }
        var cursor = ByteCursor(bytes)
        let truncated = BundleError.corruptHeader("header truncated")
        _ = try cursor.take(12, orThrow: truncated) // magic, version: checked above
        _ = try cursor.u32(orThrow: truncated)
        let bundleID = Array(try cursor.take(BundleFormat.idSize, orThrow: truncated))
        let log2 = try cursor.u8(orThrow: truncated)
        guard BundleFormat.chunkSizeLog2Range.contains(log2) else {
            throw BundleError.corruptHeader("chunk size 2^\(log2) out of range")
        }
        let slotCount = Int(try cursor.u8(orThrow: truncated))
        guard slotCount >= 1, slotCount <= BundleFormat.maximumSlots else {
            throw BundleError.corruptHeader("slot count \(slotCount) out of range")
        }
        let features = try BundleFeatures.parse(version: bytes.le16(at: 8), flags: bytes.le16(at: 10), chunkSizeLog2: log2,
                                                bytes: try cursor.take(6, orThrow: truncated))
        let payloadLength = try cursor.u64(orThrow: truncated)
        let indexOffset = try cursor.u64(orThrow: truncated)
        let indexLength = try cursor.u64(orThrow: truncated)
        guard payloadLength <= UInt64(Int64.max) - UInt64(length),
              indexLength >= UInt64(AESGCM.tagByteCount),
              indexOffset <= payloadLength, indexLength == payloadLength - indexOffset else {
            throw BundleError.corruptHeader("payload, index offset and index length disagree")
        }
        var slots: [KeySlot] = []
        let slotsEnd = length - BundleFormat.headerMACSize
        for position in 1...slotCount {
            let kind = try cursor.u8(orThrow: truncated)
            let reserved = try cursor.u8(orThrow: truncated)
            let bodyLength = Int(try cursor.u16(orThrow: truncated))
            guard reserved == 0, cursor.offset + bodyLength <= slotsEnd else {
                throw BundleError.corruptHeader("key slot \(position) is malformed")
            }
            let slot = KeySlot(kindCode: kind, body: Array(try cursor.take(bodyLength, orThrow: truncated)))
            try slot.validate(position: position)
            slots.append(slot)
        }
        guard cursor.offset == slotsEnd else { throw BundleError.corruptHeader("key slots do not fill the header") }
        // One signature: with two, readers could disagree on which counts.
        guard slots.filter({ !$0.isKeySlot }).count <= 1 else { throw BundleError.corruptHeader("more than one signature slot") }
        let mac = Array(try cursor.take(BundleFormat.headerMACSize, orThrow: truncated))
        return BundleHeader(bundleID: bundleID, layout: ChunkLayout(chunkSizeLog2: log2), slots: slots,
                            payloadLength: payloadLength, indexOffset: indexOffset, indexLength: indexLength,
                            features: features, mac: mac)
    }

    // MARK: - Serializing

    /// The header bytes without the MAC.
    func serializedBody() -> [UInt8] {
        var out = BundleFormat.magic
        out.appendLE(features.formatVersion)
        out.appendLE(features.headerFlags)
        out.appendLE(UInt32(headerLength))
        out += bundleID
        out.append(layout.chunkSizeLog2)
        out.append(UInt8(slots.count))
        out += features.serialized
        out.appendLE(payloadLength)
        out.appendLE(indexOffset)
        out.appendLE(indexLength)
        for slot in slots {
            out.append(slot.kindCode)
            out.append(0)
            out.appendLE(UInt16(slot.body.count))
            out += slot.body
        }
        return out
    }

    /// The complete header, authenticated under `keys`.
    func serialized(keys: BundleKeys) throws -> [UInt8] {
        let body = serializedBody()
        return body + (try Self.authenticationCode(of: body, keys: keys))
    }

    private static func authenticationCode(of body: [UInt8], keys: BundleKeys) throws -> [UInt8] {
        do {
            return try keys.headerMACKey.withUnsafeBytes { k in
                try body.withUnsafeBytes { try HMACSHA256.authenticationCode(key: k, data: $0) }
            }
        } catch {
            throw BundleError.crypto("header MAC failed")
        }
    }

    // MARK: - Unlocking

    /// Opens a slot with one of `materials`, then authenticates the header.
    ///
    /// Raw keys are tried first (cheap, matched by key id), then
    /// passphrases (one scrypt run per passphrase slot that fits
    /// `scryptMemoryLimit`).
    ///
    /// - Parameter scryptMemoryLimit: passphrase slots that need more
    ///   scrypt memory (128 · r · N bytes) are not tried.
    /// - Returns: the keys of the bundle.
    /// - Throws: `BundleError.wrongKey` when no slot opens,
    ///   `.scryptMemoryLimit` instead when a passphrase slot was left untried
    ///   for its memory, `.headerAuthenticationFailed` when the header was
    ///   modified, `.corruptHeader` for a damaged slot.
    package func unlock(with materials: [KeyMaterial],
                        scryptMemoryLimit: UInt64 = OpenOptions.defaultScryptMemoryLimit) throws -> BundleKeys {
        // Cheap secrets first: raw keys and identities are matched by id;
        // each passphrase costs one scrypt run per passphrase slot.
        let ordered = materials.filter { if case .passphrase = $0 { false } else { true } }
            + materials.filter { if case .passphrase = $0 { true } else { false } }
        var checkedWork = false
        // The first slot left untried for its memory: named if nothing opens,
        // since the passphrase may well be right.
        var tooLarge: BundleError?
        for material in ordered {
            if case .passphrase = material, !checkedWork {
                // Before the first scrypt run: bound the time a hostile or
                // damaged header can cost (every passphrase tries every slot).
                try KeySlot.checkTotalScryptWork(slots.compactMap(\.scryptWork))
                checkedWork = true
            }
            for (i, slot) in slots.enumerated() {
                do {
                    if let contentKey = try slot.unwrap(with: material, bundleID: bundleID, position: i + 1,
                                                        scryptMemoryLimit: scryptMemoryLimit) {
                        return try authenticate(contentKey: contentKey)
                    }
                } catch let error as BundleError {
                    guard case .scryptMemoryLimit = error else { throw error }
                    if tooLarge == nil { tooLarge = error }
                }
            }
        }
        if let tooLarge { throw tooLarge }
        var kinds: [String] = []
        for slot in keySlots where !kinds.contains(slot.kindName) { kinds.append(slot.kindName) }
        throw BundleError.wrongKey(slotKinds: kinds)
    }

    /// Checks the MAC under a known content key (the mount daemon receives
    /// the content key from its parent and authenticates again).
    ///
    /// - Throws: `BundleError.headerAuthenticationFailed`.
    package func authenticate(contentKey: SymmetricKey) throws -> BundleKeys {
        let keys = try BundleKeys(contentKey: contentKey, bundleID: bundleID)
        let expected = try Self.authenticationCode(of: serializedBody(), keys: keys)
        let ok = expected.withUnsafeBytes { a in mac.withUnsafeBytes { b in ConstantTime.equal(a, b) } }
        guard ok else { throw BundleError.headerAuthenticationFailed }
        return keys
    }
}
