import EncFSCore
#if canImport(Glibc)
import Glibc
import EncFSService
#endif

/// Exit codes, documented in every `--help` and in the README.
package enum ExitCode {
    /// Success.
    package static let success: Int32 = 0
    /// A runtime failure: bad bundle, wrong key, I/O error.
    package static let failure: Int32 = 1
    /// A usage error: unknown option, missing argument.
    package static let usage: Int32 = 2

    /// The exit code of a command that ends with `error`: ``usage`` for a
    /// `UsageError`, ``failure`` for anything else.
    package static func code(for error: Error) -> Int32 { error is UsageError ? usage : failure }
}

/// Writes one-line messages to stderr as `tool: error: what (path)`.
///
/// Paths come from bundles, source trees and argv, so they are shown
/// through `PrintableText`: control bytes and bytes that are not UTF-8 as
/// `\xNN`, at most 4096 bytes. A newline in a name therefore cannot start
/// a forged second line, nor an escape sequence reach the terminal.
/// Messages are text this code built; any control character left in one
/// is escaped too.
package struct Diagnostics: Sendable {
    package let tool: String

    package init(tool: String) { self.tool = tool }

    /// `tool: error: message (path)`.
    package func error(_ message: String, path: [UInt8]? = nil) {
        emit("error", message, path)
    }

    /// `tool: warning: message (path)`.
    package func warning(_ message: String, path: [UInt8]? = nil) {
        emit("warning", message, path)
    }

    /// `hint: message`, after an error.
    package func hint(_ message: String) {
        write(Array("hint: \(PrintableText.sanitizing(message))\n".utf8))
    }

    /// A plain line on stderr (summaries, notices).
    package func note(_ message: String) {
        write(Array("\(tool): \(PrintableText.sanitizing(message))\n".utf8))
    }

    /// Reports a `BundleError` or any other error as one line.
    ///
    /// - Parameters:
    ///   - error: the error; its own path, when it has one, wins.
    ///   - path: what the command was working on, shown when the error
    ///     names no path. Never added to a `KeyInputError`: that one is
    ///     about the key source (it names the key file, or nothing for the
    ///     environment and the prompt), not the bundle.
    package func report(_ error: Error, path: [UInt8]? = nil) {
        if let e = error as? BundleError {
            self.error(e.message, path: e.path ?? path)
        } else if let u = error as? UsageError {
            self.error(u.message)
        } else if let c = error as? CommandError {
            self.error(c.message, path: c.path ?? path)
        } else if let k = error as? KeyInputError {
            self.error(k.message, path: k.path)
        } else if let m = error as? MountError {
            self.error(m.message, path: m.path ?? path)
        } else {
            self.error("\(error)", path: path)
        }
    }

    private func emit(_ level: String, _ message: String, _ path: [UInt8]?) {
        var line = "\(tool): \(level): \(PrintableText.sanitizing(message))"
        if let path { line += " (\(PrintableText.escaping(path)))" }
        write(Array((line + "\n").utf8))
    }

    private func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in
            var done = 0
            while done < raw.count {
                guard let base = raw.baseAddress else { return }
                let n = SystemCall.retryingInterrupts { Glibc.write(2, base + done, raw.count - done) }
                if n <= 0 { return }
                done += n
            }
        }
    }
}

/// A runtime failure found by a command (exit 1), with its path.
package struct CommandError: Error, Sendable {
    package let message: String
    package let path: [UInt8]?
    /// What went wrong, when a hint depends on it (`ErrorCode+Presentation.swift`).
    package let code: ErrorCode
    package init(_ message: String, path: [UInt8]? = nil) {
        self.init(.other, message, path: path)
    }
    package init(_ code: ErrorCode, _ message: String, path: [UInt8]? = nil) {
        self.message = message
        self.path = path
        self.code = code
    }
}

/// argv as byte strings (never through `String`).
package func rawArguments() -> [[UInt8]] {
    var out: [[UInt8]] = []
    for i in 1..<Int(CommandLine.argc) {
        guard let p = CommandLine.unsafeArgv[i] else { continue }
        out.append(Array(UnsafeRawBufferPointer(start: p, count: strlen(p))))
    }
    return out
}
