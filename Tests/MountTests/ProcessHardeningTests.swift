import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Every tool turns core dumps off before it reads a secret: RLIMIT_CORE 0
/// and not dumpable. Each tool runs as nobody and is caught blocked on a
/// pipe (reading its key from stdin, or keygen writing its private key to
/// a full stdout); the kernel then shows the files under a non-dumpable
/// process's /proc/PID (not the directory itself) as owned by root instead
/// of by the process's own user.
final class ProcessHardeningTests: ToolTestCase {
    /// Starts `argv` as nobody (stdin a pipe never written to; with
    /// `fullStdout`, stdout a pipe already full), waits until it blocks on
    /// a pipe, and prints the owner of /proc/PID/environ and the core limit.
    /// The pipes are handed to nobody: a pipe belongs to its creator, and
    /// reopening it as /dev/stdin checks that.
    private static let probe = """
    import json, os, subprocess, sys, time
    full_stdout = sys.argv[1] == "full-stdout"
    argv = sys.argv[2:]
    stdin_r, stdin_w = os.pipe()
    os.fchown(stdin_r, 65534, 65534)
    stdout = subprocess.DEVNULL
    if full_stdout:
        r, w = os.pipe()
        os.set_blocking(w, False)
        try:
            while True:
                os.write(w, b"x" * 4096)
        except BlockingIOError:
            pass
        os.set_blocking(w, True)
        stdout = w
    p = subprocess.Popen(argv, stdin=stdin_r, stdout=stdout, stderr=subprocess.PIPE,
                         user=65534, group=65534, extra_groups=[])
    result = {"blocked": False}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/wchan") as f:
                wchan = f.read()
        except OSError:
            wchan = ""
        if "pipe" in wchan:
            result["blocked"] = True
            result["wchan"] = wchan
            result["owner"] = os.stat(f"/proc/{p.pid}/environ").st_uid
            with open(f"/proc/{p.pid}/limits") as f:
                result["core"] = [l for l in f if l.startswith("Max core file size")][0].split()[4:6]
            with open(f"/proc/{p.pid}/comm") as f:
                result["comm"] = f.read().strip()
            break
        time.sleep(0.01)
    p.kill()
    _, err = p.communicate()
    result["exit"] = p.returncode
    result["stderr"] = err.decode(errors="replace")
    print(json.dumps(result))
    """

    private struct Probe: Decodable {
        let blocked: Bool
        let owner: Int?
        let core: [String]?
        let comm: String?
        let exit: Int
        let stderr: String
    }

    private func probe(_ argv: [String], fullStdout: Bool = false, file: StaticString = #filePath, line: UInt = #line) throws {
        let result = try python(Self.probe, [fullStdout ? "full-stdout" : "stdin"] + argv)
        XCTAssertEqual(result.status, 0, result.summary, file: file, line: line)
        let probe = try JSONDecoder().decode(Probe.self, from: Data(result.stdout))
        let name = URL(fileURLWithPath: argv[0]).lastPathComponent
        XCTAssertTrue(probe.blocked, "\(name) never blocked on its pipe: \(probe.stderr)", file: file, line: line)
        XCTAssertEqual(probe.comm, name, file: file, line: line)
        XCTAssertEqual(probe.core, ["0", "0"], "\(name): core file size limit", file: file, line: line)
        XCTAssertEqual(probe.owner, 0, "\(name): /proc/PID/environ owned by its user, so it is dumpable", file: file, line: line)
    }

    /// A bundle, a source tree and a mountpoint nobody can reach.
    private func world() throws -> (bundle: String, key: String, source: String, mountpoint: String) {
        XCTAssertEqual(chmod(scratch.path, 0o755), 0)
        let source = try scratch.makeDirectory("src")
        try scratch.write("src/file", Array("content\n".utf8))
        let key = try makeKeyFile()
        XCTAssertEqual(chmod(key, 0o644), 0)
        let bundle = scratch.url("b.encfs")
        try packOrThrow(source, bundle, keyFile: key)
        let mountpoint = try scratch.makeDirectory("mnt")
        return (bundle, key, source, mountpoint)
    }

    func testPack_CoreDumpsOffBeforeReadingTheKey() throws {
        let w = try world()
        try probe([try Tools.pack(), w.source, scratch.url("out.encfs"), "--key-file", "/dev/stdin"])
    }

    func testInspectCat_CoreDumpsOffBeforeReadingTheKey() throws {
        let w = try world()
        try probe([try Tools.inspect(), "cat", w.bundle, "file", "--key-file", "/dev/stdin"])
    }

    func testInspectRekey_CoreDumpsOffBeforeReadingTheKey() throws {
        let w = try world()
        try probe([try Tools.inspect(), "rekey", w.bundle, "--key-file", "/dev/stdin", "--add-key-file", w.key])
    }

    func testRekey_CoreDumpsOffBeforeReadingTheKey() throws {
        let w = try world()
        try probe([try Tools.rekey(), w.bundle, "--key-file", "/dev/stdin", "--add-key-file", w.key])
    }

    func testKeygen_CoreDumpsOffBeforeWritingThePrivateKey() throws {
        _ = try world()
        try probe([try Tools.keygen()], fullStdout: true)
    }

    func testMount_CoreDumpsOffBeforeReadingTheKey() throws {
        let w = try world()
        addTeardownBlock { MountedBundle.unmount(mountpoint: w.mountpoint, foreground: nil) }
        try probe([try Tools.mount(), w.bundle, w.mountpoint, "--key-file", "/dev/stdin"])
        XCTAssertFalse(MountTable.isMounted(w.mountpoint))
    }

    /// The capabilities a root daemon keeps once it serves (bits of
    /// linux/capability.h): CAP_IPC_LOCK 14, CAP_SYS_PTRACE 19 (only with
    /// an access rule), CAP_SYS_ADMIN 21.
    private static func kept(ptrace: Bool) -> UInt64 { (1 << 14) | (1 << 21) | (ptrace ? 1 << 19 : 0) }

    /// The `Name:\tvalue` fields of /proc/PID/status.
    private func status(of pid: pid_t) throws -> [String: String] {
        let text = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        var fields: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = parts[1].trimmingCharacters(in: .whitespaces) }
        }
        return fields
    }

    /// A root daemon, once mounted, sets NoNewPrivs and keeps only what it
    /// still needs; it still serves (another user's program identified
    /// under --allow-exe), locks memory, and unmounts itself at SIGTERM.
    func testMountAsRoot_DropsPrivilegesOnceServing() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root") }
        let w = try world()
        for ptrace in [false, true] {
            let options = ptrace ? ["--allow-uid", "65534", "--allow-exe", "/bin/cat"] : []
            let mounted = try mount(w.bundle, keyFile: w.key, at: w.mountpoint, options: options)
            let daemon = try XCTUnwrap(mounted.daemonPID)
            let fields = try status(of: daemon)
            XCTAssertEqual(fields["NoNewPrivs"], "1", "\(fields)")
            for set in ["CapEff", "CapPrm", "CapBnd"] {
                XCTAssertEqual(fields[set].flatMap { UInt64($0, radix: 16) }, Self.kept(ptrace: ptrace), "\(set): \(fields[set] ?? "")")
            }
            XCTAssertEqual(fields["CapInh"].flatMap { UInt64($0, radix: 16) }, 0)
            XCTAssertEqual(fields["CapAmb"].flatMap { UInt64($0, radix: 16) }, 0)
            let reader = ptrace ? ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", "/bin/cat"] : ["/bin/cat"]
            XCTAssertEqual(try run(reader[0], Array(reader.dropFirst()) + [mounted.path("file")]).output, "content\n")
            XCTAssertFalse(mounted.logLines().contains { $0.contains("privileges kept") }, "\(mounted.logLines())")
            // Stopped by a signal, the daemon unmounts itself (umount2 needs
            // the CAP_SYS_ADMIN it kept).
            XCTAssertEqual(kill(daemon, SIGTERM), 0)
            XCTAssertTrue(Deadline.poll(seconds: 15) { !MountTable.isMounted(w.mountpoint) }, "still mounted after SIGTERM")
            XCTAssertTrue(Deadline.poll(seconds: 15) { !ProcessTable.isAlive(daemon) })
        }
    }
}
