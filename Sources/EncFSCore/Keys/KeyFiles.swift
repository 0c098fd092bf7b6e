import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// A key file, passphrase file, environment variable or prompt that could
/// not be used. The message never contains the secret.
package struct KeyInputError: Error, Sendable {
    package let message: String
    package let path: [UInt8]?
    package init(_ message: String, path: [UInt8]? = nil) {
        self.message = message
        self.path = path
    }
}

/// Reads the secrets a bundle is opened with from files: raw key files,
/// passphrase files, identities and recipients. Reading the environment
/// and prompting belong to the command-line layer (`KeySources` in
/// EncFSCLI); the library only reads the files it is told to.
package enum KeyFiles {
    /// Reads a key file: 64 hex characters, surrounding whitespace ignored.
    ///
    /// - Throws: `KeyInputError` naming the file, never its contents.
    package static func readKeyFile(_ path: [UInt8]) throws -> SymmetricKey {
        let contents: SecureBytes
        do { contents = try LocalFiles.readSecretFile(path, limit: 4096) } catch let e as BundleError {
            throw KeyInputError("cannot read key file: \(e.message)", path: path)
        }
        return try parseHexKey(contents, what: "key file", path: path)
    }

    /// Reads a passphrase file, less one trailing newline.
    ///
    /// - Throws: `KeyInputError` naming the file.
    package static func readPassphraseFile(_ path: [UInt8]) throws -> SecureBytes {
        let contents: SecureBytes
        do { contents = try LocalFiles.readSecretFile(path, limit: 65536) } catch let e as BundleError {
            throw KeyInputError("cannot read passphrase file: \(e.message)", path: path)
        }
        return try passphrase(fromFile: contents, path: path)
    }

    /// Reads an identity: an X25519 or RSA private key in PEM (PKCS#8).
    ///
    /// - Throws: `KeyInputError` naming the file and what is wrong with it.
    package static func readIdentityFile(_ path: [UInt8]) throws -> PrivateKey {
        let contents: SecureBytes
        do { contents = try LocalFiles.readSecretFile(path, limit: 65536) } catch let e as BundleError {
            throw KeyInputError("cannot read identity file: \(e.message)", path: path)
        }
        do {
            return try contents.withUnsafeBytes { try PrivateKey(pem: $0) }
        } catch let e as CryptError {
            throw KeyInputError("unusable identity file: \(e.description)", path: path)
        }
    }

    /// Reads a recipient: an X25519 or RSA public key in PEM.
    ///
    /// - Throws: `KeyInputError` naming the file and what is wrong with it.
    package static func readRecipientFile(_ path: [UInt8]) throws -> PublicKey {
        let contents: SecureBytes
        do { contents = try LocalFiles.readSecretFile(path, limit: 65536) } catch let e as BundleError {
            throw KeyInputError("cannot read recipient file: \(e.message)", path: path)
        }
        do {
            return try contents.withUnsafeBytes { try PublicKey(pem: $0) }
        } catch let e as CryptError {
            throw KeyInputError("unusable recipient file: \(e.description)", path: path)
        }
    }

    /// Parses 64 hex digits, ignoring surrounding whitespace.
    package static func parseHexKey(_ text: SecureBytes, what: String, path: [UInt8]?) throws -> SymmetricKey {
        let bytes = try text.withUnsafeBytes { raw -> SecureBytes in
            var start = 0
            var end = raw.count
            while start < end, isSpace(raw[start]) { start += 1 }
            while end > start, isSpace(raw[end - 1]) { end -= 1 }
            // What is wrong, never how long it is: the bytes may be a
            // secret given in the wrong place (a passphrase), whose length
            // a message must not tell.
            guard end > start else { throw KeyInputError("\(what) is empty", path: path) }
            guard end - start == 64 else { throw KeyInputError("\(what) must hold exactly 64 hex characters", path: path) }
            return try SecureBytes(count: 32) { (out: UnsafeMutableRawBufferPointer) throws(KeyInputError) in
                for i in 0..<32 {
                    guard let hi = Hex.value(ofDigit: raw[start + 2 * i]), let lo = Hex.value(ofDigit: raw[start + 2 * i + 1]) else {
                        throw KeyInputError("\(what) holds a character that is not a hex digit", path: path)
                    }
                    out[i] = hi << 4 | lo
                }
            }
        }
        do { return try SymmetricKey(bytes) } catch { throw KeyInputError("\(what) has the wrong length", path: path) }
    }

    /// The file's bytes less one trailing newline ("\n" or "\r\n").
    package static func passphrase(fromFile contents: SecureBytes, path: [UInt8]) throws -> SecureBytes {
        let result = contents.withUnsafeBytes { raw -> SecureBytes in
            var end = raw.count
            if end > 0, raw[end - 1] == 0x0A {
                end -= 1
                if end > 0, raw[end - 1] == 0x0D { end -= 1 }
            }
            return SecureBytes(copying: UnsafeRawBufferPointer(rebasing: raw[0..<end]))
        }
        guard result.count > 0 else { throw KeyInputError("passphrase file is empty", path: path) }
        return result
    }

    private static func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D }
}
