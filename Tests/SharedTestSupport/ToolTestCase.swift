import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Base class of the tests that run the built binaries (CLITests,
/// MountTests, RemoteTests): a scratch directory per test, key files, and
/// pack / tool helpers that always clean up. MountTests adds the mount
/// helpers in an extension (MountTests/Support/MountTestCase.swift).
///
/// Teardown blocks run last-registered first, so every mount (registered
/// after the scratch directory) is taken down before the directory is
/// removed.
open class ToolTestCase: XCTestCase {
    private var scratchStorage: ScratchDirectory?

    /// This test's scratch directory.
    public var scratch: ScratchDirectory {
        guard let scratchStorage else { preconditionFailure("internal error: setUp has not run") }
        return scratchStorage
    }

    open override func setUpWithError() throws {
        try super.setUpWithError()
        continueAfterFailure = true
        let scratch = try ScratchDirectory()
        scratchStorage = scratch
        addTeardownBlock { scratch.remove() }
    }

    // MARK: - Keys

    /// 64 random hex characters.
    open func randomHex(bytes: Int = 32) -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    /// Writes a fresh random key (64 hex digits and a newline) to `name`.
    ///
    /// - Returns: the key file's path.
    open func makeKeyFile(_ name: String = "key") throws -> String {
        try scratch.write(name, Array((randomHex() + "\n").utf8), mode: 0o600)
    }

    // MARK: - Tools

    /// Runs `tool` with `arguments` (see ``Subprocess/run(_:_:environment:timeout:)``).
    @discardableResult
    open func run(_ tool: String, _ arguments: [String], environment: [String: String?] = [:],
             timeout: Double = Subprocess.defaultTimeout) throws -> ProcessResult {
        // The path, not Tools.mount(): that one reports a missing binary.
        let isMount = Tools.binaryDirectory.map { tool == "\($0)/encfs-mount" } ?? false
        let arguments = isMount ? Tools.withTestTransport(arguments) : arguments
        return try Subprocess.run(tool, arguments, environment: environment, timeout: timeout)
    }

    /// Runs `sh -c script sh arguments...` (paths go in as `$1`, `$2`…, never
    /// spliced into the script).
    @discardableResult
    open func sh(_ script: String, _ arguments: [String] = [], environment: [String: String?] = [:],
            timeout: Double = Subprocess.defaultTimeout) throws -> ProcessResult {
        try run("/bin/sh", ["-c", script, "sh"] + arguments, environment: environment, timeout: timeout)
    }

    /// Runs a Python script given inline (`python3 -c`), so that nothing a
    /// test generates is written to disk as a script.
    @discardableResult
    open func python(_ script: String, _ arguments: [String] = [], environment: [String: String?] = [:],
                timeout: Double = Subprocess.defaultTimeout) throws -> ProcessResult {
        try run(Tools.python, ["-c", script] + arguments, environment: environment, timeout: timeout)
    }

    /// Asserts that `result` exited 0.
    open func assertSuccess(_ result: ProcessResult, _ message: String = "", file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(result.status, 0, "\(message) \(result.summary)", file: file, line: line)
    }

    /// Runs a tool and requires exit status 0.
    ///
    /// - Throws: `SubprocessError` with the command's summary when it fails.
    @discardableResult
    open func check(_ tool: String, _ arguments: [String], environment: [String: String?] = [:],
               timeout: Double = Subprocess.defaultTimeout) throws -> ProcessResult {
        let result = try run(tool, arguments, environment: environment, timeout: timeout)
        guard result.status == 0 else { throw SubprocessError(result.summary) }
        return result
    }

    // MARK: - Pack

    /// Runs `encfs-pack SOURCE BUNDLE ARGUMENTS...`.
    @discardableResult
    open func pack(_ source: String, _ bundle: String, _ arguments: [String], environment: [String: String?] = [:],
              timeout: Double = Subprocess.defaultTimeout) throws -> ProcessResult {
        try run(try Tools.pack(), [source, bundle] + arguments, environment: environment, timeout: timeout)
    }

    /// Packs `source` into `bundle` with `--key-file keyFile`, requiring
    /// success.
    ///
    /// - Returns: wall-clock seconds the pack took.
    @discardableResult
    open func packOrThrow(_ source: String, _ bundle: String, keyFile: String, _ extra: [String] = [],
                     timeout: Double = Subprocess.defaultTimeout) throws -> Double {
        let start = ContinuousClock.now
        let result = try pack(source, bundle, ["--key-file", keyFile, "--quiet"] + extra, timeout: timeout)
        guard result.status == 0 else { throw SubprocessError(result.summary) }
        return seconds(since: start)
    }

    /// Seconds elapsed since `start`.
    open func seconds(since start: ContinuousClock.Instant) -> Double {
        let d = ContinuousClock.now - start
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    private var nameCounters: [String: Int] = [:]

    /// `base`, `base-2`, `base-3`… unique within the test.
    open func uniqueName(_ base: String) -> String {
        let n = (nameCounters[base] ?? 0) + 1
        nameCounters[base] = n
        return n == 1 ? base : "\(base)-\(n)"
    }

    /// Prints a measurement so it shows in the test log.
    open func report(_ text: String) {
        print("[\(name)] \(text)")
    }
}
