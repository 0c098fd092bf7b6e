import CryptCore

/// A secret that can open a key slot.
package enum KeyMaterial: Sendable {
    /// A raw 256-bit key (from `--key-file` or `ENCFS_KEY`).
    case rawKey(SymmetricKey)
    /// A passphrase (from `--passphrase-file`, `ENCFS_PASSPHRASE` or a prompt).
    case passphrase(SecureBytes)
    /// A private key (`--identity`, `ENCFS_IDENTITY`) for X25519 or RSA
    /// recipient slots.
    case identity(PrivateKey)

    /// The kind of slot this secret opens, as named in messages.
    package var kindName: String {
        switch self {
        case .rawKey: return KeySlot.Kind.rawKey.name
        case .passphrase: return KeySlot.Kind.passphrase.name
        case .identity(let key):
            if case .rsa = key.kind { return KeySlot.Kind.rsa.name }
            return KeySlot.Kind.x25519.name
        }
    }
}
