import EncFSCore

/// `--version`, which every command accepts: prints `TOOL VERSION` on
/// stdout (`encfs-pack 0.1.0`) and exits 0, so scripts and bug reports can
/// name the build.
enum VersionOption {
    /// The option, for each command's parser.
    static let option = ArgumentParser.Option(["--version"], takesValue: false)

    /// Prints the version line of `tool` when `args` asks for it.
    ///
    /// - Returns: whether it did (the command then exits 0).
    static func handle(_ args: ArgumentParser.Result, tool: String) -> Bool {
        guard args.has("--version") else { return false }
        print("\(tool) \(EncFSVersion.string)")
        return true
    }
}
