import EncFSCore
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Base class of the mount tests: a scratch directory per test, key files,
/// and pack / mount / tool helpers that always clean up.
///
/// Teardown blocks run last-registered first, so every mount (registered
/// after the scratch directory) is taken down before the directory is
/// removed.
class MountTestCase: XCTestCase {
    private var scratchStorage: ScratchDirectory?

    /// This test's scratch directory.
    var scratch: ScratchDirectory {
        guard let scratchStorage else { preconditionFailure("internal error: setUp has not run") }
        return scratchStorage
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        continueAfterFailure = true
        let scratch = try ScratchDirectory()
        scratchStorage = scratch
        addTeardownBlock { scratch.remove() }
    }

    // MARK: - Keys

    /// 64 random hex characters.
    func randomHex(bytes: Int = 32) -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    /// Writes a fresh random key (64 hex digits and a newline) to `name`.
    ///
    /// - Returns: the key file's path.
    func makeKeyFile(_ name: String = "key") throws -> String {
        try scratch.write(name, Array((randomHex() + "\n").utf8), mode: 0o600)
    }

    // MARK: - Tools

    /// Runs `tool` with `arguments` (see ``Subprocess/run(_:_:environment:timeout:)``).
    @discardableResult
    func run(_ tool: String, _ arguments: [String], environment: [String: String?] = [:],
             timeout: Double = Subprocess.defaultTimeout) throws -> ProcessResult {
        // The path, not Tools.mount(): that one reports a missing binary.
        let isMount = Tools.binaryDirectory.map { tool == "\($0)/encfs-mount" } ?? false
        let arguments = isMount ? Tools.withTestTransport(arguments) : arguments
        return try Subprocess.run(tool, arguments, environment: environment, timeout: timeout)
    }

    /// Runs `sh -c script sh arguments...` (paths go in as `$1`, `$2`…, never
    /// spliced into the script).
    @discardableResult
    func sh(_ script: String, _ arguments: [String] = [], environment: [String: String?] = [:],
            timeout: Double = Subprocess.defaultTimeout) throws -> ProcessResult {
        try run("/bin/sh", ["-c", script, "sh"] + arguments, environment: environment, timeout: timeout)
    }

    /// Runs a Python script given inline (`python3 -c`), so that nothing a
    /// test generates is written to disk as a script.
    @discardableResult
    func python(_ script: String, _ arguments: [String] = [], environment: [String: String?] = [:],
                timeout: Double = Subprocess.defaultTimeout) throws -> ProcessResult {
        try run(Tools.python, ["-c", script] + arguments, environment: environment, timeout: timeout)
    }

    /// Asserts that `result` exited 0.
    func assertSuccess(_ result: ProcessResult, _ message: String = "", file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(result.status, 0, "\(message) \(result.summary)", file: file, line: line)
    }

    /// Runs a tool and requires exit status 0.
    ///
    /// - Throws: `SubprocessError` with the command's summary when it fails.
    @discardableResult
    func check(_ tool: String, _ arguments: [String], environment: [String: String?] = [:],
               timeout: Double = Subprocess.defaultTimeout) throws -> ProcessResult {
        let result = try run(tool, arguments, environment: environment, timeout: timeout)
        guard result.status == 0 else { throw SubprocessError(result.summary) }
        return result
    }

    // MARK: - Pack

    /// Runs `encfs-pack SOURCE BUNDLE ARGUMENTS...`.
    @discardableResult
    func pack(_ source: String, _ bundle: String, _ arguments: [String], environment: [String: String?] = [:],
              timeout: Double = Subprocess.defaultTimeout) throws -> ProcessResult {
        try run(try Tools.pack(), [source, bundle] + arguments, environment: environment, timeout: timeout)
    }

    /// Packs `source` into `bundle` with `--key-file keyFile`, requiring
    /// success.
    ///
    /// - Returns: wall-clock seconds the pack took.
    @discardableResult
    func packOrThrow(_ source: String, _ bundle: String, keyFile: String, _ extra: [String] = [],
                     timeout: Double = Subprocess.defaultTimeout) throws -> Double {
        let start = ContinuousClock.now
        let result = try pack(source, bundle, ["--key-file", keyFile, "--quiet"] + extra, timeout: timeout)
        guard result.status == 0 else { throw SubprocessError(result.summary) }
        return seconds(since: start)
    }

    /// Seconds elapsed since `start`.
    func seconds(since start: ContinuousClock.Instant) -> Double {
        let d = ContinuousClock.now - start
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    // MARK: - Mount

    /// Mounts `bundle` and waits until the mount serves.
    ///
    /// The unmount is registered as a teardown block before `encfs-mount`
    /// starts, so it runs whatever happens next.
    ///
    /// - Parameters:
    ///   - bundle: the bundle path.
    ///   - mountpoint: an existing directory; by default a fresh `mnt` in scratch.
    ///   - keyArguments: e.g. `["--key-file", key]`; may be empty when the
    ///     key comes from the environment.
    ///   - environment: extra variables for `encfs-mount` (e.g. `ENCFS_KEY`).
    ///   - options: more arguments (`-o …`).
    ///   - logFile: `--log-file`; by default `mnt.log` in scratch; `nil` for none.
    ///   - foreground: run with `-f` and keep the process.
    /// - Returns: the mount.
    /// - Throws: `SubprocessError` when encfs-mount fails or the mount does
    ///   not serve within 15 s.
    func mount(_ bundle: String, at mountpoint: String? = nil, keyArguments: [String],
               environment: [String: String?] = [:], options: [String] = [], logFile: String?? = .none,
               foreground: Bool = false) throws -> MountedBundle {
        let target = try mountpoint ?? scratch.makeDirectory(uniqueName("mnt"))
        guard let resolved = realpath(target, nil) else { throw SubprocessError("no mountpoint \(target)") }
        let absolute = String(cString: resolved)
        free(resolved)
        let log: String? = logFile ?? scratch.url("\(uniqueName("mount")).log")
        var arguments = [bundle, absolute] + keyArguments + options
        if let log { arguments += ["--log-file", log] }
        let start = ContinuousClock.now
        let testName = name
        if foreground {
            let stderrFile = scratch.url("\(uniqueName("foreground")).stderr")
            let process = try SpawnedProcess(try Tools.mount(), Tools.withTestTransport(arguments + ["-f"]), environment: environment,
                                             standardErrorFile: stderrFile)
            addTeardownBlock {
                let notes = MountedBundle.unmount(mountpoint: absolute, foreground: process)
                if !notes.isEmpty { print("[\(testName)] teardown: \(notes.joined(separator: "; "))") }
            }
            let served = Deadline.poll(seconds: 15) {
                (MountTable.isMounted(absolute) && MountTable.isServing(absolute)) || !process.isRunning
            }
            guard served, process.isRunning else {
                let stderr = (try? String(contentsOfFile: stderrFile, encoding: .utf8)) ?? ""
                throw SubprocessError("encfs-mount -f did not serve at \(absolute) (running: \(process.isRunning)); stderr: \(stderr)")
            }
            return MountedBundle(bundle: bundle, mountpoint: absolute, logFile: log, foreground: process,
                                 daemonPID: process.pid, secondsToServe: seconds(since: start))
        }
        addTeardownBlock {
            let notes = MountedBundle.unmount(mountpoint: absolute, foreground: nil)
            if !notes.isEmpty { print("[\(testName)] teardown: \(notes.joined(separator: "; "))") }
        }
        let result = try run(try Tools.mount(), arguments, environment: environment, timeout: 60)
        guard result.status == 0 else { throw SubprocessError(result.summary) }
        guard Deadline.poll(seconds: 15, { MountTable.isMounted(absolute) && MountTable.isServing(absolute) }) else {
            throw SubprocessError("\(absolute) is not serving after encfs-mount returned 0")
        }
        let elapsed = seconds(since: start)
        return MountedBundle(bundle: bundle, mountpoint: absolute, logFile: log, foreground: nil,
                             daemonPID: ProcessTable.daemon(servingAt: absolute), secondsToServe: elapsed)
    }

    /// Mounts with `--key-file keyFile`.
    func mount(_ bundle: String, keyFile: String, at mountpoint: String? = nil, options: [String] = [],
               foreground: Bool = false) throws -> MountedBundle {
        try mount(bundle, at: mountpoint, keyArguments: ["--key-file", keyFile], options: options, foreground: foreground)
    }

    /// Requires that `encfs-mount … OPTION VALUE` exits 2 with `message`
    /// on stderr and mounts nothing, for each of `values` (on an empty
    /// bundle: options are checked before anything is opened).
    func assertMountOptionRejected(_ option: String, values: [String], message: String,
                                   file: StaticString = #filePath, line: UInt = #line) throws {
        let source = try scratch.makeDirectory(uniqueName("empty-src"))
        let key = try makeKeyFile(uniqueName("option-key"))
        let bundle = scratch.url("\(uniqueName("empty")).encfs")
        _ = try packOrThrow(source, bundle, keyFile: key)
        let mountpoint = try scratch.makeDirectory(uniqueName("mnt-option"))
        for value in values {
            let result = try run(try Tools.mount(), [bundle, mountpoint, "--key-file", key, option, value])
            XCTAssertEqual(result.status, 2, "\(option) \(value): \(result.summary)", file: file, line: line)
            XCTAssertTrue(result.errorOutput.contains(message), result.summary, file: file, line: line)
            XCTAssertFalse(MountTable.isMounted(mountpoint), file: file, line: line)
        }
    }

    /// Unmounts now (the teardown block then finds nothing to do) and
    /// requires that a plain `fusermount3 -u` was enough.
    func unmount(_ mounted: MountedBundle, file: StaticString = #filePath, line: UInt = #line) {
        let notes = MountedBundle.unmount(mountpoint: mounted.mountpoint, foreground: mounted.foreground)
        XCTAssertEqual(notes, [], "unmount needed fallbacks", file: file, line: line)
        XCTAssertFalse(MountTable.isMounted(mounted.mountpoint), file: file, line: line)
    }

    private var nameCounters: [String: Int] = [:]

    /// `base`, `base-2`, `base-3`… unique within the test.
    func uniqueName(_ base: String) -> String {
        let n = (nameCounters[base] ?? 0) + 1
        nameCounters[base] = n
        return n == 1 ? base : "\(base)-\(n)"
    }

    /// Prints a measurement so it shows in the test log.
    func report(_ text: String) {
        print("[\(name)] \(text)")
    }
}
