import EncFSCore
import CryptCore
import EncFSService

/// The options of encfs-mount and encfs-inspect that set what a reader
/// accepts from a bundle (`OpenOptions`), parsed in one place so both
/// tools spell and check them alike.
package enum ReaderOptions {
    package static let scryptMaxMemory = "--scrypt-max-memory"
    package static let allowExternalSymlinks = "--allow-external-symlinks"

    /// The parser entries.
    package static let parserOptions: [ArgumentParser.Option] = [
        .init([scryptMaxMemory], takesValue: true),
        .init([allowExternalSymlinks], takesValue: false),
    ] + originParserOptions

    /// Reads the options from `args`, and the verifying keys they name
    /// (ReaderOptions+Origin.swift).
    ///
    /// - Throws: `UsageError` for a size that does not parse or is out of
    ///   range, or a bundle id that is not 32 hex digits; `KeyInputError`
    ///   for a verifying key file that cannot be used (a runtime failure).
    package static func openOptions(from args: ArgumentParser.Result) throws -> OpenOptions {
        var options = OpenOptions(allowsExternalSymlinks: args.has(allowExternalSymlinks), origin: try origin(from: args))
        if let text = args.value(scryptMaxMemory) {
            guard let size = parseSize(text), size >= 1 << 20, size <= Scrypt.maximumMemory else {
                throw UsageError("\(scryptMaxMemory) must be a size from 1M to 2G, such as 512M or 2G")
            }
            options.scryptMemoryLimit = size
        }
        return options
    }

    /// `512M`, `2G`, `64K` (binary multiples, either case) or a byte count.
    package static func parseSize(_ text: [UInt8]) -> UInt64? {
        var digits = Substring(String(decoding: text, as: UTF8.self).uppercased())
        var shift: UInt64 = 0
        switch digits.last {
        case "K": shift = 10
        case "M": shift = 20
        case "G": shift = 30
        default: break
        }
        if shift > 0 { digits.removeLast() }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let n = UInt64(digits), n <= UInt64.max >> shift else { return nil }
        return n << shift
    }

    /// A `hint:` line for errors these options change, naming the option
    /// (from the table in `ErrorCode+Presentation.swift`, by code: the
    /// background daemon's refusal arrives as one).
    package static func hint(for error: Error) -> String? {
        ErrorCode.hint(for: error)
    }

    /// The smallest `--scrypt-max-memory` value in M that admits `bytes`.
    package static func sizeOption(_ bytes: UInt64) -> String {
        let mebibytes = (bytes >> 20) + (bytes & ((1 << 20) - 1) == 0 ? 0 : 1)
        return mebibytes % 1024 == 0 ? "\(mebibytes / 1024)G" : "\(mebibytes)M"
    }

    /// The help lines for both tools.
    package static let help = """
      --scrypt-max-memory SIZE most memory a passphrase slot's scrypt may need
                               before anything is authenticated, e.g. 512M, 2G
                               (default 1G, the costliest slot encfs-pack makes)
      --allow-external-symlinks
                               accept symlinks that point outside the bundle
                               (absolute, or climbing above its root); without
                               it they are refused, since a mount would serve
                               the host's files through them
    """
}
