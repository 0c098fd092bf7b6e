import EncFSCore
import CryptCore

/// The reader options that say where a bundle must come from
/// (`OpenOptions.origin`): `--verify-key PUBFILE` (repeatable) and
/// `--expect-bundle-id HEX`, and how the mount daemon receives them.
extension ReaderOptions {
    static let verifyKey = "--verify-key"
    static let expectBundleID = "--expect-bundle-id"
    /// Internal: how the mount daemon receives the verifying keys, as the
    /// 64 hex digits of each raw public key. Public values, so argv is fine;
    /// and the daemon checks exactly the keys the command read, not
    /// whatever the files hold by the time it starts.
    static let daemonVerifyKey = "--internal-verify-key"

    /// The parser entries of the origin options.
    package static let originParserOptions: [ArgumentParser.Option] = [
        .init([verifyKey], takesValue: true),
        .init([expectBundleID], takesValue: true),
        .init([daemonVerifyKey], takesValue: true),
    ]

    /// Reads the options from `args`: the key files named by `--verify-key`,
    /// and (in the mount daemon) the keys passed as hex.
    ///
    /// - Throws: `UsageError` for a bundle id or daemon key that is not
    ///   hex of the right length; `KeyInputError` for a key file that
    ///   cannot be read or holds no Ed25519 public key.
    package static func origin(from args: ArgumentParser.Result) throws -> OriginPolicy {
        var policy = OriginPolicy()
        if let text = args.value(expectBundleID) {
            guard let id = parseHex(text), id.count == BundleFormat.idSize else {
                throw UsageError("\(expectBundleID) must be \(2 * BundleFormat.idSize) hex digits (encfs-inspect info shows the id)")
            }
            policy.bundleID = id
        }
        for path in args.values(verifyKey) { policy.signers.append(try KeyFiles.readVerifyingKeyFile(path)) }
        for text in args.values(daemonVerifyKey) {
            guard let raw = parseHex(text),
                  let key = try? raw.withUnsafeBytes({ (r) throws(CryptError) in try SigningPublicKey(rawRepresentation: r) }) else {
                throw UsageError("\(daemonVerifyKey) must be \(2 * SigningPublicKey.byteCount) hex digits of an Ed25519 key")
            }
            policy.signers.append(key)
        }
        return policy
    }

    /// The daemon's arguments for `policy` (empty for none).
    package static func daemonArguments(forOrigin policy: OriginPolicy) -> [[UInt8]] {
        var arguments: [[UInt8]] = []
        for key in policy.signers { arguments += [Array(daemonVerifyKey.utf8), Array(Hex.encode(key.rawRepresentation).utf8)] }
        if let id = policy.bundleID { arguments += [Array(expectBundleID.utf8), Array(Hex.encode(id).utf8)] }
        return arguments
    }

    /// The help lines of the origin options, for both tools.
    package static let originHelp = """
      --verify-key PUBFILE     refuse the bundle unless it is signed by this
                               Ed25519 public key (the .pub of encfs-keygen
                               --sign); repeatable: any one of them will do
      --expect-bundle-id HEX   refuse the bundle unless its id (32 hex digits,
                               shown by encfs-inspect info) is HEX
    """

    /// Hex digits (either case) as bytes; nil for an odd count or another
    /// character.
    static func parseHex(_ text: [UInt8]) -> [UInt8]? {
        guard text.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.count / 2)
        var i = 0
        while i < text.count {
            guard let high = Hex.value(ofDigit: text[i]), let low = Hex.value(ofDigit: text[i + 1]) else { return nil }
            bytes.append(high << 4 | low)
            i += 2
        }
        return bytes
    }
}
