/// What a tool's argv asks before its own work: a usage error, `--help` or
/// `--version`, or the parsed arguments to act on. One order for every
/// tool that uses it: a usage error first (one line and a hint, exit 2),
/// then help, then version.
package enum CommandLineStart {
    /// The arguments, for the command to act on.
    case run(ArgumentParser.Result)
    /// Nothing left to do: exit with this status.
    case exit(Int32)

    /// Parses `arguments` with `parser`, checks them with `validate`, and
    /// answers `--help` and `--version` of `tool`.
    ///
    /// - Parameters:
    ///   - validate: the command's own usage rules (operand counts,
    ///     options that exclude each other); a `UsageError` it throws is
    ///     reported like a parse error.
    package static func parse(_ arguments: [[UInt8]], with parser: ArgumentParser, tool: String, help: String,
                              diagnostics: Diagnostics,
                              validate: (ArgumentParser.Result) throws -> Void = { _ in }) -> CommandLineStart {
        let args: ArgumentParser.Result
        do {
            args = try parser.parse(arguments)
            if !args.has("--help"), !args.has("--version") { try validate(args) }
        } catch {
            diagnostics.report(error)
            diagnostics.hint("see \(tool) --help")
            return .exit(ExitCode.usage)
        }
        if args.has("--help") {
            print(help)
            return .exit(ExitCode.success)
        }
        if VersionOption.handle(args, tool: tool) { return .exit(ExitCode.success) }
        return .run(args)
    }
}
