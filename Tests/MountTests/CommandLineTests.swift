import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Failures that happen before anything is mounted or written: exit codes
/// (1 runtime, 2 usage), one `tool: error: what (path)` line on stderr, no
/// mount left, no bundle created or changed. And the argument syntax both
/// tools share: options after positionals, `--name=value`, `--`.
final class CommandLineTests: ToolTestCase {
    private var source = ""
    private var key = ""
    private var bundle = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        source = try scratch.makeDirectory("src")
        try scratch.write("src/hello", Array("hello\n".utf8))
        try scratch.makeDirectory("src/sub")
        try scratch.write("src/sub/data", (0..<200_000).map { UInt8($0 % 251) })
        key = try makeKeyFile()
        bundle = scratch.url("b.encfs")
        try packOrThrow(source, bundle, keyFile: key)
    }

    /// Asserts exit status, exactly one `tool: error: ` line containing
    /// every fragment (plus an optional `hint:` line), and nothing mounted.
    private func assertFails(_ result: ProcessResult, status: Int32, tool: String, containing fragments: [String],
                             mountpoint: String? = nil, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(result.status, status, result.summary, file: file, line: line)
        let lines = result.errorLines.filter { !$0.hasPrefix("hint: ") }
        XCTAssertEqual(lines.count, 1, "stderr: \(result.errorOutput)", file: file, line: line)
        let first = lines.first ?? ""
        XCTAssertTrue(first.hasPrefix("\(tool): error: "), first, file: file, line: line)
        for fragment in fragments {
            XCTAssertTrue(first.contains(fragment), "missing \"\(fragment)\" in: \(first)", file: file, line: line)
        }
        XCTAssertFalse(first.hasSuffix("."), "error lines have no final period: \(first)", file: file, line: line)
        XCTAssertEqual(result.stdout, [], file: file, line: line)
        if let mountpoint {
            XCTAssertFalse(MountTable.isMounted(mountpoint), "\(mountpoint) is mounted", file: file, line: line)
            XCTAssertNil(ProcessTable.daemon(servingAt: mountpoint), "a daemon runs for \(mountpoint)", file: file, line: line)
        }
    }

    private func sha256(_ path: String) throws -> String {
        String(try check("sha256sum", [path]).output.prefix(64))
    }

    // MARK: - encfs-mount

    func testMount_WrongKeyFails() throws {
        let wrong = try makeKeyFile("wrong-key")
        let mnt = try scratch.makeDirectory("mnt")
        let result = try run(try Tools.mount(), [bundle, mnt, "--key-file", wrong])
        assertFails(result, status: 1, tool: "encfs-mount", containing: ["wrong key", bundle], mountpoint: mnt)
        // Same in the foreground.
        let foreground = try run(try Tools.mount(), [bundle, mnt, "--key-file", wrong, "-f"], timeout: 30)
        assertFails(foreground, status: 1, tool: "encfs-mount", containing: ["wrong key"], mountpoint: mnt)
        // And from the environment.
        let fromEnvironment = try run(try Tools.mount(), [bundle, mnt], environment: ["ENCFS_KEY": randomHex()])
        assertFails(fromEnvironment, status: 1, tool: "encfs-mount", containing: ["wrong key"], mountpoint: mnt)
    }

    /// `--log-file` in a directory anyone may write (sticky, as /tmp):
    /// a link another user planted there, or a file of theirs, is refused,
    /// in the foreground and the background, and the link's target is
    /// unchanged; the same name with nothing planted is created and used.
    func testMount_LogFilePlantedByAnotherUserRefused() throws {
        XCTAssertEqual(chmod(scratch.path, 0o755), 0)
        let shared = try scratch.makeDirectory("shared")
        XCTAssertEqual(chmod(shared, 0o1777), 0)
        let target = try scratch.write("root-only", Array("root's own\n".utf8), mode: 0o600)
        let asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        assertSuccess(try run("setpriv", asNobody + ["sh", "-c", "ln -s \"$1\" \"$2/link.log\" && : > \"$2/theirs.log\"",
                                                     "sh", target, shared]))
        let mnt = try scratch.makeDirectory("mnt")
        // Unmounted at teardown should a mount that must fail succeed.
        addTeardownBlock { _ = MountedBundle.unmount(mountpoint: mnt, foreground: nil) }
        for (name, message) in [("link.log", "a symbolic link"), ("theirs.log", "owned by another user")] {
            for foreground in [false, true] {
                let result = try run(try Tools.mount(), [bundle, mnt, "--key-file", key, "--log-file", "\(shared)/\(name)"]
                                     + (foreground ? ["-f"] : []), timeout: 30)
                assertFails(result, status: 1, tool: "encfs-mount", containing: ["cannot use log file: \(message)", name],
                            mountpoint: mnt)
            }
        }
        XCTAssertEqual(try String(contentsOfFile: target, encoding: .utf8), "root's own\n")
        let mounted = try mount(bundle, at: mnt, keyArguments: ["--key-file", key], logFile: "\(shared)/mine.log")
        XCTAssertEqual(try String(contentsOfFile: mounted.path("hello"), encoding: .utf8), "hello\n")
        unmount(mounted)
        var st = stat()
        XCTAssertEqual(lstat("\(shared)/mine.log", &st), 0)
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFREG)
        XCTAssertEqual(st.st_uid, 0)
    }

    func testMount_NotABundleFails() throws {
        let mnt = try scratch.makeDirectory("mnt")
        let random = try scratch.write("random.bin", (0..<4096).map { _ in UInt8.random(in: 0...255) })
        assertFails(try run(try Tools.mount(), [random, mnt, "--key-file", key]), status: 1, tool: "encfs-mount",
                    containing: ["not an encfs bundle", random], mountpoint: mnt)
        let empty = try scratch.write("empty.bin", [])
        assertFails(try run(try Tools.mount(), [empty, mnt, "--key-file", key]), status: 1, tool: "encfs-mount",
                    containing: ["not an encfs bundle"], mountpoint: mnt)
        // The key file itself: text, not a bundle.
        assertFails(try run(try Tools.mount(), [key, mnt, "--key-file", key]), status: 1, tool: "encfs-mount",
                    containing: ["not an encfs bundle"], mountpoint: mnt)
        assertFails(try run(try Tools.mount(), [source, mnt, "--key-file", key]), status: 1, tool: "encfs-mount",
                    containing: [source], mountpoint: mnt)
        let missing = scratch.url("missing.encfs")
        assertFails(try run(try Tools.mount(), [missing, mnt, "--key-file", key]), status: 1, tool: "encfs-mount",
                    containing: ["No such file or directory", missing], mountpoint: mnt)
    }

    func testMount_MissingMountpointFails() throws {
        let missing = scratch.url("no-such-dir")
        assertFails(try run(try Tools.mount(), [bundle, missing, "--key-file", key]), status: 1, tool: "encfs-mount",
                    containing: ["mountpoint", missing], mountpoint: missing)
        XCTAssertEqual(access(missing, F_OK), -1, "the mountpoint must not be created")
        let file = try scratch.write("not-a-dir", [])
        assertFails(try run(try Tools.mount(), [bundle, file, "--key-file", key]), status: 1, tool: "encfs-mount",
                    containing: ["mountpoint", "not a directory", file], mountpoint: file)
    }

    func testMount_KeyProblemsFail() throws {
        let mnt = try scratch.makeDirectory("mnt")
        let short = try scratch.write("short-key", Array("abcd\n".utf8))
        assertFails(try run(try Tools.mount(), [bundle, mnt, "--key-file", short]), status: 1, tool: "encfs-mount",
                    containing: ["64 hex", short], mountpoint: mnt)
        let missing = scratch.url("missing-key")
        assertFails(try run(try Tools.mount(), [bundle, mnt, "--key-file", missing]), status: 1, tool: "encfs-mount",
                    containing: ["key file", missing], mountpoint: mnt)
        // No key at all and no terminal.
        assertFails(try run(try Tools.mount(), [bundle, mnt]), status: 1, tool: "encfs-mount",
                    containing: ["no key given"], mountpoint: mnt)
    }

    func testMount_UsageErrorsExitTwo() throws {
        let mnt = try scratch.makeDirectory("mnt")
        let cases: [[String]] = [
            [],
            [bundle],
            [bundle, mnt, "extra", "--key-file", key],
            [bundle, mnt, "--key-file", key, "--no-such-option"],
            [bundle, mnt, "--key-file"],
            [bundle, mnt, "--key-file", key, "-o"],
            [bundle, mnt, "--key-file", key, "-o", "fsname=x"],
            [bundle, mnt, "--key-file", key, "-o", "allow_other,passphrase=x"],
            [bundle, mnt, "-o", "keyfile"],
            [bundle, mnt, "--key-file", key, "-fx"],
            [bundle, mnt, "--key-file", key, "--foreground=yes"],
        ]
        for arguments in cases {
            let result = try run(try Tools.mount(), arguments)
            XCTAssertEqual(result.status, 2, result.summary)
            XCTAssertTrue(result.errorLines.first?.hasPrefix("encfs-mount: error: ") ?? false, result.summary)
            XCTAssertFalse(MountTable.isMounted(mnt), "\(arguments)")
        }
    }

    func testMount_HelpDocumentsExitCodes() throws {
        let result = try run(try Tools.mount(), ["--help"])
        XCTAssertEqual(result.status, 0)
        XCTAssertTrue(result.output.hasPrefix("usage: encfs-mount "), result.output)
        XCTAssertTrue(result.output.contains("exit codes"), result.output)
        XCTAssertEqual(result.stderr, [])
    }

    func testMount_OptionsAfterPositionalsAndDoubleDash() throws {
        // Options before, between and after the positionals; --name=value.
        let mnt1 = try scratch.makeDirectory("mnt1")
        let first = try mount(bundle, at: mnt1, keyArguments: ["--key-file=\(key)"], logFile: .some(nil))
        XCTAssertEqual(try check("cat", [first.path("hello")]).output, "hello\n")
        unmount(first)
        let log = scratch.url("between.log")
        addTeardownBlock { MountedBundle.unmount(mountpoint: mnt1, foreground: nil) }
        let between = try run(try Tools.mount(), ["--log-file", log, bundle, "--key-file", key, mnt1])
        assertSuccess(between)
        XCTAssertTrue(MountTable.isServing(mnt1))
        MountedBundle.unmount(mountpoint: mnt1, foreground: nil)
        // After --, names starting with '-' are positionals.
        let dashed = try scratch.makeDirectory("-mnt")
        _ = try check("cp", [bundle, scratch.url("-b.encfs")])
        addTeardownBlock { MountedBundle.unmount(mountpoint: dashed, foreground: nil) }
        let result = try sh(#"cd "$1" && exec "$2" --key-file "$3" -- -b.encfs -mnt"#, [scratch.path, try Tools.mount(), key])
        assertSuccess(result)
        XCTAssertTrue(MountTable.isMounted(dashed))
        XCTAssertEqual(try check("cat", ["\(dashed)/hello"]).output, "hello\n")
        MountedBundle.unmount(mountpoint: dashed, foreground: nil)
        // Without --, "-mnt" is an unknown option.
        let usage = try sh(#"cd "$1" && exec "$2" --key-file "$3" -b.encfs -mnt"#, [scratch.path, try Tools.mount(), key])
        XCTAssertEqual(usage.status, 2, usage.summary)
        XCTAssertFalse(MountTable.isMounted(dashed))
    }

    // MARK: - encfs-pack

    func testPack_MissingSourceFailsWithoutCreatingBundle() throws {
        let missing = scratch.url("no-such-src")
        let output = scratch.url("out.encfs")
        let before = try FileManager.default.contentsOfDirectory(atPath: scratch.path).sorted()
        let result = try pack(missing, output, ["--key-file", key])
        assertFails(result, status: 1, tool: "encfs-pack", containing: ["cannot read source directory", missing])
        XCTAssertEqual(access(output, F_OK), -1, "no bundle may appear")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch.path).sorted(), before,
                       "no temporary file may be left")
        // A file where a directory is expected.
        let notADirectory = try pack("\(source)/hello", output, ["--key-file", key])
        assertFails(notADirectory, status: 1, tool: "encfs-pack", containing: ["\(source)/hello"])
        XCTAssertEqual(access(output, F_OK), -1, "no bundle may appear")
    }

    func testPack_FailureLeavesExistingBundleByteIdentical() throws {
        let before = try sha256(bundle)
        let mtimeBefore = try check("stat", ["-c", "%i %Y.%y", bundle]).output
        // Fails before writing: missing source, bad key file.
        assertFails(try pack(scratch.url("no-such-src"), bundle, ["--key-file", key]), status: 1, tool: "encfs-pack",
                    containing: ["cannot read source directory"])
        let badKey = try scratch.write("bad-key", Array(String(repeating: "zz", count: 32).utf8))
        assertFails(try pack(source, bundle, ["--key-file", badKey]), status: 1, tool: "encfs-pack",
                    containing: ["hex", badKey])
        XCTAssertEqual(try sha256(bundle), before)
        // Fails half-way: the source is a mount whose second file returns
        // EIO at chunk 3, after the first file and two chunks are written.
        let damagedSource = try scratch.makeDirectory("damaged-src")
        try scratch.write("damaged-src/a-first", Array(repeating: 0x41, count: 300_000))
        try scratch.write("damaged-src/b-second", Array(repeating: 0x42, count: 1_000_000))
        let damaged = scratch.url("damaged.encfs")
        try packOrThrow(damagedSource, damaged, keyFile: key)
        try BundleSurgery.flipByte(at: try BundleSurgery.offset(ofChunk: 3, byte: 100, ofFile: "b-second", in: damaged,
                                                                 keyFile: key), in: damaged)
        let mounted = try mount(damaged, keyFile: key)
        let listingBefore = try FileManager.default.contentsOfDirectory(atPath: scratch.path).sorted()
        let result = try pack(mounted.mountpoint, bundle, ["--key-file", key])
        assertFails(result, status: 1, tool: "encfs-pack", containing: ["Input/output error"])
        XCTAssertEqual(try sha256(bundle), before, "the existing bundle must be unchanged")
        XCTAssertEqual(try check("stat", ["-c", "%i %Y.%y", bundle]).output, mtimeBefore)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch.path).sorted(), listingBefore,
                       "no temporary file may be left")
        // The old bundle still mounts.
        let old = try mount(bundle, keyFile: key)
        XCTAssertEqual(try check("cat", [old.path("hello")]).output, "hello\n")
    }

    func testPack_SpecialFilesSkippedWithOneWarningEach() throws {
        let special = try scratch.makeDirectory("special")
        try scratch.write("special/regular", Array("regular\n".utf8))
        try check("mkfifo", ["\(special)/fifo"])
        try check(Tools.python, ["-c", "import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])",
                                 "\(special)/socket"])
        let output = scratch.url("special.encfs")
        let result = try pack(special, output, ["--key-file", key])
        XCTAssertEqual(result.status, 0, result.summary)
        XCTAssertEqual(result.errorLines.count, 2, result.errorOutput)
        XCTAssertTrue(result.errorLines.allSatisfy { $0.hasPrefix("encfs-pack: warning: ") }, result.errorOutput)
        XCTAssertTrue(result.errorOutput.contains("\(special)/fifo"), result.errorOutput)
        XCTAssertTrue(result.errorOutput.contains("\(special)/socket"), result.errorOutput)
        XCTAssertTrue(result.output.contains("2 skipped"), result.output)
        let mounted = try mount(output, keyFile: key)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mounted.mountpoint), ["regular"])
    }

    func testPack_UsageErrorsExitTwo() throws {
        let output = scratch.url("out.encfs")
        let cases: [[String]] = [
            [],
            [source],
            [source, output, "extra", "--key-file", key],
            [source, output, "--key-file", key, "--bogus"],
            [source, output, "--key-file"],
            [source, output, "--key-file", key, "--chunk-size", "3K"],
            [source, output, "--key-file", key, "--chunk-size", "2M"],
            [source, output, "--key-file", key, "--chunk-size", "2K"],
            [source, output, "--key-file", key, "--chunk-size", "lots"],
            [source, output, "--key-file", key, "--scrypt-log-n", "13"],
            [source, output, "--key-file", key, "--scrypt-log-n", "21"],
            [source, output, "--key-file", key, "--quiet=yes"],
        ]
        for arguments in cases {
            let result = try run(try Tools.pack(), arguments)
            XCTAssertEqual(result.status, 2, result.summary)
            XCTAssertTrue(result.errorLines.first?.hasPrefix("encfs-pack: error: ") ?? false, result.summary)
            XCTAssertEqual(access(output, F_OK), -1, "\(arguments) created a bundle")
        }
        let help = try run(try Tools.pack(), ["-h"])
        XCTAssertEqual(help.status, 0)
        XCTAssertTrue(help.output.contains("exit codes"), help.output)
    }

    func testPack_OptionsAfterPositionalsAndDoubleDash() throws {
        // Options first, with --name=value.
        let first = scratch.url("first.encfs")
        assertSuccess(try run(try Tools.pack(), ["--key-file=\(key)", "-q", source, first]))
        // After --, "-src" and "-out.encfs" are positionals.
        _ = try check("cp", ["-a", source, scratch.url("-src")])
        let result = try sh(#"cd "$1" && exec "$2" --key-file "$3" --quiet -- -src -out.encfs"#,
                            [scratch.path, try Tools.pack(), key])
        assertSuccess(result)
        let mounted = try mount(scratch.url("-out.encfs"), keyFile: key)
        let diff = try run("diff", ["-r", source, mounted.mountpoint])
        XCTAssertEqual(diff.status, 0, diff.output)
        let viaFirst = try mount(first, keyFile: key)
        XCTAssertEqual(try run("diff", ["-r", source, viaFirst.mountpoint]).status, 0)
        // The summary line goes to stdout unless --quiet.
        let loud = try pack(source, scratch.url("loud.encfs"), ["--key-file", key])
        assertSuccess(loud)
        XCTAssertTrue(loud.output.hasPrefix("encfs-pack: packed 2 files, 1 directories, 0 symlinks"), loud.output)
    }
}
