import Foundation
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
final class ProcessHardeningTests: MountTestCase {
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
}
