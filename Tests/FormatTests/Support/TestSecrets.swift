import CryptCore
import EncFSCore
import SharedTestSupport

extension Scrypt.Parameters {
    /// scrypt for tests: still real scrypt, at N = 2^14 (16 MiB) instead of
    /// the default 2^17, to keep the suite fast.
    static let testing = Scrypt.Parameters(logN: 14, r: 8, p: 1)
}

/// Deterministic secrets, so a failing run can be replayed.
enum TestSecrets {
    /// A raw key derived from `seed`; different seeds give different keys.
    static func key(_ seed: UInt64) -> SymmetricKey {
        var generator = SeededGenerator(seed: 0x6B65_7900_0000_0000 | seed)
        let raw = generator.bytes(SymmetricKey.byteCount)
        return try! raw.withUnsafeBytes { try SymmetricKey(copying: $0) } // 32 bytes: cannot fail
    }

    static func passphrase(_ text: String) -> SecureBytes { SecureBytes(copying: bytes(text)) }
}
