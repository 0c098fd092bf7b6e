import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `encfs-pack` as a process meeting faults: a source file that grows,
/// shrinks, is rewritten or removed while it is read; SIGINT, SIGTERM and
/// SIGKILL mid-pack; a full disk.
///
/// Oracle: the packer packs a consistent snapshot of every file or fails
/// with one clear line; it never names a bundle whose content differs from
/// its index (every bundle produced is checked with `encfs-inspect verify`
/// and by content), never leaves a stray file in the target directory, and
/// an existing bundle at the path stays byte-identical.
///
/// To change a file *while* it is read, the test waits until the packer
/// has the file open, stops it with SIGSTOP when its offset is strictly
/// inside the file (read from /proc/PID/fdinfo), makes the change, and lets
/// it continue. `WriterFaultTests` covers the same rules inside the library
/// with hooks; these run the real binary.
final class PackFaultTests: ToolTestCase {
    private var key = ""
    private var out = ""
    /// Size of the file that is changed or interrupted: large enough that
    /// the packer is still reading it when the test stops it.
    static let victimSize = 64 << 20

    override func setUpWithError() throws {
        try super.setUpWithError()
        key = try makeKeyFile()
        out = try scratch.makeDirectory("out")
    }

    // MARK: - Helpers

    /// A source with `victim` (random bytes), `a-small` and `z-small`.
    private func makeSource(_ name: String = "src") throws -> String {
        let source = try scratch.makeDirectory(name)
        try check(Tools.python, ["-c", "import os,sys; open(sys.argv[1],'wb').write(os.urandom(int(sys.argv[2])))",
                                 "\(source)/victim", String(Self.victimSize)])
        try scratch.write("\(name)/a-small", Array("first\n".utf8))
        try scratch.write("\(name)/z-small", Array("last\n".utf8))
        return source
    }

    /// Packs a one-file tree to `path`: the "existing bundle" that a failed
    /// run must leave alone.
    private func makeExistingBundle(at path: String) throws -> [UInt8] {
        let old = try scratch.makeDirectory("old-src")
        try scratch.write("old-src/old.txt", Array("the previous bundle\n".utf8))
        try packOrThrow(old, path, keyFile: key)
        return try check("cat", [path]).stdout
    }

    private func listing(_ directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
    }

    private func startPack(_ source: String, _ bundle: String) throws -> SpawnedProcess {
        let process = try SpawnedProcess(try Tools.pack(), [source, bundle, "--key-file", key, "--quiet"], captureStandardError: true)
        addTeardownBlock {
            process.signal(SIGCONT)
            process.signal(SIGKILL)
            _ = process.wait(deadline: Deadline(seconds: 10))
        }
        return process
    }

    /// Waits until `pack` has `file` open at an offset strictly inside it,
    /// and leaves it stopped (SIGSTOP) there.
    ///
    /// With `acceptingEndOfFile`, a packer stopped after reading the whole
    /// file but before closing it counts too: still mid-pack (the file is
    /// not the last one), which is all an interruption test needs. A packer
    /// that reads and seals on both cores can be past the last byte by the
    /// time a loaded machine runs the stop.
    ///
    /// - Returns: the offset, or nil when the packer got past the file or
    ///   ended before it could be caught.
    private func stopWhileReading(_ pack: SpawnedProcess, file: String, size: UInt64,
                                  acceptingEndOfFile: Bool = false) -> UInt64? {
        let deadline = Deadline(seconds: 60)
        while !deadline.hasPassed, pack.isRunning {
            guard ProcessTable.descriptors(of: pack.pid).contains(where: { $0.target == file }) else {
                usleep(200)
                continue
            }
            kill(pack.pid, SIGSTOP)
            guard Deadline.poll(seconds: 10, { ProcessTable.state(of: pack.pid) == "T" }) else { return nil }
            // The packer's read-ahead thread opens files for a moment too,
            // at position 0: the descriptor that has moved is the packer's.
            let positions = ProcessTable.descriptors(of: pack.pid).filter { $0.target == file }
                .compactMap { ProcessTable.position(of: pack.pid, fd: $0.fd) }
            if let position = positions.max(), position > 0,
               position < size || (acceptingEndOfFile && position == size) {
                return position
            }
            kill(pack.pid, SIGCONT)
            if positions.max() ?? 0 == 0 {
                // Not read yet (or the file closed between the two looks):
                // once the packer is past the file it is never open again.
                usleep(200)
                continue
            }
            return nil
        }
        return nil
    }

    /// Lets a stopped packer run to its end.
    private func finish(_ pack: SpawnedProcess) -> (status: ExitStatus?, stderr: String) {
        kill(pack.pid, SIGCONT)
        let (_, err, _) = pack.drain(deadline: Deadline(seconds: 120))
        let status = pack.wait(deadline: Deadline(seconds: 30))
        return (status, String(decoding: err, as: UTF8.self))
    }

    private func sha256(ofFile path: String) throws -> String {
        String(try check("sha256sum", [path]).output.prefix(64))
    }

    /// SHA-256 of `relative` as `encfs-inspect cat` prints it from `bundle`.
    private func sha256(of relative: String, in bundle: String) throws -> String {
        let result = try sh(#""$1" cat "$2" "$3" --key-file "$4" | sha256sum"#,
                            [try Tools.inspect(), bundle, relative, key], timeout: 120)
        guard result.status == 0 else { throw SubprocessError(result.summary) }
        return String(result.output.prefix(64))
    }

    /// The oracle for a packer that met a changing source: either one clear
    /// error line and nothing new in `out`, or a bundle that verifies and
    /// holds `victim` as one of `snapshots` and the other files exactly.
    ///
    /// - Returns: "failed" or "packed", for the report.
    @discardableResult
    private func checkOutcome(_ result: (status: ExitStatus?, stderr: String), bundle: String, before: [String],
                              existing: [UInt8]?, snapshots: [String], source: String,
                              file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let status = try XCTUnwrap(result.status, "encfs-pack did not end", file: file, line: line)
        if status != ExitStatus(code: 0, signal: nil) {
            XCTAssertEqual(status, ExitStatus(code: 1, signal: nil), result.stderr, file: file, line: line)
            let lines = result.stderr.split(separator: "\n")
            XCTAssertEqual(lines.count, 1, result.stderr, file: file, line: line)
            XCTAssertTrue(result.stderr.hasPrefix("encfs-pack: error: "), result.stderr, file: file, line: line)
            XCTAssertTrue(result.stderr.contains("source changed while packing"), result.stderr, file: file, line: line)
            XCTAssertEqual(try listing(out), before, "files left behind", file: file, line: line)
            if let existing {
                XCTAssertEqual(try check("cat", [bundle]).stdout, existing, "existing bundle changed", file: file, line: line)
            }
            return "failed: \(result.stderr.trimmingCharacters(in: .newlines))"
        }
        let verify = try run(try Tools.inspect(), ["verify", bundle, "--key-file", key], timeout: 120)
        XCTAssertEqual(verify.status, 0, verify.summary, file: file, line: line)
        XCTAssertTrue(snapshots.contains(try sha256(of: "victim", in: bundle)), "victim holds neither snapshot", file: file, line: line)
        for name in ["a-small", "z-small"] {
            XCTAssertEqual(try sha256(of: name, in: bundle), try sha256(ofFile: "\(source)/\(name)"), file: file, line: line)
        }
        XCTAssertFalse(try listing(out).contains { $0.contains("encfs-tmp") }, file: file, line: line)
        return "packed a snapshot"
    }

    /// Packs while `change` alters the source with the packer stopped in the
    /// middle of `victim`, then applies the oracle. Retries (at most three
    /// times) when the packer could not be caught mid-file.
    private func checkChangeWhileReading(existingBundle: Bool = false, _ change: (String) throws -> Void,
                                         file: StaticString = #filePath, line: UInt = #line) throws {
        for attempt in 1...3 {
            let source = try makeSource("src-\(attempt)")
            let bundle = "\(out)/b\(attempt).encfs"
            let existing = existingBundle ? try makeExistingBundle(at: bundle) : nil
            let before = try listing(out)
            let original = try sha256(ofFile: "\(source)/victim")
            let pack = try startPack(source, bundle)
            guard let position = stopWhileReading(pack, file: "\(source)/victim", size: UInt64(Self.victimSize)) else {
                _ = finish(pack)
                try? FileManager.default.removeItem(atPath: bundle)
                try? FileManager.default.removeItem(atPath: scratch.url("old-src"))
                continue
            }
            try change("\(source)/victim")
            var snapshots = [original]
            if FileManager.default.fileExists(atPath: "\(source)/victim") { snapshots.append(try sha256(ofFile: "\(source)/victim")) }
            let outcome = try checkOutcome(finish(pack), bundle: bundle, before: before, existing: existing,
                                           snapshots: snapshots, source: source, file: file, line: line)
            report("stopped at byte \(position) of \(Self.victimSize): \(outcome)")
            return
        }
        XCTFail("the packer was never caught in the middle of the file", file: file, line: line)
    }

    // MARK: - A source that changes while it is read

    func testPackCLI_FileGrowsWhileRead_FailsOrPacksSnapshot() throws {
        try checkChangeWhileReading { path in
            try check("sh", ["-c", #"head -c 65536 /dev/urandom >> "$1""#, "sh", path])
        }
    }

    func testPackCLI_FileShrinksWhileRead_FailsOrPacksSnapshot() throws {
        try checkChangeWhileReading(existingBundle: true) { path in
            try check("truncate", ["-s", String(Self.victimSize / 2), path])
        }
    }

    func testPackCLI_FileRewrittenAheadOfReaderSameSize_FailsOrPacksSnapshot() throws {
        // The last 4 KiB change; size stays, mtime moves. Packing the new
        // tail after the old head would be a mix of two versions.
        try checkChangeWhileReading { path in
            try check("dd", ["if=/dev/urandom", "of=\(path)", "bs=4096", "count=1", "seek=\(Self.victimSize / 4096 - 1)",
                             "conv=notrunc", "status=none"])
        }
    }

    func testPackCLI_FileRemovedWhileRead_PacksTheOpenedSnapshotOrFails() throws {
        // The packer holds the file open: the bytes stay readable, so a
        // complete snapshot of the file as opened is a correct result.
        try checkChangeWhileReading(existingBundle: true) { path in
            guard unlink(path) == 0 else { throw SubprocessError("unlink \(path)") }
        }
    }

    func testPackCLI_LaterFileRemovedWhilePacking_FailsNamingIt() throws {
        let source = try makeSource()
        let bundle = "\(out)/b.encfs"
        let existing = try makeExistingBundle(at: bundle)
        let before = try listing(out)
        let pack = try startPack(source, bundle)
        let position = try XCTUnwrap(stopWhileReading(pack, file: "\(source)/victim", size: UInt64(Self.victimSize)),
                                     "the packer was never caught in the middle of the file")
        // z-small was walked but not read yet (files are read in name order).
        guard unlink("\(source)/z-small") == 0 else { throw SubprocessError("unlink z-small") }
        let result = finish(pack)
        XCTAssertEqual(result.status, ExitStatus(code: 1, signal: nil), result.stderr)
        XCTAssertEqual(result.stderr, "encfs-pack: error: source changed while packing: file was removed (\(source)/z-small)\n")
        XCTAssertEqual(try listing(out), before)
        XCTAssertEqual(try check("cat", [bundle]).stdout, existing)
        report("stopped at byte \(position); \(result.stderr.trimmingCharacters(in: .newlines))")
    }

    // MARK: - Interrupted

    /// Stops the packer mid-file, checks it is writing its output (unnamed,
    /// or under a hidden temporary name where the file system has no
    /// `O_TMPFILE`), sends `signal`, and checks that nothing is left.
    private func checkInterrupted(by signal: Int32, unnamedOutput: Bool = true,
                                  file: StaticString = #filePath, line: UInt = #line) throws {
        let source = try makeSource()
        for existingBundle in [true, false] {
            let bundle = "\(out)/\(existingBundle ? "existing" : "fresh").encfs"
            let existing = existingBundle ? try makeExistingBundle(at: bundle) : nil
            let before = try listing(out)
            let pack = try startPack(source, bundle)
            let position = stopWhileReading(pack, file: "\(source)/victim", size: UInt64(Self.victimSize), acceptingEndOfFile: true)
            XCTAssertNotNil(position, "the packer was never caught mid-pack", file: file, line: line)
            // Mid-pack: the output exists, unnamed (O_TMPFILE shows as "#ino (deleted)").
            let outputs = ProcessTable.descriptors(of: pack.pid).filter { $0.target.hasPrefix("\(out)/") }
            XCTAssertEqual(outputs.count, 1, "\(ProcessTable.descriptors(of: pack.pid))", file: file, line: line)
            if unnamedOutput {
                XCTAssertTrue(outputs.first.map { $0.target.hasPrefix("\(out)/#") && $0.target.hasSuffix("(deleted)") } ?? false,
                              "\(outputs)", file: file, line: line)
            } else {
                XCTAssertTrue(outputs.first?.target.hasPrefix("\(out)/.\(existingBundle ? "existing" : "fresh").encfs.encfs-tmp-") ?? false,
                              "\(outputs)", file: file, line: line)
            }
            kill(pack.pid, signal)
            let result = finish(pack)
            let status = try XCTUnwrap(result.status, "encfs-pack did not end", file: file, line: line)
            XCTAssertNotEqual(status, ExitStatus(code: 0, signal: nil), result.stderr, file: file, line: line)
            XCTAssertTrue(status.signal == signal || status.code == 1, "\(status)", file: file, line: line)
            XCTAssertEqual(try listing(out), before, "signal \(signal): the target directory changed", file: file, line: line)
            if let existing {
                XCTAssertEqual(try check("cat", [bundle]).stdout, existing, "existing bundle changed", file: file, line: line)
            } else {
                XCTAssertFalse(FileManager.default.fileExists(atPath: bundle), file: file, line: line)
            }
            report("signal \(signal) at byte \(position ?? 0) of \(Self.victimSize) (\(existingBundle ? "existing" : "new") bundle): \(status)")
        }
    }

    func testPackCLI_SIGINTMidPack_NothingNamedExistingBundleKept() throws {
        try checkInterrupted(by: SIGINT)
    }

    func testPackCLI_SIGTERMMidPack_NothingNamedExistingBundleKept() throws {
        try checkInterrupted(by: SIGTERM)
    }

    func testPackCLI_SIGKILLMidPack_NothingNamedExistingBundleKept() throws {
        try checkInterrupted(by: SIGKILL)
    }

    // MARK: - A file system without O_TMPFILE

    /// Mounts libfuse's `passthrough` example (built from the libfuse3-dev
    /// examples) over a scratch directory: FUSE answers `O_TMPFILE` with
    /// EOPNOTSUPP, as NFS, CIFS and vfat do, so the packer falls back to a
    /// hidden named temporary file.
    ///
    /// - Returns: the mountpoint, which `out` now points at.
    private func mountWithoutTmpfile() throws -> String {
        let example = "/usr/share/doc/libfuse3-dev/examples/passthrough.c"
        // The Swift toolchain brings clang; a C compiler is there either way.
        let compiler = ["cc", "gcc", "clang", "/opt/swift/usr/bin/clang"].first { (try? run($0, ["--version"]))?.status == 0 }
        guard FileManager.default.fileExists(atPath: example), let compiler else {
            throw XCTSkip("needs a C compiler and \(example) (libfuse3-dev) for a file system without O_TMPFILE")
        }
        let build = try scratch.makeDirectory("passthrough")
        try check("cp", [example, "\(example.dropLast("passthrough.c".count))passthrough_helpers.h", build])
        let cflags = try check("pkg-config", ["fuse3", "--cflags", "--libs"]).output.split(separator: " ").map {
            $0.trimmingCharacters(in: .whitespacesAndNewlines)
        }.filter { !$0.isEmpty }
        try check(compiler, ["-O1", "-o", "\(build)/passthrough", "\(build)/passthrough.c"] + cflags)
        let under = try scratch.makeDirectory("under")
        let mnt = try scratch.makeDirectory("no-tmpfile")
        addTeardownBlock {
            if (try? Subprocess.run(Tools.fusermount, ["-u", mnt]))?.status != 0 { _ = try? Subprocess.run(Tools.fusermount, ["-uz", mnt]) }
        }
        try check("\(build)/passthrough", ["-o", "modules=subdir,subdir=\(under)", mnt])
        guard Deadline.poll(seconds: 10, { MountTable.isMounted(mnt) }) else { throw SubprocessError("passthrough did not mount") }
        let probe = try python("import os, sys\ntry:\n os.open(sys.argv[1], os.O_TMPFILE | os.O_RDWR, 0o600)\nexcept OSError as e:\n print(e.errno)", [mnt])
        guard probe.output.trimmingCharacters(in: .whitespacesAndNewlines) == String(EOPNOTSUPP) else {
            throw XCTSkip("this kernel's FUSE supports O_TMPFILE: no fallback to test")
        }
        out = mnt
        return mnt
    }

    func testPackCLI_NoTmpfile_PacksWithoutLeavingTheTemporary() throws {
        let mnt = try mountWithoutTmpfile()
        let source = try makeSource()
        for round in 0..<2 {
            try packOrThrow(source, "\(mnt)/b.encfs", keyFile: key)
            XCTAssertEqual(try listing(mnt), ["b.encfs"], "round \(round)")
        }
        let verify = try run(try Tools.inspect(), ["verify", "\(mnt)/b.encfs", "--key-file", key], timeout: 120)
        XCTAssertEqual(verify.status, 0, verify.summary)
        XCTAssertEqual(try sha256(of: "victim", in: "\(mnt)/b.encfs"), try sha256(ofFile: "\(source)/victim"))
    }

    /// Regression: where the output had to be a named temporary file, a
    /// SIGINT or SIGTERM mid-pack left `.NAME.encfs-tmp-…` (a partial
    /// bundle) behind.
    func testPackCLI_NoTmpfile_SIGINTMidPack_RemovesTheTemporary() throws {
        _ = try mountWithoutTmpfile()
        try checkInterrupted(by: SIGINT, unnamedOutput: false)
    }

    func testPackCLI_NoTmpfile_SIGTERMAndSIGHUPMidPack_RemoveTheTemporary() throws {
        _ = try mountWithoutTmpfile()
        try checkInterrupted(by: SIGTERM, unnamedOutput: false)
        try checkInterrupted(by: SIGHUP, unnamedOutput: false)
    }

    /// Nothing can clean up after SIGKILL: without O_TMPFILE the partial
    /// file stays under its hidden temporary name, never at the bundle path
    /// (the documented limit).
    func testPackCLI_NoTmpfile_SIGKILLMidPack_LeavesOnlyAHiddenTemporary() throws {
        let mnt = try mountWithoutTmpfile()
        let source = try makeSource()
        let bundle = "\(mnt)/app.encfs"
        let existing = try makeExistingBundle(at: bundle)
        let pack = try startPack(source, bundle)
        XCTAssertNotNil(stopWhileReading(pack, file: "\(source)/victim", size: UInt64(Self.victimSize)))
        kill(pack.pid, SIGKILL)
        XCTAssertEqual(finish(pack).status?.signal, SIGKILL)
        XCTAssertEqual(try check("cat", [bundle]).stdout, existing)
        let left = try listing(mnt).filter { $0 != "app.encfs" }
        XCTAssertEqual(left.count, 1, "\(left)")
        XCTAssertTrue(left.allSatisfy { $0.hasPrefix(".app.encfs.encfs-tmp-") }, "\(left)")
    }

    // MARK: - Disk full

    func testPackCLI_DiskFull_FailsWithENOSPCAndLeavesNothing() throws {
        guard getuid() == 0 else { throw XCTSkip("mounting a small tmpfs needs root") }
        let disk = try scratch.makeDirectory("small-disk")
        addTeardownBlock {
            if (try? Subprocess.run("umount", [disk]))?.status != 0 { _ = try? Subprocess.run("umount", ["-l", disk]) }
        }
        try check("mount", ["-t", "tmpfs", "-o", "size=16m,mode=0755", "tmpfs", disk])
        out = disk
        let source = try makeSource() // 64 MiB: four times the disk
        let bundle = "\(disk)/app.encfs"
        let existing = try makeExistingBundle(at: bundle)
        let before = try listing(disk)
        let freeBefore = try check("stat", ["-f", "-c", "%f", disk]).output
        for target in [bundle, "\(disk)/new.encfs"] {
            let result = try pack(source, target, ["--key-file", key, "--quiet"])
            XCTAssertEqual(result.status, 1, result.summary)
            XCTAssertEqual(result.errorLines.count, 1, result.errorOutput)
            XCTAssertTrue(result.errorOutput.hasPrefix("encfs-pack: error: "), result.errorOutput)
            XCTAssertTrue(result.errorOutput.contains("No space left on device"), result.errorOutput)
            XCTAssertTrue(result.errorOutput.contains(target), result.errorOutput)
            XCTAssertEqual(try listing(disk), before)
            XCTAssertEqual(try check("cat", [bundle]).stdout, existing)
            // The unnamed output is gone with the process: the space is free again.
            XCTAssertEqual(try check("stat", ["-f", "-c", "%f", disk]).output, freeBefore)
            report("\(target): \(result.errorOutput.trimmingCharacters(in: .newlines))")
        }
    }
}
