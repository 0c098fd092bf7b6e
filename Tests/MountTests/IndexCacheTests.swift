import SharedTestSupport
import XCTest

/// `encfs-mount --index-cache`: the daemon keeps the index sealed and
/// decrypts pages into a bounded cache. With the smallest cache (64 KiB,
/// 4 pages) and an index of dozens of pages, every name, attribute, symlink
/// and file must read as in the source, also after the kernel forgot its
/// own caches; and an index changed under a running mount must give EIO,
/// never other names or data.
final class IndexCacheTests: ToolTestCase {
    /// 40 directories × 80 files with names up to 150 bytes, each file
    /// holding its own path, plus a symlink per directory: about 3,300
    /// entries, an index of about 30 pages. The links' long targets climb
    /// out of the bundle, so the mounts allow that explicitly.
    static let tree = #"""
    import os, random, sys
    root = sys.argv[1]
    rng = random.Random(7)
    for d in range(40):
        dir = os.path.join(root, "dir%02d" % d)
        os.mkdir(dir)
        for f in range(80):
            name = "f%02d-" % f + "n" * rng.randrange(1, 150)
            with open(os.path.join(dir, name), "w") as out:
                out.write("dir%02d/%s\n" % (d, name))
        os.symlink("../" * 300 + "x", os.path.join(dir, "zz-link"))
    """#

    /// Walks MOUNT against SOURCE: every listing, lstat (kind, mode, size
    /// but for directories),
    /// symlink target and file content. Prints "ok N" or the differences;
    /// with "--tolerate-eio", EIO is counted instead ("eio N wrong M").
    static let walk = #"""
    import errno, os, stat, sys
    src, mnt = sys.argv[1], sys.argv[2]
    tolerate = len(sys.argv) > 3
    wrong, eio, checked = [], 0, 0
    def attempt(f, *a):
        global eio
        try:
            return f(*a), None
        except OSError as e:
            if tolerate and e.errno == errno.EIO:
                eio += 1
                return None, e
            raise
    pending = [""]
    while pending:
        rel = pending.pop()
        names, err = attempt(os.listdir, os.path.join(mnt, rel))
        if err: continue
        if sorted(names) != sorted(os.listdir(os.path.join(src, rel))):
            wrong.append(("listing", rel)); continue
        for name in names:
            r = os.path.join(rel, name)
            st, err = attempt(os.lstat, os.path.join(mnt, r))
            if err: continue
            want = os.lstat(os.path.join(src, r))
            if stat.S_IFMT(st.st_mode) != stat.S_IFMT(want.st_mode) or stat.S_IMODE(st.st_mode) != stat.S_IMODE(want.st_mode) \
                    or (not stat.S_ISDIR(st.st_mode) and st.st_size != want.st_size):
                wrong.append(("stat", r)); continue
            if stat.S_ISDIR(st.st_mode):
                pending.append(r)
            elif stat.S_ISLNK(st.st_mode):
                target, err = attempt(os.readlink, os.path.join(mnt, r))
                if not err and target != os.readlink(os.path.join(src, r)): wrong.append(("readlink", r))
            else:
                data, err = attempt(lambda p: open(p, "rb").read(), os.path.join(mnt, r))
                if not err and data != open(os.path.join(src, r), "rb").read(): wrong.append(("content", r))
            checked += 1
    if tolerate:
        print("eio %d wrong %d checked %d %s" % (eio, len(wrong), checked, wrong[:3]))
    else:
        print("ok %d" % checked if not wrong else wrong[:5])
    """#

    private func makeBundle() throws -> (source: String, bundle: String, key: String) {
        let source = scratch.url("src")
        try check("mkdir", [source])
        try check(Tools.python, ["-c", Self.tree, source])
        let key = try makeKeyFile()
        let bundle = scratch.url("paged.encfs")
        _ = try packOrThrow(source, bundle, keyFile: key)
        return (source, bundle, key)
    }

    /// Forgets the kernel's dentries and inodes, so the next walk asks the
    /// daemon again for every name.
    private func dropKernelCaches() throws {
        try check("sh", ["-c", "sync; echo 2 > /proc/sys/vm/drop_caches"])
    }

    func testSmallestCache_EverythingReadsAsTheSource() throws {
        let (source, bundle, key) = try makeBundle()
        let layout = try BundleSurgery.layout(of: bundle)
        XCTAssertGreaterThan(layout.indexLength, 16 * 16384, "the index must be many times the 4-page cache")
        let mounted = try mount(bundle, keyFile: key, options: ["--index-cache", "64", "--allow-external-symlinks"])
        let first = try python(Self.walk, [source, mounted.mountpoint])
        XCTAssertEqual(first.output, "ok \(40 * 81 + 40)\n", first.summary)
        try dropKernelCaches()
        let second = try python(Self.walk, [source, mounted.mountpoint])
        XCTAssertEqual(second.output, first.output, second.summary)
        XCTAssertEqual(mounted.logLines().filter { $0.contains("error") }, [])
    }

    func testIndexChangedUnderTheMount_EIONeverOtherData() throws {
        let (source, bundle, key) = try makeBundle()
        let layout = try BundleSurgery.layout(of: bundle)
        let mounted = try mount(bundle, keyFile: key, options: ["--index-cache", "64", "--allow-external-symlinks"])
        // One byte in every 16 KiB page of the sealed index.
        let offsets = stride(from: layout.indexStart + 100, to: layout.indexStart + layout.indexLength - 16, by: 16384)
        for offset in offsets { try BundleSurgery.flipByte(at: offset, in: bundle) }
        let damaged = try python(Self.walk, [source, mounted.mountpoint, "--tolerate-eio"])
        let fields = damaged.output.split(separator: " ")
        XCTAssertEqual(fields.count >= 4 ? fields[3] : "", "0", "wrong answers: \(damaged.output)")
        XCTAssertNotEqual(fields.count >= 2 ? fields[1] : "0", "0", "no EIO at all: \(damaged.output)")
        XCTAssertTrue(MountTable.isServing(mounted.mountpoint), "the daemon must keep serving")
        let logged = mounted.logLines().filter { $0.contains("changed after the bundle was verified") }
        XCTAssertFalse(logged.isEmpty, "log: \(mounted.logLines())")
        XCTAssertEqual(Set(logged).count, logged.count, "each failure is logged once: \(logged)")
        // Restored, the same mount serves everything again.
        for offset in offsets { try BundleSurgery.flipByte(at: offset, in: bundle) }
        try dropKernelCaches()
        let restored = try python(Self.walk, [source, mounted.mountpoint])
        XCTAssertEqual(restored.output, "ok \(40 * 81 + 40)\n", restored.summary)
    }

    func testIndexCacheOption_RejectsOutOfRange() throws {
        try assertMountOptionRejected("--index-cache", values: ["63", "1048577", "abc", "-1"],
                                      message: "--index-cache must be a number of KiB from 64 to 1048576")
    }
}
