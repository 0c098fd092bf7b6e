import CryptCore
import EncFSCore

/// The `header` target: the input is the H header bytes of a bundle.
///
/// It is parsed as it is, and again with the header-length field (bytes
/// 12 ..< 16) set to the input's length, so mutations that change the
/// length still reach the slot parser. Whatever parses is unlocked with
/// each fixed secret on its own (so one slot refusing the raw key does not
/// hide what the identities do), then authenticated under the raw key as
/// if it were the content key.
///
/// scrypt parameters come from the input, so the passphrase is only tried
/// when the passphrase slots that would reach scrypt together cost at most
/// ``maximumScryptWork`` (N · r · p summed, log2 N ≤ 12 each): a real
/// bundle's N = 2^17 costs 32 times that per input, and the reader allows
/// up to 2^24 (timings: docs/PERFORMANCE.md). Slots the reader refuses
/// first cost nothing (see docs/SECURITY.md, "Fuzzing").
enum HeaderFuzzing {
    /// Largest log2 N the harness lets reach scrypt.
    static let maximumScryptLogN: UInt8 = 12
    /// Largest total N · r · p of one unlock attempt: 2^15 is N = 2^12,
    /// r = 8, p = 1 (4 MiB, a few milliseconds).
    static let maximumScryptWork: UInt64 = 1 << 15

    static func run(_ input: UnsafeRawBufferPointer) {
        parseAndUnlock(input)
        guard input.count >= 16 else { return }
        var patched = Array(input)
        let length = UInt32(truncatingIfNeeded: patched.count)
        let stored = UInt32(patched[12]) | UInt32(patched[13]) << 8 | UInt32(patched[14]) << 16 | UInt32(patched[15]) << 24
        guard stored != length else { return }
        for i in 0..<4 { patched[12 + i] = UInt8(truncatingIfNeeded: length >> (8 * UInt32(i))) }
        patched.withUnsafeBytes { parseAndUnlock($0) }
    }

    private static func parseAndUnlock(_ bytes: UnsafeRawBufferPointer) {
        guard let header = FuzzTarget.attempt("BundleHeader.parse", { try BundleHeader.parse(bytes) }) else { return }
        FuzzTarget.require(header.headerLength == bytes.count,
                           "parsed header has length \(header.headerLength), input has \(bytes.count) bytes")
        FuzzTarget.require(header.bundleLength >= UInt64(header.headerLength), "bundle length below header length")
        FuzzTarget.require(header.indexOffset + header.indexLength == header.payloadLength, "index does not end the payload")
        for slot in header.slots {
            _ = (slot.kind, slot.kindName, slot.keyID, slot.fingerprint, slot.scryptParameters, slot.isKeySlot)
        }
        FuzzTarget.require(header.slots.filter { !$0.isKeySlot }.count <= 1, "a parsed header has two signature slots")
        FuzzTarget.attempt("signature") { _ = try header.signature() }
        var materials: [KeyMaterial] = [.rawKey(FuzzSecrets.rawKey), .identity(FuzzSecrets.x25519Identity),
                                        .identity(FuzzSecrets.rsaIdentity)]
        if scryptWork(of: header) <= maximumScryptWork { materials.append(.passphrase(FuzzSecrets.passphrase)) }
        for material in materials {
            FuzzTarget.attempt("unlock with \(material.kindName)") { _ = try header.unlock(with: [material]) }
        }
        FuzzTarget.attempt("authenticate") { _ = try header.authenticate(contentKey: FuzzSecrets.rawKey) }
    }

    /// The reader's own limit on one slot's N · r · p
    /// (`KeySlot.maximumScryptWork`, internal to EncFS): slots above it are
    /// refused before scrypt runs, so they cost the harness nothing.
    static let readerScryptWorkLimit: UInt64 = 1 << 24

    /// N · r · p summed over the passphrase slots that would reach scrypt
    /// (slots with invalid parameters or over the reader's work limit are
    /// refused before it runs); `UInt64.max` when one of them has log2 N
    /// above ``maximumScryptLogN``.
    private static func scryptWork(of header: BundleHeader) -> UInt64 {
        var total: UInt64 = 0
        for slot in header.slots {
            guard let parameters = slot.scryptParameters, (try? parameters.validate()) != nil else { continue }
            // validate() bounds log2 N ≤ 30 and r · p < 2^30: no overflow.
            let work = (UInt64(1) << UInt64(parameters.logN)) * UInt64(parameters.r) * UInt64(parameters.p)
            guard work <= readerScryptWorkLimit else { continue }
            guard parameters.logN <= maximumScryptLogN else { return .max }
            total += work // at most 64 slots of 2^24 each
        }
        return total
    }
}
