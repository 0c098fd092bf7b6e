import CryptCore
import EncFSCore
import EncFSService

/// `--version`, which every command accepts: prints `TOOL VERSION` on
/// stdout (`encfs-pack 0.1.0`), then the build's git commit and the
/// OpenSSL and libfuse libraries in use (read from the libraries at run
/// time, not from the headers at build time), and exits 0, so scripts
/// and bug reports can name the build:
///
///     encfs-pack 0.1.0
///     commit: 1f0ae31c2b9d
///     openssl: OpenSSL 3.0.15 3 Sep 2024
///     libfuse: 3.14.0
///
/// The first line stays `TOOL VERSION` for scripts that read only it.
package enum VersionOption {
    /// The option, for each command's parser.
    package static let option = ArgumentParser.Option(["--version"], takesValue: false)

    /// Prints the version lines of `tool` when `args` asks for it.
    ///
    /// - Returns: whether it did (the command then exits 0).
    package static func handle(_ args: ArgumentParser.Result, tool: String) -> Bool {
        guard args.has("--version") else { return false }
        print(text(tool: tool))
        return true
    }

    /// The lines, without the final newline.
    package static func text(tool: String) -> String {
        """
        \(tool) \(EncFSVersion.string)
        commit: \(BuildInfo.commit)
        openssl: \(OpenSSLLibrary.versionText)
        libfuse: \(FUSELibrary.version)
        """
    }
}
