import CryptCore
import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// Collects the secrets named on the command line, in the environment, or
/// typed at a prompt.
///
/// Order: the key options (`KeyOptions`: files, kernel keyring, service
/// credentials; each repeatable); if none,
/// `ENCFS_KEY` (64 hex digits) and `ENCFS_PASSPHRASE`; if still none and a
/// terminal is attached, a passphrase prompt without echo (asked twice when
/// `confirm` is set). Both environment variables are wiped in place and
/// removed from the environment in every case, so neither
/// `/proc/PID/environ` nor a child process sees them.
package enum KeySources {
    /// Environment variable holding a hex key.
    package static let keyVariable = "ENCFS_KEY"
    /// Environment variable holding a passphrase.
    package static let passphraseVariable = "ENCFS_PASSPHRASE"
    /// Environment variable naming an identity file (a path, not a secret).
    package static let identityVariable = "ENCFS_IDENTITY"

    /// Gathers the secrets: those `explicit` reads (the key options), else
    /// the environment, else a prompt.
    ///
    /// The environment variables are taken (wiped and unset) before
    /// `explicit` runs, so they are gone whether it succeeds or throws.
    ///
    /// - Parameters:
    ///   - confirm: ask for a prompted passphrase twice (when packing).
    ///   - optional: return no secret (instead of prompting or failing) when
    ///     none is given, for commands that work without a key.
    ///   - explicit: reads the sources named on the command line.
    /// - Returns: at least one secret, unless `optional`.
    /// - Throws: `KeyInputError` when a source is unusable or none is given;
    ///   whatever `explicit` throws.
    package static func gather(confirm: Bool, optional: Bool, explicit: () throws -> [KeyMaterial]) throws -> [KeyMaterial] {
        let envKey = takeEnvironment(keyVariable)
        let envPassphrase = takeEnvironment(passphraseVariable)
        var materials = try explicit()
        if materials.isEmpty {
            if let envKey { materials.append(.rawKey(try KeyFiles.parseHexKey(envKey, what: keyVariable, path: nil))) }
            if let envPassphrase {
                guard envPassphrase.count > 0 else { throw KeyInputError("\(passphraseVariable) is empty") }
                materials.append(.passphrase(envPassphrase))
            }
            if let identity = getenv(identityVariable), identity.pointee != 0 {
                let path = Array(UnsafeRawBufferPointer(start: identity, count: strlen(identity)))
                materials.append(.identity(try KeyFiles.readIdentityFile(path)))
            }
        }
        if materials.isEmpty, optional { return [] }
        if materials.isEmpty, isatty(0) == 1 {
            materials.append(.passphrase(try prompt(confirm: confirm)))
        }
        guard !materials.isEmpty else {
            throw KeyInputError("no key given: use --key-file, --passphrase-file, --identity, --key-keyring, "
                                + "--key-credential, \(keyVariable), \(passphraseVariable) or \(identityVariable)")
        }
        return materials
    }

    /// Copies an environment variable into wiping storage, overwrites the
    /// original bytes (which `/proc/PID/environ` shows) and unsets it.
    package static func takeEnvironment(_ name: String) -> SecureBytes? {
        guard let value = getenv(name) else { return nil }
        let count = strlen(value)
        let raw = UnsafeMutableRawBufferPointer(start: UnsafeMutableRawPointer(value), count: count)
        let copy = SecureBytes(copying: UnsafeRawBufferPointer(raw))
        SecureBytes.wipe(raw)
        unsetenv(name)
        return copy
    }

    /// Reads a passphrase from /dev/tty with echo off.
    package static func prompt(confirm: Bool) throws -> SecureBytes {
        guard let terminal = try? FileDescriptor.open(Array("/dev/tty".utf8), flags: O_RDWR) else {
            throw KeyInputError("no key given and no terminal to ask for a passphrase")
        }
        let first = try readHidden(from: terminal, prompt: "passphrase: ")
        guard first.count > 0 else { throw KeyInputError("empty passphrase") }
        if confirm {
            let second = try readHidden(from: terminal, prompt: "passphrase (again): ")
            guard first == second else { throw KeyInputError("passphrases do not match") }
        }
        return first
    }

    private static func readHidden(from terminal: FileDescriptor, prompt: String) throws -> SecureBytes {
        let tty = terminal.rawValue
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
            let n = SystemCall.retryingInterrupts { read(tty, &byte, 1) }
            if n <= 0 || byte == 0x0A { break }
            line[count] = byte
            count += 1
        }
        if count > 0, line[count - 1] == 0x0D { count -= 1 }
        return line.withUnsafeBytes { SecureBytes(copying: UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
    }
}
