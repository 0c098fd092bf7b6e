import EncFSCore
import CryptCore

extension EncryptedBundle {
    /// A secret that may open a bundle: a raw key, a passphrase, an identity,
    /// or several of them.
    ///
    /// Files named here are read when the bundle is opened, not when the
    /// value is made. Secrets are copied into storage that wipes itself; a
    /// `String` or array the caller passed in is the caller's to forget.
    ///
    /// ```swift
    /// let bundle = try EncryptedBundle(path: "app.bundle", unlock: .keyFile("app.key"))
    /// let either = try EncryptedBundle(path: "app.bundle",
    ///                                  unlock: .any([.identityFile("host.key"), .passphrase(typed)]))
    /// ```
    public struct Unlock: Sendable {
        /// What the caller gave, before files are read.
        enum Secret: Sendable {
            case key(SecureBytes)
            /// A raw key of the wrong length: only its length is kept.
            case wrongKeyLength(Int)
            case keyFile([UInt8])
            case passphrase(SecureBytes)
            case passphraseFile([UInt8])
            case identityFile([UInt8])
            case any([Unlock])
        }

        let secret: Secret

        private init(_ secret: Secret) { self.secret = secret }

        /// A raw 256-bit key: exactly 32 bytes.
        ///
        /// - Parameter bytes: the key (`[UInt8]`, `Data`…); a wrong length
        ///   fails the open with ``EncryptedBundleError/unusableKey(reason:)``.
        public static func key(_ bytes: some Collection<UInt8>) -> Unlock {
            guard bytes.count == SymmetricKey.byteCount else { return Unlock(.wrongKeyLength(bytes.count)) }
            return Unlock(.key(secure(bytes)))
        }

        /// A key file as `encfs-keygen --symmetric` writes it: 64 hex
        /// characters, surrounding whitespace ignored.
        ///
        /// - Parameter path: the key file's path in the file system.
        public static func keyFile(_ path: String) -> Unlock { Unlock(.keyFile(Array(path.utf8))) }

        /// A passphrase, used exactly as given (as its UTF-8 bytes).
        public static func passphrase(_ passphrase: String) -> Unlock {
            Unlock(.passphrase(secure(passphrase.utf8)))
        }

        /// A passphrase file: its bytes less one trailing newline.
        ///
        /// - Parameter path: the passphrase file's path in the file system.
        public static func passphraseFile(_ path: String) -> Unlock { Unlock(.passphraseFile(Array(path.utf8))) }

        /// An identity: an X25519 or RSA private key in PEM (PKCS#8), such as
        /// `encfs-keygen` or `openssl genpkey` writes, that opens the bundle's
        /// recipient slot for its public key.
        ///
        /// - Parameter path: the identity file's path in the file system.
        public static func identityFile(_ path: String) -> Unlock { Unlock(.identityFile(Array(path.utf8))) }

        /// Any one of `unlocks`: the bundle opens when one of them opens a
        /// slot. Raw keys and identities are tried before passphrases
        /// (those cost one scrypt run per passphrase slot).
        ///
        /// Every file named is read first, and one that cannot be used fails
        /// the open even if another secret would have opened the bundle, as
        /// the command-line tools do: a broken key file does not go unnoticed.
        public static func any(_ unlocks: [Unlock]) -> Unlock { Unlock(.any(unlocks)) }

        /// A passphrase given as bytes (the C ABI's): copied straight into
        /// wiping storage, with no `String` of it left behind.
        package static func passphrase(bytes: some Collection<UInt8>) -> Unlock { Unlock(.passphrase(secure(bytes))) }

        /// The file-naming unlocks with the path as bytes (the C ABI's), so
        /// a path that is not UTF-8 still names its file.
        package static func keyFile(bytePath path: [UInt8]) -> Unlock { Unlock(.keyFile(path)) }
        package static func passphraseFile(bytePath path: [UInt8]) -> Unlock { Unlock(.passphraseFile(path)) }
        package static func identityFile(bytePath path: [UInt8]) -> Unlock { Unlock(.identityFile(path)) }

        /// Copies `bytes` straight into wiping storage, with no intermediate
        /// array left behind in ordinary memory.
        private static func secure(_ bytes: some Collection<UInt8>) -> SecureBytes {
            SecureBytes(count: bytes.count) { (out: UnsafeMutableRawBufferPointer) in
                for (i, byte) in zip(out.indices, bytes) { out[i] = byte }
            }
        }

        /// Reads the files named and returns the secrets as the core takes them.
        ///
        /// - Throws: `KeyInputError` for a file or key that cannot be used.
        func keyMaterials() throws -> [KeyMaterial] {
            switch secret {
            case .key(let bytes):
                do { return [.rawKey(try SymmetricKey(bytes))] } catch {
                    throw KeyInputError("a raw key must be \(SymmetricKey.byteCount) bytes (it is \(bytes.count))")
                }
            case .wrongKeyLength(let count):
                throw KeyInputError("a raw key must be \(SymmetricKey.byteCount) bytes (it is \(count))")
            case .keyFile(let path): return [.rawKey(try KeyFiles.readKeyFile(path))]
            case .passphrase(let bytes):
                guard bytes.count > 0 else { throw KeyInputError("the passphrase is empty") }
                return [.passphrase(bytes)]
            case .passphraseFile(let path): return [.passphrase(try KeyFiles.readPassphraseFile(path))]
            case .identityFile(let path): return [.identity(try KeyFiles.readIdentityFile(path))]
            case .any(let unlocks): return try unlocks.flatMap { try $0.keyMaterials() }
            }
        }
    }
}
