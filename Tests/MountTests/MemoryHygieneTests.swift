import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Where secrets must not be, and memory that must be locked: extends
/// `DaemonTests` (which covers `ENCFS_KEY` in the daemon's /proc files and
/// core-dump limits) to passphrases given through the environment, the
/// environment the background command hands to the daemon it spawns, the
/// packer's own environment while it runs, every error message, the log,
/// and `VmLck` (keys and plaintext buffers are `mlock`ed; with CAP_IPC_LOCK
/// dropped, an unprivileged user's 8 MiB RLIMIT_MEMLOCK suffices, and a
/// limit of 0 gives one warning each for keys and buffers).
final class MemoryHygieneTests: ToolTestCase {
    private var key = ""
    private var keyHex = ""
    private var passphrase = ""
    private var passphraseFile = ""
    private var bundle = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        let source = try scratch.makeDirectory("src")
        try scratch.write("src/file", (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) })
        try scratch.write("src/small", Array("small\n".utf8))
        key = try makeKeyFile()
        keyHex = try String(contentsOfFile: key, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        passphrase = "hygiene-" + randomHex(bytes: 12)
        passphraseFile = try scratch.write("passphrase", Array((passphrase + "\n").utf8), mode: 0o600)
        bundle = scratch.url("h.encfs")
        try packOrThrow(source, bundle, keyFile: key, ["--passphrase-file", passphraseFile, "--scrypt-log-n", "14"])
    }

    // MARK: - Helpers

    private func procFile(_ pid: pid_t, _ name: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/\(name)") else {
            throw SubprocessError("cannot read /proc/\(pid)/\(name)")
        }
        return [UInt8](data)
    }

    private func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
        let needle = Array(needle.utf8)
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        return (0...(haystack.count - needle.count)).contains { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }

    /// The secret in the forms a leak could take: as given, upper case (a
    /// hex key), and each half.
    private func forms(of secret: String) -> [String] {
        let half = secret.count / 2
        return [secret, secret.uppercased(), String(secret.prefix(half)), String(secret.suffix(secret.count - half))]
    }

    /// Fails if any form of any secret occurs in `bytes`.
    private func assertNoSecret(in bytes: [UInt8], _ what: String, secrets: [String]? = nil,
                                file: StaticString = #filePath, line: UInt = #line) {
        for secret in secrets ?? [keyHex, passphrase] {
            for form in forms(of: secret) {
                XCTAssertFalse(contains(bytes, form), "a secret (\(form.count) characters) is in \(what)", file: file, line: line)
            }
        }
    }

    /// Fails unless every `NAME=` entry of a live environ for `names` holds
    /// only NUL bytes (wiped in place), or the name is absent.
    private func assertWiped(_ environ: [UInt8], names: [String], file: StaticString = #filePath, line: UInt = #line) {
        let text = String(decoding: environ, as: UTF8.self)
        for name in names {
            for entry in text.split(separator: "\0") where entry.hasPrefix("\(name)=") {
                XCTAssertEqual(entry, Substring("\(name)="), "\(name) not wiped", file: file, line: line)
            }
        }
    }

    // MARK: - Locked memory

    func testDaemon_KeyAndPlaintextBuffersLockedInMemory() throws {
        for foreground in [false, true] {
            let mounted = try mount(bundle, keyFile: key, foreground: foreground)
            let pid = try XCTUnwrap(mounted.daemonPID)
            let beforeReads = try XCTUnwrap(ProcessTable.statusKilobytes("VmLck", of: pid))
            XCTAssertGreaterThan(beforeReads, 0, "foreground \(foreground): no locked memory, the keys are not mlock'ed")
            // Reads create the pooled chunk and reply buffers, locked too.
            let cmp = try run("cmp", [scratch.url("src/file"), mounted.path("file")])
            XCTAssertEqual(cmp.status, 0, cmp.summary)
            let afterReads = try XCTUnwrap(ProcessTable.statusKilobytes("VmLck", of: pid))
            XCTAssertGreaterThan(afterReads, beforeReads, "foreground \(foreground): plaintext buffers are not mlock'ed")
            XCTAssertFalse(mounted.logLines().contains { $0.contains("could not lock") }, "\(mounted.logLines())")
            report("foreground \(foreground): VmLck \(beforeReads) kB after mounting, \(afterReads) kB after reading")
            unmount(mounted)
        }
    }

    /// Mounts in the background with CAP_IPC_LOCK dropped (root ignores
    /// RLIMIT_MEMLOCK otherwise) and RLIMIT_MEMLOCK set to `limitBytes`, as
    /// an unprivileged user would run it.
    private func mountWithMemlockLimit(_ limitBytes: Int) throws -> (mountpoint: String, log: String, pid: pid_t) {
        guard getuid() == 0 else { throw XCTSkip("dropping CAP_IPC_LOCK to apply RLIMIT_MEMLOCK is tested as root") }
        let mountpoint = try scratch.makeDirectory(uniqueName("mnt-memlock"))
        let log = scratch.url(uniqueName("memlock") + ".log")
        addTeardownBlock { _ = MountedBundle.unmount(mountpoint: mountpoint, foreground: nil) }
        let result = try run("setpriv", ["--bounding-set=-ipc_lock", "--inh-caps=-ipc_lock",
                                         "prlimit", "--memlock=\(limitBytes):\(limitBytes)",
                                         try Tools.mount(), bundle, mountpoint, "--key-file", key, "--log-file", log])
        XCTAssertEqual(result.status, 0, result.summary)
        guard Deadline.poll(seconds: 15, { MountTable.isMounted(mountpoint) && MountTable.isServing(mountpoint) }) else {
            throw SubprocessError("\(mountpoint) is not serving: \(result.summary)")
        }
        let pid = try XCTUnwrap(ProcessTable.daemon(servingAt: mountpoint))
        let capabilities = try String(decoding: procFile(pid, "status"), as: UTF8.self)
        let effective = capabilities.split(separator: "\n").first { $0.hasPrefix("CapEff:") }.map(String.init) ?? ""
        let mask = UInt64(effective.split(separator: "\t").last.map(String.init) ?? "", radix: 16) ?? UInt64.max
        XCTAssertEqual(mask & (1 << 14), 0, "the daemon still has CAP_IPC_LOCK: \(effective)")
        return (mountpoint, log, pid)
    }

    private func logLines(_ log: String) -> [String] {
        ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// No lockable memory at all: the mount still serves correct data and
    /// says so once for the keys and once for the plaintext buffers.
    func testDaemon_MemlockLimitZero_WarnsOnceEachAndServes() throws {
        let (mountpoint, log, pid) = try mountWithMemlockLimit(0)
        for _ in 0..<3 {
            let cmp = try run("cmp", [scratch.url("src/file"), "\(mountpoint)/file"])
            XCTAssertEqual(cmp.status, 0, cmp.summary)
        }
        XCTAssertEqual(ProcessTable.statusKilobytes("VmLck", of: pid), 0)
        let lines = logLines(log)
        XCTAssertEqual(lines.filter { $0.contains("warning: could not lock key memory (RLIMIT_MEMLOCK)") }.count, 1, "\(lines)")
        XCTAssertEqual(lines.filter { $0.contains("warning: could not lock plaintext buffers in memory (RLIMIT_MEMLOCK)") }.count, 1,
                       "\(lines)")
    }

    /// The default limit of an unprivileged user (8 MiB) holds the keys,
    /// the index cache and the worker buffers: no warning, memory locked.
    func testDaemon_DefaultUserMemlockLimit_LocksEverything() throws {
        let (mountpoint, log, pid) = try mountWithMemlockLimit(8 << 20)
        let cmp = try run("cmp", [scratch.url("src/file"), "\(mountpoint)/file"])
        XCTAssertEqual(cmp.status, 0, cmp.summary)
        XCTAssertGreaterThan(ProcessTable.statusKilobytes("VmLck", of: pid) ?? 0, 0)
        XCTAssertFalse(logLines(log).contains { $0.contains("could not lock") }, "\(logLines(log))")
    }

    // MARK: - The environment

    func testEnvironmentPassphrase_NotVisibleInBackgroundDaemon() throws {
        let mounted = try mount(bundle, keyArguments: [], environment: ["ENCFS_PASSPHRASE": passphrase])
        let pid = try XCTUnwrap(mounted.daemonPID)
        XCTAssertEqual(try check("cat", [mounted.path("small")]).output, "small\n")
        let environ = try procFile(pid, "environ")
        XCTAssertFalse(environ.isEmpty)
        assertNoSecret(in: environ, "/proc/\(pid)/environ")
        assertNoSecret(in: try procFile(pid, "cmdline"), "/proc/\(pid)/cmdline")
        XCTAssertFalse(contains(environ, "ENCFS_PASSPHRASE="), "the daemon was given the variable")
        assertNoSecret(in: Array(mounted.logLines().joined(separator: "\n").utf8), "the log")
    }

    func testEnvironmentPassphrase_WipedInForegroundProcess() throws {
        let mounted = try mount(bundle, keyArguments: [], environment: ["ENCFS_PASSPHRASE": passphrase], foreground: true)
        let pid = try XCTUnwrap(mounted.daemonPID)
        XCTAssertEqual(try check("cat", [mounted.path("small")]).output, "small\n")
        let environ = try procFile(pid, "environ")
        assertNoSecret(in: environ, "/proc/\(pid)/environ")
        assertWiped(environ, names: ["ENCFS_PASSPHRASE"])
        assertNoSecret(in: try procFile(pid, "cmdline"), "/proc/\(pid)/cmdline")
        unmount(mounted)
        // What it wrote: its stderr (the mount helper keeps it in
        // foreground.stderr) and its log.
        let stderr = FileManager.default.contents(atPath: scratch.url("foreground.stderr")).map { [UInt8]($0) } ?? []
        assertNoSecret(in: stderr, "the foreground stderr")
        assertNoSecret(in: Array(mounted.logLines().joined(separator: "\n").utf8), "the log")
    }

    /// `encfs-mount` without `-f` spawns the daemon: the daemon's environment
    /// is the copy the command passed on, after it took both variables.
    func testBackgroundCommand_PassesNoSecretVariableToTheDaemon() throws {
        let mounted = try mount(bundle, keyArguments: [],
                                environment: ["ENCFS_KEY": keyHex, "ENCFS_PASSPHRASE": passphrase, "ENCFS_HYGIENE_MARKER": "kept"])
        let pid = try XCTUnwrap(mounted.daemonPID)
        let environ = try procFile(pid, "environ")
        // The environment did reach the daemon; only the secrets did not.
        XCTAssertTrue(contains(environ, "ENCFS_HYGIENE_MARKER=kept"))
        XCTAssertFalse(contains(environ, "ENCFS_KEY="))
        XCTAssertFalse(contains(environ, "ENCFS_PASSPHRASE="))
        assertNoSecret(in: environ, "/proc/\(pid)/environ")
    }

    func testPackProcess_EnvironmentWipedWhilePacking() throws {
        let source = try scratch.makeDirectory("big-src")
        try check(Tools.python, ["-c", "import os,sys; open(sys.argv[1],'wb').write(os.urandom(64 << 20))", "\(source)/big"])
        let pack = try SpawnedProcess(try Tools.pack(), [source, scratch.url("big.encfs"), "--quiet", "--scrypt-log-n", "14"],
                                      environment: ["ENCFS_KEY": keyHex, "ENCFS_PASSPHRASE": passphrase], captureStandardError: true)
        addTeardownBlock {
            pack.signal(SIGCONT)
            pack.signal(SIGKILL)
            _ = pack.wait(deadline: Deadline(seconds: 10))
        }
        // Catch it while it reads the source, i.e. after it took the secrets.
        let caught = Deadline.poll(seconds: 60, interval: 0.0005) {
            !pack.isRunning || ProcessTable.descriptors(of: pack.pid).contains { $0.target == "\(source)/big" }
        }
        XCTAssertTrue(caught)
        kill(pack.pid, SIGSTOP)
        if pack.isRunning {
            let environ = try procFile(pack.pid, "environ")
            assertNoSecret(in: environ, "the packer's /proc environ")
            assertWiped(environ, names: ["ENCFS_KEY", "ENCFS_PASSPHRASE"])
            assertNoSecret(in: try procFile(pack.pid, "cmdline"), "the packer's cmdline")
        } else {
            XCTFail("encfs-pack ended before it could be inspected")
        }
        kill(pack.pid, SIGCONT)
        let (out, err, _) = pack.drain(deadline: Deadline(seconds: 120))
        XCTAssertEqual(pack.wait(deadline: Deadline(seconds: 30)), ExitStatus(code: 0, signal: nil), String(decoding: err, as: UTF8.self))
        assertNoSecret(in: out + err, "encfs-pack output")
    }

    // MARK: - Messages and logs

    func testSecrets_NeverInErrorMessages() throws {
        let mnt = try scratch.makeDirectory("mnt")
        addTeardownBlock { MountedBundle.unmount(mountpoint: mnt, foreground: nil) }
        let log = scratch.url("failed-mount.log")
        let wrongKey = randomHex()
        let wrongPassphrase = "wrong-" + randomHex(bytes: 10)
        let shortKey = String(randomHex().dropLast())
        let nonHexKey = String(randomHex().dropLast()) + "g"
        let badKeyFile = try scratch.write("bad-key", Array("not-a-key-\(randomHex(bytes: 8))\n".utf8), mode: 0o600)
        let badKeyText = try String(contentsOfFile: badKeyFile, encoding: .utf8).trimmingCharacters(in: .newlines)
        let mount = try Tools.mount()
        let inspect = try Tools.inspect()
        let cases: [(String, [String], [String: String?], String)] = [
            ("wrong ENCFS_KEY", [mount, bundle, mnt, "--log-file", log], ["ENCFS_KEY": wrongKey], wrongKey),
            ("short ENCFS_KEY", [mount, bundle, mnt, "--log-file", log], ["ENCFS_KEY": shortKey], shortKey),
            ("non-hex ENCFS_KEY", [mount, bundle, mnt, "--log-file", log], ["ENCFS_KEY": nonHexKey], nonHexKey),
            ("wrong ENCFS_PASSPHRASE", [mount, bundle, mnt, "--log-file", log], ["ENCFS_PASSPHRASE": wrongPassphrase], wrongPassphrase),
            ("malformed key file", [mount, bundle, mnt, "--key-file", badKeyFile, "--log-file", log], [:], badKeyText),
            ("inspect, wrong ENCFS_KEY", [inspect, "ls", bundle], ["ENCFS_KEY": wrongKey], wrongKey),
            ("inspect, wrong passphrase", [inspect, "cat", bundle, "small"], ["ENCFS_PASSPHRASE": wrongPassphrase], wrongPassphrase),
            ("pack, non-hex ENCFS_KEY", [try Tools.pack(), scratch.url("src"), scratch.url("x.encfs")], ["ENCFS_KEY": nonHexKey], nonHexKey),
        ]
        for (name, command, environment, secret) in cases {
            let result = try run(command[0], Array(command.dropFirst()), environment: environment)
            XCTAssertEqual(result.status, 1, "\(name): \(result.summary)")
            XCTAssertTrue(result.errorOutput.contains(": error: "), "\(name): \(result.errorOutput)")
            assertNoSecret(in: result.stdout + result.stderr, "\(name) output", secrets: [secret, keyHex, passphrase])
            XCTAssertFalse(MountTable.isMounted(mnt), name)
        }
        let logBytes = FileManager.default.contents(atPath: log).map { [UInt8]($0) } ?? []
        assertNoSecret(in: logBytes, "the log of failed mounts", secrets: [wrongKey, shortKey, nonHexKey, wrongPassphrase, keyHex, passphrase])
    }

    func testDaemonLog_AfterDamageAndUnmount_HasNoSecret() throws {
        // A damaged chunk and an unmount make the daemon log; with the
        // secrets in its environment at start, none reaches the log.
        let offset = try BundleSurgery.offset(ofChunk: 1, byte: 7, ofFile: "file", in: bundle, keyFile: key)
        try BundleSurgery.flipByte(at: offset, in: bundle)
        let mounted = try mount(bundle, keyArguments: [], environment: ["ENCFS_KEY": keyHex, "ENCFS_PASSPHRASE": passphrase])
        let cat = try run("cat", [mounted.path("file")])
        XCTAssertEqual(cat.status, 1)
        XCTAssertTrue(cat.errorOutput.contains("Input/output error"), cat.errorOutput)
        unmount(mounted)
        let lines = mounted.logLines()
        XCTAssertTrue(lines.contains { $0.contains("chunk 1 of inode ") && $0.contains(" failed authentication") }, "\(lines)")
        XCTAssertTrue(lines.last?.contains("info: unmounted") ?? false, "\(lines)")
        assertNoSecret(in: Array(lines.joined(separator: "\n").utf8), "the daemon log")
    }
}
