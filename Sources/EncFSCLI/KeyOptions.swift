import CryptCore
import EncFSCore

/// The options that name the secrets a bundle is opened (or packed) with,
/// parsed and read in one place so that every command spells, documents
/// and reads them alike: files, the kernel keyring and systemd service
/// credentials. The environment and the prompt, used when none is given,
/// are ``KeySources``.
package enum KeyOptions {
    package static let keyFile = "--key-file"
    package static let passphraseFile = "--passphrase-file"
    package static let identity = "--identity"
    package static let keyKeyring = "--key-keyring"
    package static let keyringPassphrase = "--keyring-passphrase"
    package static let keyCredential = "--key-credential"
    package static let passphraseCredential = "--passphrase-credential"

    /// The longest key file or key credential read (a key is 64 hex
    /// characters; room for whitespace and a comment-free editor's habits).
    static let keyLimit = 4096
    /// The longest passphrase credential read, as for passphrase files.
    static let passphraseLimit = 65536

    /// The parser entries.
    package static let parserOptions: [ArgumentParser.Option] = [
        .init([keyFile], takesValue: true),
        .init([passphraseFile], takesValue: true),
        .init([identity], takesValue: true),
        .init([keyKeyring], takesValue: true),
        .init([keyringPassphrase], takesValue: false),
        .init([keyCredential], takesValue: true),
        .init([passphraseCredential], takesValue: true),
    ]

    /// Reads every secret the options in `args` name, else the environment,
    /// else a prompt (``KeySources``).
    ///
    /// - Parameters:
    ///   - args: the parsed command line.
    ///   - confirm: ask for a prompted passphrase twice (when packing).
    ///   - optional: return no secret (instead of prompting or failing) when
    ///     none is given, for commands that work without a key.
    /// - Returns: the secrets, in option order by kind: key files,
    ///   passphrase files, identities, keyring keys, credentials.
    /// - Throws: `UsageError` for `--keyring-passphrase` without
    ///   `--key-keyring`; `KeyInputError` naming the source (never its
    ///   contents) when one cannot be used or none is given.
    package static func gather(from args: ArgumentParser.Result, confirm: Bool, optional: Bool = false) throws -> [KeyMaterial] {
        if args.has(keyringPassphrase), args.values(keyKeyring).isEmpty {
            throw UsageError("\(keyringPassphrase) needs \(keyKeyring)")
        }
        return try KeySources.gather(confirm: confirm, optional: optional) {
            var materials: [KeyMaterial] = []
            for path in args.values(keyFile) { materials.append(.rawKey(try KeyFiles.readKeyFile(path))) }
            for path in args.values(passphraseFile) { materials.append(.passphrase(try KeyFiles.readPassphraseFile(path))) }
            for path in args.values(identity) { materials.append(.identity(try KeyFiles.readIdentityFile(path))) }
            let keyringHoldsPassphrases = args.has(keyringPassphrase)
            for description in args.values(keyKeyring) {
                let payload = try KernelKeyring.readUserKey(description)
                let what = "kernel keyring: user key \(KernelKeyring.shown(description))"
                materials.append(keyringHoldsPassphrases ? .passphrase(try passphrase(payload, what: what))
                                                         : .rawKey(try KeyFiles.parseHexKey(payload, what: what, path: nil)))
            }
            for name in args.values(keyCredential) {
                let contents = try ServiceCredentials.read(name, limit: keyLimit)
                let what = "credential \(ServiceCredentials.shown(name))"
                materials.append(.rawKey(try KeyFiles.parseHexKey(contents, what: what, path: nil)))
            }
            for name in args.values(passphraseCredential) {
                let contents = try ServiceCredentials.read(name, limit: passphraseLimit)
                materials.append(.passphrase(try passphrase(contents, what: "credential \(ServiceCredentials.shown(name))")))
            }
            return materials
        }
    }

    /// `contents` less one trailing newline, as a passphrase file is read.
    ///
    /// - Throws: `KeyInputError` ("`what` is empty") when nothing is left.
    private static func passphrase(_ contents: SecureBytes, what: String) throws -> SecureBytes {
        do { return try KeyFiles.passphrase(fromFile: contents, path: []) } catch is KeyInputError {
            throw KeyInputError("\(what) holds an empty passphrase")
        }
    }

    /// The help lines for the options beyond the files, for every command
    /// that takes keys.
    package static let custodyHelp = """
      --key-keyring DESC       a raw key (64 hex characters) from the kernel
                               keyring: the user key DESC, searched in the
                               session, user and persistent keyrings (store it
                               with: keyctl padd user DESC @u < key-file)
      --keyring-passphrase     the --key-keyring keys hold passphrases instead
      --key-credential NAME    a raw key (key-file format) from the systemd
                               service credential NAME, i.e. the file
                               $CREDENTIALS_DIRECTORY/NAME (LoadCredential=,
                               LoadCredentialEncrypted=; see the README)
      --passphrase-credential NAME
                               a passphrase from the credential NAME
    """
}
