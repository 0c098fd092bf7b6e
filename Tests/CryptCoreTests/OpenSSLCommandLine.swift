import Foundation
import XCTest

/// The `openssl` command line tool, run in a private directory, for
/// interoperability tests: keys and ciphertexts go through files there.
struct OpenSSLCommandLine {
    /// Failure of one `openssl` run, with what it wrote to stderr.
    struct Failure: Error, CustomStringConvertible {
        let arguments: [String]
        let status: Int32
        let standardError: String

        var description: String { "openssl \(arguments.joined(separator: " ")) exited \(status): \(standardError)" }
    }

    /// The directory every relative path is resolved against.
    let directory: URL
    private let executable: URL

    /// Finds `openssl` on `PATH` and makes a fresh directory for its files.
    ///
    /// - Throws: `XCTSkip` when `openssl` is not installed.
    init() throws {
        let searchPath = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        let candidates = searchPath.split(separator: ":").map { URL(fileURLWithPath: String($0)).appendingPathComponent("openssl") }
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            throw XCTSkip("the openssl command line tool is not installed")
        }
        executable = found
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("encfs-openssl-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    /// Removes the directory and everything in it.
    func removeDirectory() {
        try? FileManager.default.removeItem(at: directory)
    }

    /// Runs `openssl <arguments>` in ``directory`` with stdin closed, so a
    /// passphrase prompt fails instead of waiting.
    ///
    /// - Returns: what it wrote to stdout.
    /// - Throws: ``Failure`` on a non-zero exit status.
    @discardableResult
    func run(_ arguments: [String]) throws -> [UInt8] {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.standardInput = FileHandle.nullDevice
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        // Outputs are small (keys, a few hundred bytes of ciphertext), so
        // reading stdout to the end first cannot deadlock on stderr.
        let stdout = output.fileHandleForReading.readDataToEndOfFile()
        let stderr = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Failure(arguments: arguments, status: process.terminationStatus,
                          standardError: String(decoding: stderr, as: UTF8.self))
        }
        return [UInt8](stdout)
    }

    /// Writes `bytes` to `name` inside ``directory``.
    func write(_ bytes: [UInt8], to name: String) throws {
        try Data(bytes).write(to: directory.appendingPathComponent(name))
    }

    /// Reads `name` from ``directory``.
    func read(_ name: String) throws -> [UInt8] {
        try [UInt8](Data(contentsOf: directory.appendingPathComponent(name)))
    }

    /// The `-pkeyopt` arguments for RSA-OAEP with SHA-256 and MGF1-SHA-256,
    /// and a label when one is given (hex, as `rsa_oaep_label` wants it).
    static func oaepOptions(label: [UInt8]) -> [String] {
        var options = ["-pkeyopt", "rsa_padding_mode:oaep", "-pkeyopt", "rsa_oaep_md:sha256", "-pkeyopt", "rsa_mgf1_md:sha256"]
        if !label.isEmpty { options += ["-pkeyopt", "rsa_oaep_label:\(label.hexString)"] }
        return options
    }
}
