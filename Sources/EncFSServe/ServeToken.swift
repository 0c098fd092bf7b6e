import CryptCore
import EncFSCLI
import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// The token requests carry, and where the log goes.
enum ServeToken {
    /// Random bytes in a made token: 128 bits, as 32 hex digits.
    static let randomBytes = 16
    /// Shortest `--token-file` token: 22 characters of the 66 unreserved
    /// ones carry at least 128 bits only if chosen at random; shorter
    /// ones certainly do not.
    static let minimumLength = 22
    static let maximumLength = 256

    /// A random token, or the one in `file` (one line; a final newline is
    /// dropped).
    ///
    /// - Throws: `CommandError` naming the file, never its contents.
    static func make(file: [UInt8]?) throws -> [UInt8] {
        guard let file else {
            let bytes = try SecureBytes.random(count: randomBytes)
            return bytes.withUnsafeBytes { Array(Hex.encode($0).utf8) }
        }
        let text: SecureBytes
        do { text = try LocalFiles.readSecretFile(file, limit: maximumLength + 1) } catch {
            throw CommandError("cannot read --token-file", path: file)
        }
        let token: [UInt8] = text.withUnsafeBytes { bytes in
            var line = Array(bytes)
            while let last = line.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") { line.removeLast() }
            return line
        }
        let unreserved = token.allSatisfy {
            ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5a) || ($0 >= 0x61 && $0 <= 0x7a)
                || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "~")
        }
        guard token.count >= minimumLength, token.count <= maximumLength, unreserved else {
            throw CommandError("--token-file must hold one token of \(minimumLength) to \(maximumLength) characters of A-Z a-z 0-9 - . _ ~", path: file)
        }
        return token
    }

    /// The log: stderr, or `file` opened for appending (created 0600).
    static func log(file: [UInt8]?) throws -> ServeLog {
        guard let file else { return ServeLog() }
        guard let fd = try? FileDescriptor.open(file, flags: O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW, mode: 0o600) else {
            throw CommandError("cannot open --log-file", path: file)
        }
        return ServeLog(file: fd)
    }
}
