import Foundation
import XCTest
import SharedTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The access policy (`--allow-uid`, `--allow-gid`, `--allow-exe`,
/// `--allow-cgroup`, `--enforce-reads`) through the real executables: real
/// users (`setpriv`), real programs copied to an allowed and a denied path,
/// real cgroups, a second thread of a real process, and descriptors
/// inherited by real children. Each reader gets the data or EACCES exactly
/// as the rules say, and the daemon's log says who was refused.
final class AccessPolicyTests: ToolTestCase {
    /// The user the readers run as.
    static let otherUID = 65534
    static let asOtherUser = ["--reuid=\(otherUID)", "--regid=\(otherUID)", "--clear-groups", "--"]
    /// A name that must not appear in the log without `--log-names`.
    static let secretName = "quarterly-secret.txt"

    private var bundle = ""
    private var key = ""
    private var contents: [UInt8] = []
    private var allowedCat = ""
    private var deniedCat = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        guard getuid() == 0 else { throw XCTSkip("needs root to run readers as other users and make cgroups") }
        // mkdtemp made the scratch directory 0700: let the other user reach
        // the mountpoints and the copied programs.
        XCTAssertEqual(chmod(scratch.path, 0o755), 0)
        var generator = SeededGenerator(seed: 11)
        contents = (0..<300_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let source = try scratch.makeDirectory("src")
        try scratch.makeDirectory("src/dir")
        try scratch.write("src/dir/\(Self.secretName)", contents)
        try scratch.write("src/small", Array("small file\n".utf8))
        XCTAssertEqual(chmod("\(source)/dir", 0o755), 0)
        key = try makeKeyFile()
        bundle = scratch.url("policy.encfs")
        try packOrThrow(source, bundle, keyFile: key)
        // One program at two paths: only the path tells them apart.
        let programs = try scratch.makeDirectory("bin")
        XCTAssertEqual(chmod(programs, 0o755), 0)
        allowedCat = "\(programs)/cat-allowed"
        deniedCat = "\(programs)/cat-denied"
        for copy in [allowedCat, deniedCat] {
            try FileManager.default.copyItem(atPath: "/bin/cat", toPath: copy)
            XCTAssertEqual(chmod(copy, 0o755), 0)
        }
    }

    /// `cat` of `path` as the other user (or as root) with `program`.
    private func read(_ path: String, with program: String, asOtherUser: Bool = true) throws -> ProcessResult {
        asOtherUser ? try run("setpriv", Self.asOtherUser + [program, path]) : try run(program, [path])
    }

    private func assertReads(_ result: ProcessResult, _ expected: [UInt8], _ what: String,
                             file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(result.status, 0, "\(what): \(result.summary)", file: file, line: line)
        XCTAssertTrue(result.stdout == expected, "\(what): wrong contents (\(result.stdout.count) bytes)", file: file, line: line)
    }

    private func assertDenied(_ result: ProcessResult, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertNotEqual(result.status, 0, "\(what) was not refused", file: file, line: line)
        XCTAssertTrue(result.errorOutput.contains("Permission denied"), "\(what): \(result.summary)", file: file, line: line)
        XCTAssertTrue(result.stdout.isEmpty, "\(what) printed data", file: file, line: line)
    }

    /// The "access denied" lines of the mount's log.
    private func denials(_ mounted: MountedBundle) -> [String] {
        mounted.logLines().filter { $0.contains("access denied") }
    }

    // MARK: - uid and executable

    func testUserAndExecutable_OnlyTheAllowedProgramRunByTheAllowedUserReads() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--allow-uid", "\(Self.otherUID)", "--allow-exe", allowedCat])
        let file = mounted.path("dir/\(Self.secretName)")

        // Another user's uid implies allow_other: without it the kernel
        // would refuse the other user before the daemon is asked.
        let entry = try XCTUnwrap(MountTable.entry(at: mounted.mountpoint))
        XCTAssertTrue(entry.superOptions.contains("allow_other") || entry.mountOptions.contains("allow_other"),
                      "\(entry.mountOptions) \(entry.superOptions)")

        // Allowed, denied, allowed, denied: a denied program right after an
        // allowed one (entries and pages cached by then) is still refused.
        assertReads(try read(file, with: allowedCat), contents, "allowed program, allowed user")
        assertDenied(try read(file, with: deniedCat), "denied program, allowed user")
        assertReads(try read(file, with: allowedCat), contents, "allowed program again")
        assertDenied(try read(file, with: deniedCat), "denied program again, right after an allowed read")
        assertDenied(try read(file, with: allowedCat, asOtherUser: false), "allowed program, root (not an allowed uid)")
        // opendir is checked too: ls is not an allowed program.
        assertDenied(try run("setpriv", Self.asOtherUser + ["ls", mounted.path("dir")]), "ls of a directory")
        // Listing and stat are not decisions: the name is there, its
        // contents are not.
        XCTAssertEqual(try check("stat", ["-c", "%s", file]).output, "\(contents.count)\n")

        // One line per (program, uid) in a minute: the denied program was
        // refused twice as the other user, logged once.
        let lines = denials(mounted)
        let deniedAsOther = lines.filter { $0.contains("exe \(deniedCat),") && $0.contains("uid \(Self.otherUID),") }
        XCTAssertEqual(deniedAsOther.count, 1, "\(lines)")
        XCTAssertEqual(lines.filter { $0.contains("exe \(allowedCat),") && $0.contains("uid 0,") }.count, 1, "\(lines)")
        XCTAssertEqual(lines.filter { $0.contains("exe /usr/bin/ls,") && $0.contains("opendir of inode") }.count, 1, "\(lines)")
        XCTAssertEqual(lines.count, 3, "\(lines)")
        for line in lines {
            XCTAssertTrue(line.contains("returning EACCES") && line.contains(" pid "), line)
            // Without --log-names a line gives the inode, never the name.
            XCTAssertFalse(line.contains(Self.secretName), line)
        }
        unmount(mounted)
    }

    func testGroupRule_MatchesTheCallersGroupAndNamesEntriesWithLogNames() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--allow-gid", "\(Self.otherUID),4242", "--log-names"])
        let file = mounted.path("dir/\(Self.secretName)")
        assertReads(try read(file, with: deniedCat), contents, "allowed group (any program)")
        // Same uid, another group.
        let otherGroup = try run("setpriv", ["--reuid=\(Self.otherUID)", "--regid=100", "--clear-groups", "--", allowedCat, file])
        assertDenied(otherGroup, "uid of the allowed group's reader, but group 100")
        let lines = denials(mounted)
        XCTAssertEqual(lines.count, 1, "\(lines)")
        XCTAssertTrue(lines.first?.contains("gid 100,") ?? false, "\(lines)")
        XCTAssertTrue(lines.first?.hasSuffix("(dir/\(Self.secretName))") ?? false, "--log-names names the entry: \(lines)")
        unmount(mounted)
    }

    // MARK: - cgroups

    func testCgroupRule_ReadersInsideTheAllowedGroupOrBelowRead() throws {
        guard ScratchCgroup.hierarchyRoot != nil else { throw XCTSkip("no cgroup v2 hierarchy on this machine") }
        let tag = "encfs-test-\(getpid())"
        let allowed: ScratchCgroup
        do { allowed = try ScratchCgroup("\(tag)-allowed") } catch {
            // A container may mount the hierarchy read-only.
            throw XCTSkip("cannot create a cgroup here: \(error)")
        }
        addTeardownBlock { allowed.remove() }
        let below = try allowed.makeChild("worker")
        let denied = try ScratchCgroup("\(tag)-denied")
        addTeardownBlock { denied.remove() }
        // A sibling whose name starts like the allowed one's is not below it.
        let lookalike = try ScratchCgroup("\(tag)-allowed2")
        addTeardownBlock { lookalike.remove() }

        let mounted = try mount(bundle, keyFile: key, options: ["--allow-cgroup", allowed.path])
        let file = mounted.path("dir/\(Self.secretName)")
        // The reader moves itself into the group, then becomes cat.
        func readIn(_ group: String) throws -> ProcessResult {
            try sh("echo $$ > \"$1/cgroup.procs\" && exec \"$2\" \"$3\"", [ScratchCgroup.directory(of: group), allowedCat, file])
        }
        assertReads(try readIn(allowed.path), contents, "reader in the allowed cgroup")
        assertReads(try readIn(below), contents, "reader in a cgroup below the allowed one")
        assertDenied(try readIn(denied.path), "reader in another cgroup")
        assertDenied(try readIn(lookalike.path), "reader in a cgroup whose name extends the allowed one's")
        assertDenied(try read(file, with: allowedCat, asOtherUser: false), "reader left in the test's own cgroup")
        unmount(mounted)
    }

    // MARK: - threads

    /// The kernel names the calling thread; a second thread of an allowed
    /// process is mapped to that process and allowed too.
    func testSecondThreadOfAnAllowedProcess_Reads() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--allow-exe", try pythonExecutable()])
        let script = """
        import os, sys, threading
        out = {}
        def reader():
            out["tid"] = threading.get_native_id()
            with open(sys.argv[1], "rb") as f, open(sys.argv[2], "rb") as g:
                out["same"] = f.read() == g.read()
        t = threading.Thread(target=reader)
        t.start()
        t.join()
        print(out.get("same"), out["tid"] != os.getpid())
        """
        let result = try python(script, [mounted.path("dir/\(Self.secretName)"), scratch.url("src/dir/\(Self.secretName)")])
        assertSuccess(result)
        XCTAssertEqual(result.output, "True True\n")
        // And the rule is live on this mount: another program is refused.
        assertDenied(try read(mounted.path("small"), with: allowedCat, asOtherUser: false), "cat under a python-only rule")
        unmount(mounted)
    }

    /// The python the tests run, symlinks resolved (as /proc/PID/exe shows it).
    private func pythonExecutable() throws -> String {
        guard let path = realpath(Tools.python, nil) else { throw SubprocessError("cannot resolve \(Tools.python)") }
        defer { free(path) }
        return String(cString: path)
    }

    // MARK: - --enforce-reads

    /// A python parent (allowed) opens the file and starts the denied cat
    /// with the open file as its stdin.
    static let inheritScript = """
    import subprocess, sys
    with open(sys.argv[1], "rb") as f:
        head = f.read(11)
        f.seek(0)
        child = subprocess.run([sys.argv[2]], stdin=f, capture_output=True)
        tail = f.read()
    sys.stdout.write("parent %d %d\\n" % (len(head), len(tail)))
    sys.stdout.write("child %d %d %s\\n" % (child.returncode, len(child.stdout), b"Permission denied" in child.stderr))
    """

    func testEnforceReads_InheritedDescriptorIsRefusedOnRead() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--allow-exe", try pythonExecutable(), "--enforce-reads"])
        let result = try python(Self.inheritScript, [mounted.path("small"), deniedCat])
        assertSuccess(result)
        // The parent keeps reading through the same descriptor; the child
        // that inherited it reads nothing.
        XCTAssertEqual(result.output, "parent 11 11\nchild 1 0 True\n")
        let lines = denials(mounted)
        XCTAssertEqual(lines.count, 1, "\(lines)")
        XCTAssertTrue(lines.first?.contains("read of inode") ?? false, "\(lines)")

        // Direct I/O: the kernel refuses a shared mapping (ENODEV) rather
        // than serve it from a page cache the daemon never sees.
        let mapping = try python("""
        import mmap, sys
        with open(sys.argv[1], "rb") as f:
            try:
                mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED, mmap.PROT_READ)
                print("mapped")
            except OSError as e:
                print("errno", e.errno)
        """, [mounted.path("small")])
        XCTAssertEqual(mapping.output, "errno \(ENODEV)\n", mapping.summary)
        unmount(mounted)
    }

    /// A process faulting in a private mapping is killed while its read
    /// waits for the daemon. With asynchronous reads the kernel still sends
    /// the read-ahead after the process is gone, on behalf of a pid that
    /// an allowed program could have by then; with --enforce-reads reads
    /// are synchronous, so the read dies with the process (or, once the
    /// daemon has it, the process waits for the answer). The daemon is
    /// stopped meanwhile so that the kill comes first; the connection's
    /// `waiting` count (fusectl, mounted in a mount namespace of the
    /// driver's own) says when the request was queued and when it was
    /// answered. A read answered for a process that no longer exists is
    /// refused and logged: no such line may appear.
    static let faultScript = """
    import ctypes, os, signal, subprocess, sys, time
    daemon, path, connection = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    go_r, go_w = os.pipe()
    ready_r, ready_w = os.pipe()
    child = os.fork()
    if child == 0:
        import mmap
        f = open(path, "rb")
        m = mmap.mmap(f.fileno(), 0, mmap.MAP_PRIVATE, mmap.PROT_READ)
        os.write(ready_w, b"1")
        os.read(go_r, 1)
        m[0]
        os._exit(0)
    os.read(ready_r, 1)
    # fusectl in a mount namespace of this process only (after the child
    # opened the file: the daemon refuses callers in other namespaces).
    assert ctypes.CDLL(None, use_errno=True).unshare(0x00020000) == 0
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)
    if subprocess.run(["mount", "-t", "fusectl", "none", "/sys/fs/fuse/connections"]).returncode != 0:
        os.kill(child, signal.SIGKILL)
        print("no fusectl")
        sys.exit(0)
    waiting = f"/sys/fs/fuse/connections/{connection}/waiting"
    def poll(condition, what):
        deadline = time.monotonic() + 20
        while not condition():
            if time.monotonic() > deadline:
                sys.exit("timed out waiting for " + what)
            time.sleep(0.005)
    def stopped():
        states = []
        for tid in os.listdir(f"/proc/{daemon}/task"):
            with open(f"/proc/{daemon}/task/{tid}/stat") as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        return all(s in "tT" for s in states)
    os.kill(daemon, signal.SIGSTOP)
    try:
        poll(stopped, "the daemon to stop")
        os.write(go_w, b"1")
        poll(lambda: int(open(waiting).read()) >= 1, "the fault's read to be queued")
        os.kill(child, signal.SIGKILL)
    finally:
        os.kill(daemon, signal.SIGCONT)
    _, status = os.waitpid(child, 0)
    poll(lambda: int(open(waiting).read()) == 0, "every request to be answered")
    print("killed" if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL else "status %d" % status)
    """

    func testEnforceReads_FaultOfAKilledProcessIsNotAnsweredAfterIt() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--allow-exe", try pythonExecutable(), "--enforce-reads"])
        let daemon = try XCTUnwrap(mounted.daemonPID)
        var st = stat()
        XCTAssertEqual(stat(mounted.mountpoint, &st), 0)
        // fusectl names a connection by the kernel's device number, for
        // FUSE's major 0 the minor of the user-space dev_t.
        let device = UInt64(st.st_dev)
        let connection = (device & 0xFF) | ((device >> 12) & 0xFFFF_FF00)
        let result = try python(Self.faultScript, ["\(daemon)", mounted.path("dir/\(Self.secretName)"), "\(connection)"])
        if result.output == "no fusectl\n" { throw XCTSkip("cannot mount fusectl here: \(result.summary)") }
        XCTAssertEqual(result.output, "killed\n", result.summary)
        XCTAssertEqual(denials(mounted), [], "a read was answered for a process already gone")
        unmount(mounted)
    }

    /// Without `--enforce-reads` the same child reads: the gap
    /// docs/SECURITY.md documents.
    func testWithoutEnforceReads_InheritedDescriptorReads() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--allow-exe", try pythonExecutable()])
        let result = try python(Self.inheritScript, [mounted.path("small"), deniedCat])
        assertSuccess(result)
        XCTAssertEqual(result.output, "parent 11 0\nchild 0 11 False\n")
        XCTAssertEqual(denials(mounted), [])
        // Opening it itself is still refused.
        assertDenied(try read(mounted.path("small"), with: deniedCat, asOtherUser: false), "denied program opening")
        unmount(mounted)
    }

    // MARK: - The executable's identity

    /// Skips unless an unprivileged user may create a user namespace here.
    private func requireUnprivilegedUserNamespaces() throws {
        func setting(_ path: String) -> String? {
            (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        if setting("/proc/sys/kernel/unprivileged_userns_clone") == "0" {
            throw XCTSkip("unprivileged user namespaces are off (kernel.unprivileged_userns_clone = 0)")
        }
        if setting("/proc/sys/user/max_user_namespaces") == "0" {
            throw XCTSkip("unprivileged user namespaces are off (user.max_user_namespaces = 0)")
        }
        let probe = try run("setpriv", Self.asOtherUser + ["unshare", "-Urm", "true"])
        if probe.status != 0 {
            throw XCTSkip("unprivileged user namespaces are off here (unshare -Urm as uid \(Self.otherUID): \(probe.summary))")
        }
    }

    /// In a user and mount namespace of its own, an allowed user
    /// bind-mounts another program over the allowed path and runs it: the
    /// path /proc/PID/exe shows is the allowed one, the file is not. Refused,
    /// with and without --enforce-reads; so is the genuine program run from
    /// such a namespace (there it could also forge /proc/PID/exe with
    /// PR_SET_MM_MAP). The genuine program in the daemon's namespaces reads.
    func testOwnUserAndMountNamespace_BindMountedProgramIsRefused() throws {
        try requireUnprivilegedUserNamespaces()
        for extra in [[], ["--enforce-reads"]] {
            let mounted = try mount(bundle, keyFile: key, options: ["--allow-uid", "\(Self.otherUID)", "--allow-exe", allowedCat] + extra)
            let file = mounted.path("dir/\(Self.secretName)")
            assertReads(try read(file, with: allowedCat), contents, "genuine allowed program \(extra)")
            let bound = try run("setpriv", Self.asOtherUser + ["unshare", "-Urm", "/bin/sh", "-c",
                                                               "mount --bind \"$1\" \"$2\" && exec \"$2\" \"$3\"",
                                                               "sh", deniedCat, allowedCat, file])
            assertDenied(bound, "another program bind-mounted over the allowed path \(extra)")
            let genuine = try run("setpriv", Self.asOtherUser + ["unshare", "-Urm", allowedCat, file])
            assertDenied(genuine, "the allowed program in a user namespace of its own \(extra)")
            assertReads(try read(file, with: allowedCat), contents, "genuine allowed program afterwards \(extra)")
            let lines = denials(mounted)
            XCTAssertTrue(lines.contains { $0.contains("exe \(allowedCat) (in another user or mount namespace),") }, "\(lines)")
            unmount(mounted)
        }
    }

    /// A program put at the allowed path after the mount (a new inode: an
    /// upgrade, or whoever can write the directory) matches nothing until
    /// the next mount; the daemon recorded the file, not only its path.
    func testAllowedProgramReplacedAfterTheMount_IsRefused() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--allow-exe", allowedCat])
        let file = mounted.path("small")
        assertReads(try read(file, with: allowedCat, asOtherUser: false), Array("small file\n".utf8), "before the replacement")
        let replacement = scratch.url("bin/cat-replacement")
        try FileManager.default.copyItem(atPath: "/bin/cat", toPath: replacement)
        XCTAssertEqual(chmod(replacement, 0o755), 0)
        XCTAssertEqual(rename(replacement, allowedCat), 0)
        assertDenied(try read(file, with: allowedCat, asOtherUser: false), "the program now at the allowed path")
        unmount(mounted)
    }

    /// An allowed program in a directory other users may write: a warning
    /// names the directory (whoever can put a program there before a mount
    /// can have it allowed).
    func testAllowedProgramInADirectoryOthersMayWrite_Warns() throws {
        let open = try scratch.makeDirectory("open-bin")
        XCTAssertEqual(chmod(open, 0o777), 0)
        let program = "\(open)/cat"
        try FileManager.default.copyItem(atPath: "/bin/cat", toPath: program)
        XCTAssertEqual(chmod(program, 0o755), 0)
        let mountpoint = try scratch.makeDirectory("mnt-open")
        addTeardownBlock { MountedBundle.unmount(mountpoint: mountpoint, foreground: nil) }
        let result = try run(try Tools.mount(), [bundle, mountpoint, "--key-file", key, "--allow-exe", program])
        assertSuccess(result)
        XCTAssertTrue(result.errorOutput.contains("warning: --allow-exe program can be changed by users other than root: "
                                                  + "a directory on its path (\(open)) is writable by them"), result.summary)
        // The copies beside the test's other programs draw no warning.
        XCTAssertEqual(MountedBundle.unmount(mountpoint: mountpoint, foreground: nil), [])
        let quiet = try run(try Tools.mount(), [bundle, mountpoint, "--key-file", key, "--allow-exe", allowedCat])
        assertSuccess(quiet)
        XCTAssertFalse(quiet.errorOutput.contains("warning"), quiet.summary)
        XCTAssertEqual(MountedBundle.unmount(mountpoint: mountpoint, foreground: nil), [])
    }

    // MARK: - The denial log's bounds

    /// Refused callers choose what the rate limit is keyed on: a program's
    /// path (any name for a link or copy of it) and, with subordinate ids,
    /// their uid. 300 names of one program as one uid, one of them about
    /// 3,000 bytes long, give at most ten lines and one that says the rest
    /// are not logged, each short; another uid is still logged.
    func testManyNamesOfADeniedProgram_LogABoundedNumberOfShortLines() throws {
        let mounted = try mount(bundle, keyFile: key, options: ["--allow-exe", allowedCat, "-o", "allow_other"])
        let names = try scratch.makeDirectory("names")
        var links: [String] = []
        for i in 0..<300 {
            links.append("\(names)/reader-\(i)")
            XCTAssertEqual(link(deniedCat, links[i]), 0)
        }
        var deep = names
        for i in 0..<14 { deep += "/" + String(repeating: Character(UnicodeScalar(UInt8(ascii: "a") + UInt8(i))), count: 200) }
        try FileManager.default.createDirectory(atPath: deep, withIntermediateDirectories: true)
        let longName = "\(deep)/reader-long"
        XCTAssertEqual(link(deniedCat, longName), 0)
        let file = mounted.path("small")
        let flood = try sh("f=$1; shift; for p in \"$@\"; do \"$p\" \"$f\" 2>/dev/null; done; exit 0", [file, longName] + links)
        assertSuccess(flood)
        assertDenied(try read(file, with: deniedCat), "another uid after the flood")
        let lines = denials(mounted)
        let asRoot = lines.filter { $0.contains("uid 0") }
        XCTAssertEqual(asRoot.count, 11, "\(asRoot.count) lines for uid 0: \(asRoot.prefix(3))")
        XCTAssertTrue(asRoot.last?.contains("no more of its denials logged") ?? false, "\(asRoot.last ?? "")")
        XCTAssertTrue(lines.contains { $0.contains("uid \(Self.otherUID),") && $0.contains("exe \(deniedCat),") }, "\(lines.suffix(2))")
        for line in lines { XCTAssertLessThan(line.utf8.count, 600, line) }
        XCTAssertTrue(asRoot.first?.contains("exe ...") ?? false, "the long path is cut: \(asRoot.first ?? "")")
        unmount(mounted)
    }

    // MARK: - Callers outside the daemon's pid namespace

    /// A daemon started in its own pid namespace sees callers from outside
    /// it as pid 0: with an executable rule they are refused.
    func testCallerOutsideThePidNamespace_IsRefusedByAnExecutableRule() throws {
        let mountpoint = try scratch.makeDirectory("mnt-pidns")
        let log = scratch.url("pidns.log")
        let daemon = try SpawnedProcess("unshare", ["--pid", "--fork", "--", try Tools.mount(), bundle, mountpoint,
                                                    "--key-file", key, "--allow-exe", allowedCat, "--log-file", log, "-f"])
        addTeardownBlock { MountedBundle.unmount(mountpoint: mountpoint, foreground: daemon) }
        guard Deadline.poll(seconds: 15, { MountTable.isMounted(mountpoint) && MountTable.isServing(mountpoint) }) else {
            throw SubprocessError("the daemon in its own pid namespace did not serve")
        }
        assertDenied(try read("\(mountpoint)/small", with: allowedCat, asOtherUser: false), "allowed program, pid 0")
        let lines = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").filter {
            $0.contains("access denied")
        }
        XCTAssertEqual(lines.count, 1, "\(lines)")
        XCTAssertTrue(lines.first?.contains(" pid 0, exe unknown,") ?? false, "\(lines)")
        XCTAssertEqual(MountedBundle.unmount(mountpoint: mountpoint, foreground: daemon), [])
    }

    // MARK: - Options

    func testOtherUsersUID_WithoutUserAllowOther_FailsClearlyForNonRoot() throws {
        let configuration = (try? String(contentsOfFile: "/etc/fuse.conf", encoding: .utf8)) ?? ""
        if configuration.split(separator: "\n").contains(where: { $0.trimmingCharacters(in: .whitespaces) == "user_allow_other" }) {
            throw XCTSkip("/etc/fuse.conf has user_allow_other")
        }
        let mountpoint = try scratch.makeDirectory("mnt-user")
        XCTAssertEqual(chown(mountpoint, uid_t(Self.otherUID), gid_t(Self.otherUID)), 0)
        let result = try run("setpriv", Self.asOtherUser + [try Tools.mount(), bundle, mountpoint, "--key-file", key,
                                                             "--allow-uid", "0"])
        XCTAssertEqual(result.status, 1, result.summary)
        XCTAssertEqual(result.errorLines, [
            "encfs-mount: error: --allow-uid lets other users in, which needs the allow_other mount option; "
                + "only root may use it unless /etc/fuse.conf has a line user_allow_other",
            "hint: add user_allow_other to /etc/fuse.conf (as root), or mount as root",
        ])
        XCTAssertFalse(MountTable.isMounted(mountpoint))
    }

    func testHelp_DescribesEveryAccessOption() throws {
        let help = try check(try Tools.mount(), ["--help"]).output
        for option in ["--allow-uid UID", "--allow-gid GID", "--allow-exe PATH", "--allow-cgroup PATH", "--enforce-reads"] {
            XCTAssertTrue(help.contains("\n  \(option)"), "\(option) missing from --help")
        }
    }

    func testBadAccessOptions_AreUsageErrors() throws {
        try assertMountOptionRejected("--allow-uid", values: ["www-data", "1,,2", "-1", "4294967295", ""],
                                      message: "--allow-uid must list numeric user ids")
        try assertMountOptionRejected("--allow-gid", values: ["x"], message: "--allow-gid must list numeric group ids")
        try assertMountOptionRejected("--allow-cgroup", values: ["system.slice"], message: "--allow-cgroup must be an absolute cgroup path")
        let result = try run(try Tools.mount(), [bundle, try scratch.makeDirectory("mnt-bad"), "--key-file", key, "--enforce-reads"])
        XCTAssertEqual(result.status, 2, result.summary)
        XCTAssertTrue(result.errorOutput.contains("--enforce-reads needs a rule"), result.summary)
        let missing = try run(try Tools.mount(), [bundle, try scratch.makeDirectory("mnt-bad2"), "--key-file", key,
                                                  "--allow-exe", scratch.url("no-such-program")])
        XCTAssertEqual(missing.status, 1, missing.summary)
        XCTAssertTrue(missing.errorOutput.contains("cannot resolve --allow-exe path"), missing.summary)
    }
}
