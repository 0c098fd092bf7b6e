import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// A key file, passphrase file, environment variable or prompt that could
/// not be used. The message never contains the secret.
public struct KeyInputError: Error, Sendable {
    public let message: String
    public let path: [UInt8]?
    public init(_ message: String, path: [UInt8]? = nil) {
        self.message = message
        self.path = path
    }
}

/// Collects the secrets named on the command line, in the environment, or
/// typed at a prompt.
///
/// Order: `--key-file` and `--passphrase-file` (each repeatable); if none,
/// `ENCFS_KEY` (64 hex digits) and `ENCFS_PASSPHRASE`; if still none and a
/// terminal is attached, a passphrase prompt without echo (asked twice when
/// `confirm` is set). Both environment variables are wiped in place and
/// removed from the environment in every case, so neither
/// `/proc/PID/environ` nor a child process sees them.
public enum KeySources {
    /// Environment variable holding a hex key.
    public static let keyVariable = "ENCFS_KEY"
    /// Environment variable holding a passphrase.
    public static let passphraseVariable = "ENCFS_PASSPHRASE"
    /// Environment variable naming an identity file (a path, not a secret).
    public static let identityVariable = "ENCFS_IDENTITY"

    /// Gathers the secrets.
    ///
    /// - Parameters:
    ///   - keyFiles: paths of key files.
    ///   - passphraseFiles: paths of passphrase files.
    ///   - confirm: ask for a prompted passphrase twice (when packing).
    /// - Returns: at least one secret.
    /// - Throws: `KeyInputError` when a source is unusable or none is given.
    ///   - optional: return no secret (instead of prompting or failing) when
    ///     none is given, for commands that work without a key.
    ///   - identityFiles: paths of private keys (PEM) for recipient slots.
    public static func gather(keyFiles: [[UInt8]], passphraseFiles: [[UInt8]], identityFiles: [[UInt8]] = [],
                              confirm: Bool, optional: Bool = false) throws -> [KeyMaterial] {
        let envKey = takeEnvironment(keyVariable)
        let envPassphrase = takeEnvironment(passphraseVariable)
        var materials: [KeyMaterial] = []
        for path in keyFiles { materials.append(.rawKey(try readKeyFile(path))) }
        for path in passphraseFiles { materials.append(.passphrase(try readPassphraseFile(path))) }
        for path in identityFiles { materials.append(.identity(try readIdentityFile(path))) }
        if materials.isEmpty {
            if let envKey { materials.append(.rawKey(try parseHexKey(envKey, what: keyVariable, path: nil))) }
            if let envPassphrase {
                guard envPassphrase.count > 0 else { throw KeyInputError("\(passphraseVariable) is empty") }
                materials.append(.passphrase(envPassphrase))
            }
            if let identity = getenv(identityVariable), identity.pointee != 0 {
                let path = Array(UnsafeRawBufferPointer(start: identity, count: strlen(identity)))
                materials.append(.identity(try readIdentityFile(path)))
            }
        }
        if materials.isEmpty, optional { return [] }
        if materials.isEmpty, isatty(0) == 1 {
            materials.append(.passphrase(try prompt(confirm: confirm)))
        }
        guard !materials.isEmpty else {
            throw KeyInputError("no key given: use --key-file, --passphrase-file, --identity, \(keyVariable), \(passphraseVariable) or \(identityVariable)")
        }
        return materials
    }

    /// Reads a key file: 64 hex characters, surrounding whitespace ignored.
    ///
    /// - Throws: `KeyInputError` naming the file, never its contents.
    public static func readKeyFile(_ path: [UInt8]) throws -> SymmetricKey {
        let contents: SecureBytes
        do { contents = try FileIO.readSecretFile(path, limit: 4096) } catch let e as BundleError {
            throw KeyInputError("cannot read key file: \(e.message)", path: path)
        }
        return try parseHexKey(contents, what: "key file", path: path)
    }

    /// Reads a passphrase file, less one trailing newline.
    ///
    /// - Throws: `KeyInputError` naming the file.
    public static func readPassphraseFile(_ path: [UInt8]) throws -> SecureBytes {
        let contents: SecureBytes
        do { contents = try FileIO.readSecretFile(path, limit: 65536) } catch let e as BundleError {
            throw KeyInputError("cannot read passphrase file: \(e.message)", path: path)
        }
        return try passphrase(fromFile: contents, path: path)
    }

    /// Reads an identity: an X25519 or RSA private key in PEM (PKCS#8).
    ///
    /// - Throws: `KeyInputError` naming the file and what is wrong with it.
    public static func readIdentityFile(_ path: [UInt8]) throws -> PrivateKey {
        let contents: SecureBytes
        do { contents = try FileIO.readSecretFile(path, limit: 65536) } catch let e as BundleError {
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
    public static func readRecipientFile(_ path: [UInt8]) throws -> PublicKey {
        let contents: SecureBytes
        do { contents = try FileIO.readSecretFile(path, limit: 65536) } catch let e as BundleError {
            throw KeyInputError("cannot read recipient file: \(e.message)", path: path)
        }
        do {
            return try contents.withUnsafeBytes { try PublicKey(pem: $0) }
        } catch let e as CryptError {
            throw KeyInputError("unusable recipient file: \(e.description)", path: path)
        }
    }

    /// Copies an environment variable into wiping storage, overwrites the
    /// original bytes (which `/proc/PID/environ` shows) and unsets it.
    static func takeEnvironment(_ name: String) -> SecureBytes? {
        guard let value = getenv(name) else { return nil }
        let count = strlen(value)
        let raw = UnsafeMutableRawBufferPointer(start: UnsafeMutableRawPointer(value), count: count)
        let copy = SecureBytes(copying: UnsafeRawBufferPointer(raw))
        SecureBytes.wipe(raw)
        unsetenv(name)
        return copy
    }

    /// Parses 64 hex digits, ignoring surrounding whitespace.
    static func parseHexKey(_ text: SecureBytes, what: String, path: [UInt8]?) throws -> SymmetricKey {
        let bytes = try text.withUnsafeBytes { raw -> SecureBytes in
            var start = 0
            var end = raw.count
            while start < end, isSpace(raw[start]) { start += 1 }
            while end > start, isSpace(raw[end - 1]) { end -= 1 }
            guard end - start == 64 else {
                throw KeyInputError("\(what) must hold 64 hex characters (it holds \(end - start))", path: path)
            }
            return try SecureBytes(count: 32) { (out: UnsafeMutableRawBufferPointer) throws(KeyInputError) in
                for i in 0..<32 {
                    guard let hi = hexValue(raw[start + 2 * i]), let lo = hexValue(raw[start + 2 * i + 1]) else {
                        throw KeyInputError("\(what) holds a character that is not a hex digit", path: path)
                    }
                    out[i] = hi << 4 | lo
                }
            }
        }
        do { return try SymmetricKey(bytes) } catch { throw KeyInputError("\(what) has the wrong length", path: path) }
    }

    /// The file's bytes less one trailing newline ("\n" or "\r\n").
    static func passphrase(fromFile contents: SecureBytes, path: [UInt8]) throws -> SecureBytes {
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

    /// Reads a passphrase from /dev/tty with echo off.
    static func prompt(confirm: Bool) throws -> SecureBytes {
        let tty = open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard tty >= 0 else { throw KeyInputError("no key given and no terminal to ask for a passphrase") }
        defer { close(tty) }
        let first = try readHidden(tty: tty, prompt: "passphrase: ")
        guard first.count > 0 else { throw KeyInputError("empty passphrase") }
        if confirm {
            let second = try readHidden(tty: tty, prompt: "passphrase (again): ")
            guard first == second else { throw KeyInputError("passphrases do not match") }
        }
        return first
    }

    private static func readHidden(tty: Int32, prompt: String) throws -> SecureBytes {
        _ = Array(prompt.utf8).withUnsafeBytes { write(tty, $0.baseAddress, $0.count) }
        var saved = termios()
        let haveTermios = tcgetattr(tty, &saved) == 0
        if haveTermios {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            quiet.c_lflag |= tcflag_t(ECHONL)
            _ = tcsetattr(tty, TCSAFLUSH, &quiet)
        }
        defer { if haveTermios { _ = tcsetattr(tty, TCSAFLUSH, &saved) } }
        var line = [UInt8](repeating: 0, count: 4096)
        defer { line.withUnsafeMutableBytes { SecureBytes.wipe($0) } }
        var count = 0
        while count < line.count {
            var byte: UInt8 = 0
            let n = read(tty, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 || byte == 0x0A { break }
            line[count] = byte
            count += 1
        }
        if count > 0, line[count - 1] == 0x0D { count -= 1 }
        return line.withUnsafeBytes { SecureBytes(copying: UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
    }

    private static func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D }

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case 0x30...0x39: return b - 0x30
        case 0x61...0x66: return b - 0x61 + 10
        case 0x41...0x46: return b - 0x41 + 10
        default: return nil
        }
    }
}
