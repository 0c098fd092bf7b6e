import CryptCore

/// A secret that can open a key slot.
public enum KeyMaterial: Sendable {
    /// A raw 256-bit key (from `--key-file` or `ENCFS_KEY`).
    case rawKey(SymmetricKey)
    /// A passphrase (from `--passphrase-file`, `ENCFS_PASSPHRASE` or a prompt).
    case passphrase(SecureBytes)

    /// The kind of slot this secret opens, as named in messages.
    public var kindName: String {
        switch self {
        case .rawKey: return KeySlot.Kind.rawKey.name
        case .passphrase: return KeySlot.Kind.passphrase.name
        }
    }
}
