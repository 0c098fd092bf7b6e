import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Nothing changes a mounted bundle: every mutating system call fails with
/// the errno the kernel gives for a read-only mount, and the mount table
/// says `ro`.
final class ReadOnlyTests: ToolTestCase {
    /// argv: mountpoint. Tries each operation and prints `name ERRNO` (or
    /// `name OK`). Operations target `file`, `dir`, `empty-dir`, `link`.
    static let mutations = #"""
import errno, mmap, os, sys
m = sys.argv[1]
P = lambda name: os.path.join(m, name)
def openclose(path, flags, mode=0o644):
    os.close(os.open(path, flags, mode))
def mmap_shared_write():
    fd = os.open(P("file"), os.O_RDONLY)
    try:
        mmap.mmap(fd, 4096, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
ops = [
    ("open O_WRONLY", lambda: openclose(P("file"), os.O_WRONLY)),
    ("open O_RDWR", lambda: openclose(P("file"), os.O_RDWR)),
    ("open O_WRONLY|O_APPEND", lambda: openclose(P("file"), os.O_WRONLY | os.O_APPEND)),
    ("open O_RDONLY|O_TRUNC", lambda: openclose(P("file"), os.O_RDONLY | os.O_TRUNC)),
    ("open O_CREAT new", lambda: openclose(P("new-file"), os.O_WRONLY | os.O_CREAT)),
    ("open O_CREAT|O_RDONLY new", lambda: openclose(P("new-file"), os.O_RDONLY | os.O_CREAT)),
    ("open O_CREAT|O_EXCL new", lambda: openclose(P("new-file"), os.O_WRONLY | os.O_CREAT | os.O_EXCL)),
    ("open O_TMPFILE", lambda: openclose(P("dir"), os.O_WRONLY | os.O_TMPFILE)),
    ("truncate", lambda: os.truncate(P("file"), 0)),
    ("truncate grow", lambda: os.truncate(P("file"), 1 << 20)),
    ("rename", lambda: os.rename(P("file"), P("renamed"))),
    ("rename over existing", lambda: os.rename(P("file"), P("dir/inner"))),
    ("rename dir", lambda: os.rename(P("empty-dir"), P("moved-dir"))),
    ("mkdir", lambda: os.mkdir(P("new-dir"))),
    ("rmdir", lambda: os.rmdir(P("empty-dir"))),
    ("unlink", lambda: os.unlink(P("file"))),
    ("unlink symlink", lambda: os.unlink(P("link"))),
    ("symlink", lambda: os.symlink("file", P("new-link"))),
    ("link", lambda: os.link(P("file"), P("hard-link"))),
    ("mknod fifo", lambda: os.mkfifo(P("fifo"))),
    ("mknod regular", lambda: os.mknod(P("node"))),
    ("chmod", lambda: os.chmod(P("file"), 0o777)),
    ("chmod dir", lambda: os.chmod(P("dir"), 0o700)),
    ("chown", lambda: os.chown(P("file"), 1, 1)),
    ("lchown symlink", lambda: os.lchown(P("link"), 1, 1)),
    ("utime", lambda: os.utime(P("file"), (1, 1))),
    ("utime now", lambda: os.utime(P("file"))),
    ("utime symlink", lambda: os.utime(P("link"), (1, 1), follow_symlinks=False)),
    ("setxattr", lambda: os.setxattr(P("file"), "user.test", b"1")),
    ("removexattr", lambda: os.removexattr(P("file"), "user.test")),
    ("mmap MAP_SHARED|PROT_WRITE", mmap_shared_write),
]
for name, op in ops:
    try:
        op()
        print(name, "OK")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, str(e.errno)))
"""#

    /// What the kernel answers on a read-only mount. mmap of a read-only
    /// descriptor for shared writing is EACCES (a descriptor check, before
    /// any file system is asked); O_TMPFILE and O_EXCL on a new name are
    /// EROFS like every other creation.
    static let expected: [String: String] = [
        "open O_WRONLY": "EROFS", "open O_RDWR": "EROFS", "open O_WRONLY|O_APPEND": "EROFS",
        "open O_RDONLY|O_TRUNC": "EROFS", "open O_CREAT new": "EROFS", "open O_CREAT|O_RDONLY new": "EROFS",
        "open O_CREAT|O_EXCL new": "EROFS", "open O_TMPFILE": "EROFS", "truncate": "EROFS", "truncate grow": "EROFS",
        "rename": "EROFS", "rename over existing": "EROFS", "rename dir": "EROFS", "mkdir": "EROFS", "rmdir": "EROFS",
        "unlink": "EROFS", "unlink symlink": "EROFS", "symlink": "EROFS", "link": "EROFS", "mknod fifo": "EROFS",
        "mknod regular": "EROFS", "chmod": "EROFS", "chmod dir": "EROFS", "chown": "EROFS", "lchown symlink": "EROFS",
        "utime": "EROFS", "utime now": "EROFS", "utime symlink": "EROFS", "setxattr": "EROFS", "removexattr": "EROFS",
        "mmap MAP_SHARED|PROT_WRITE": "EACCES",
    ]

    private var source = ""
    private var mounted: MountedBundle?

    override func setUpWithError() throws {
        try super.setUpWithError()
        source = try scratch.makeDirectory("src")
        try scratch.makeDirectory("src/dir")
        try scratch.makeDirectory("src/empty-dir")
        try scratch.write("src/file", Array(repeating: 0x61, count: 100_000))
        try scratch.write("src/dir/inner", Array("inner\n".utf8))
        try scratch.write("src/private", Array("private\n".utf8), mode: 0o600)
        try check("ln", ["-s", "file", "\(source)/link"])
        let key = try makeKeyFile()
        let bundle = scratch.url("ro.encfs")
        try packOrThrow(source, bundle, keyFile: key)
        mounted = try mount(bundle, keyFile: key, options: ["-o", "allow_other"])
    }

    private var mnt: String {
        guard let mounted else { preconditionFailure("internal error: setUp did not mount") }
        return mounted.mountpoint
    }

    private func parse(_ output: String) -> [String: String] {
        var table: [String: String] = [:]
        for line in output.split(separator: "\n") {
            guard let space = line.lastIndex(of: " ") else { continue }
            table[String(line[..<space])] = String(line[line.index(after: space)...])
        }
        return table
    }

    func testMutations_FailWithExactErrno() throws {
        let result = try python(Self.mutations, [mnt])
        assertSuccess(result)
        let actual = parse(result.output)
        XCTAssertEqual(Set(actual.keys), Set(Self.expected.keys))
        for (operation, errno) in Self.expected.sorted(by: { $0.key < $1.key }) {
            XCTAssertEqual(actual[operation], errno, operation)
        }
        // Nothing changed.
        let diff = try run("diff", ["-r", "--no-dereference", source, mnt])
        XCTAssertEqual(diff.status, 0, diff.output)
    }

    func testMutations_AsOtherUserFailTheSameWay() throws {
        // A user other than the mounting one (the mount has allow_other):
        // read-only still wins over permission bits for writes; reads obey
        // the stored mode bits (default_permissions).
        guard getuid() == 0 else { throw XCTSkip("needs root to switch users") }
        // mkdtemp made the scratch directory 0700; let the other user reach the mountpoint.
        XCTAssertEqual(chmod(scratch.path, 0o755), 0)
        let nobody = ["--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        let result = try run("setpriv", nobody + [Tools.python, "-c", Self.mutations, mnt])
        assertSuccess(result)
        let actual = parse(result.output)
        for (operation, errno) in Self.expected.sorted(by: { $0.key < $1.key }) {
            // The kernel checks the read-only flag before permission bits,
            // so even operations this user could never do are EROFS.
            XCTAssertEqual(actual[operation], errno, operation)
        }
        let readable = try run("setpriv", nobody + ["cat", "\(mnt)/file"])
        XCTAssertEqual(readable.status, 0, readable.summary)
        XCTAssertEqual(readable.stdout.count, 100_000)
        let denied = try run("setpriv", nobody + ["cat", "\(mnt)/private"])
        XCTAssertEqual(denied.status, 1)
        XCTAssertTrue(denied.errorOutput.contains("Permission denied"), denied.errorOutput)
    }

    func testMountTable_ShowsReadOnly() throws {
        let entry = try XCTUnwrap(MountTable.entry(at: mnt))
        XCTAssertEqual(entry.type, "fuse.encfs")
        XCTAssertTrue(entry.mountOptions.contains("ro"), "\(entry.mountOptions)")
        XCTAssertTrue(entry.superOptions.contains("ro"), "\(entry.superOptions)")
        XCTAssertTrue(entry.mountOptions.contains("nosuid"), "\(entry.mountOptions)")
        XCTAssertTrue(entry.mountOptions.contains("nodev"), "\(entry.mountOptions)")
        XCTAssertTrue(entry.source.hasPrefix("encfs:"), entry.source)
        // The mount(8) view agrees.
        let mountOutput = try check("mount", [])
        let line = mountOutput.output.split(separator: "\n").first { $0.contains(" on \(mnt) type fuse.encfs ") }
        XCTAssertNotNil(line, mountOutput.output)
        XCTAssertTrue(line?.contains("(ro,") ?? false, String(line ?? ""))
        // statvfs reports ST_RDONLY.
        let flags = try python("import os, sys; print(os.statvfs(sys.argv[1]).f_flag & os.ST_RDONLY)", [mnt])
        XCTAssertEqual(flags.output, "1\n")
    }

    func testOpen_ExistingFileWithOCreatReadOnlySucceeds() throws {
        // O_CREAT on an existing name creates nothing, so a read-only mount
        // allows it (as ext4 mounted ro does).
        let result = try python("""
        import os, sys
        fd = os.open(sys.argv[1], os.O_RDONLY | os.O_CREAT, 0o644)
        print(len(os.read(fd, 200000)))
        """, ["\(mnt)/file"])
        assertSuccess(result)
        XCTAssertEqual(result.output, "100000\n")
    }
}
