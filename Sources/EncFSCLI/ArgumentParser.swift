import EncFSCore
/// A small getopt-style parser over raw argv bytes.
///
/// Options may come before or after positional arguments; `--` ends
/// options; long options take values as `--name VALUE` or `--name=VALUE`,
/// short ones as `-o VALUE` or `-oVALUE`. Values stay byte strings so paths
/// that are not UTF-8 pass through untouched.
package struct ArgumentParser: Sendable {
    /// One option the command accepts.
    package struct Option: Sendable {
        package var names: [String]
        package var takesValue: Bool
        package init(_ names: [String], takesValue: Bool) {
            self.names = names
            self.takesValue = takesValue
        }
    }

    /// A parse result: options in order (by their first name) and positionals.
    package struct Result {
        package var options: [(name: String, value: [UInt8]?)] = []
        package var positionals: [[UInt8]] = []

        /// Whether a flag was given.
        package func has(_ name: String) -> Bool { options.contains { $0.name == name } }
        /// Every value of a repeatable option.
        package func values(_ name: String) -> [[UInt8]] { options.compactMap { $0.name == name ? $0.value : nil } }
        /// The last value of an option.
        package func value(_ name: String) -> [UInt8]? { values(name).last }
    }

    let options: [Option]

    package init(options: [Option]) { self.options = options }

    /// Parses `arguments` (without the program name).
    ///
    /// - Throws: `UsageError` for unknown options or missing values.
    package func parse(_ arguments: [[UInt8]]) throws -> Result {
        var result = Result()
        var i = 0
        var optionsEnded = false
        while i < arguments.count {
            let arg = arguments[i]
            i += 1
            if optionsEnded || arg.count < 2 || arg[0] != UInt8(ascii: "-") {
                result.positionals.append(arg)
                continue
            }
            if arg == Array("--".utf8) {
                optionsEnded = true
                continue
            }
            let isLong = arg[1] == UInt8(ascii: "-")
            var name: [UInt8]
            var inlineValue: [UInt8]?
            if isLong {
                if let eq = arg.firstIndex(of: UInt8(ascii: "=")) {
                    name = Array(arg[..<eq])
                    inlineValue = Array(arg[(eq + 1)...])
                } else {
                    name = arg
                }
            } else {
                name = Array(arg[0..<2])
                if arg.count > 2 { inlineValue = Array(arg[2...]) }
            }
            let nameString = String(decoding: name, as: UTF8.self)
            guard let option = options.first(where: { $0.names.contains(nameString) }) else {
                throw UsageError("unknown option \(String(decoding: arg, as: UTF8.self))")
            }
            if option.takesValue {
                if let v = inlineValue {
                    result.options.append((option.names[0], v))
                } else {
                    guard i < arguments.count else { throw UsageError("option \(nameString) needs a value") }
                    result.options.append((option.names[0], arguments[i]))
                    i += 1
                }
            } else {
                if inlineValue != nil {
                    if isLong { throw UsageError("option \(nameString) takes no value") }
                    // Bundled short flags such as -fd are not supported.
                    throw UsageError("unknown option \(String(decoding: arg, as: UTF8.self))")
                }
                result.options.append((option.names[0], nil))
            }
        }
        return result
    }
}

/// A command-line mistake: exit code 2 with a hint to see `--help`.
package struct UsageError: Error, Sendable {
    package let message: String
    package init(_ message: String) { self.message = message }
}
