import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The mount helpers of the mount tests, on the base class every binary
/// test shares (``ToolTestCase``, in SharedTestSupport): an extension, so
/// that a ``KeyTestCase`` here mounts as well.
extension ToolTestCase {
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
}
