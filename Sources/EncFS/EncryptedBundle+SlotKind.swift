import EncFSCore
extension EncryptedBundle {
    /// A kind of key slot, as listed by ``EncryptedBundleError/wrongKey(slotKinds:)``:
    /// which kind of ``Unlock`` would open it.
    public enum SlotKind: Sendable, Hashable, CustomStringConvertible {
        /// A raw 256-bit key: opened by ``Unlock/key(_:)`` or ``Unlock/keyFile(_:)``.
        case key
        /// A passphrase: opened by ``Unlock/passphrase(_:)`` or ``Unlock/passphraseFile(_:)``.
        case passphrase
        /// An X25519 recipient: opened by ``Unlock/identityFile(_:)`` with its private key.
        case x25519Recipient
        /// An RSA recipient: opened by ``Unlock/identityFile(_:)`` with its private key.
        case rsaRecipient
        /// A kind this build does not know (written by a later version), by
        /// its kind byte; `nil` when not even that is known.
        case unknown(UInt8?)

        /// The name `encfs-inspect` and the command-line tools use.
        public var description: String {
            switch self {
            case .key: return KeySlot.Kind.rawKey.name
            case .passphrase: return KeySlot.Kind.passphrase.name
            case .x25519Recipient: return KeySlot.Kind.x25519.name
            case .rsaRecipient: return KeySlot.Kind.rsa.name
            case .unknown(let code?): return "unknown(\(code))"
            case .unknown(nil): return "unknown"
            }
        }

        /// The kind named `name` by `KeySlot.kindName` (which is how
        /// `BundleError.wrongKey` lists them): a known kind's name, or
        /// "unknown(N)".
        init(slotKindName name: String) {
            switch name {
            case KeySlot.Kind.rawKey.name: self = .key
            case KeySlot.Kind.passphrase.name: self = .passphrase
            case KeySlot.Kind.x25519.name: self = .x25519Recipient
            case KeySlot.Kind.rsa.name: self = .rsaRecipient
            default:
                let digits = name.drop { $0 != "(" }.dropFirst().prefix { $0 != ")" }
                self = .unknown(UInt8(digits))
            }
        }
    }
}
