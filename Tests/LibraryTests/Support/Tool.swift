import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The release binaries this suite runs: `encfs-pack` and `encfs-keygen`
/// to make bundles as a build would, and the embedding example.
enum Tool {
    /// `$ENCFS_BIN_DIR`, else this package's `.build/release` (found from
    /// this file's path).
    static let binaryDirectory: String = {
        if let dir = ProcessInfo.processInfo.environment["ENCFS_BIN_DIR"], !dir.isEmpty { return dir }
        // #filePath = <root>/Tests/LibraryTests/Support/Tool.swift
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().path
        return "\(root)/.build/release"
    }()

    /// The path of the binary `name`.
    ///
    /// - Throws: `XCTSkip` when it is missing or stale, after the first
    ///   test of the process that finds it so has failed with one line
    ///   saying what to run (see ``BuiltBinaries``).
    static func path(_ name: String) throws -> String {
        if let problem = BuiltBinaries.problem(with: name, in: binaryDirectory) {
            // Recorded, not thrown: a caller's `try?` cannot hide it.
            if BuiltBinaries.firstReport() { XCTFail(problem) }
            throw XCTSkip("binaries not usable, see the first failure")
        }
        return "\(binaryDirectory)/\(name)"
    }

    /// What a finished run left behind.
    struct Result {
        let status: Int32
        let stdout: [UInt8]
        let stderr: String
        /// stdout decoded as UTF-8 (invalid bytes become U+FFFD).
        var output: String { String(decoding: stdout, as: UTF8.self) }
    }

    /// Runs `executable` to completion with stdin from /dev/null.
    ///
    /// - Throws: `TestFailure` when it cannot be started.
    static func run(_ executable: String, _ arguments: [String]) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        do { try process.run() } catch { throw TestFailure("cannot start \(executable): \(error)") }
        // stderr is drained on its own thread: a child that fills one pipe
        // while this thread waits on the other would never finish.
        let errorBytes = ErrorDrain(err.fileHandleForReading)
        let output = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(status: process.terminationStatus, stdout: Array(output), stderr: errorBytes.finish())
    }

    /// Runs `executable` and fails unless it exits 0.
    ///
    /// - Throws: `TestFailure` naming the command and its stderr.
    @discardableResult
    static func check(_ executable: String, _ arguments: [String]) throws -> Result {
        let result = try run(executable, arguments)
        guard result.status == 0 else {
            throw TestFailure("`\(executable) \(arguments.joined(separator: " "))` exited \(result.status): \(result.stderr)")
        }
        return result
    }
}

/// Reads a pipe to its end on a thread of its own.
private final class ErrorDrain: @unchecked Sendable {
    // Written by the thread before `done` is signalled, read after: the
    // semaphore orders the two.
    private var data = Data()
    private let done = DispatchSemaphore(value: 0)

    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            data = handle.readDataToEndOfFile()
            done.signal()
        }
    }

    /// Waits for the end of the pipe and returns what it held.
    func finish() -> String {
        done.wait()
        return String(decoding: data, as: UTF8.self)
    }
}
