import SharedTestSupport
import XCTest

/// A tree of 100,000 small files in 1,000 directories: the index is built
/// once at mount, so mounting stays quick and every entry is reachable.
final class ManyEntriesTests: ToolTestCase {
    static let directories = 1000
    static let filesPerDirectory = 100

    func testHundredThousandFiles_AllListedAndSpotChecked() throws {
        let source = scratch.url("src")
        try check("mkdir", [source])
        var start = ContinuousClock.now
        try check(Tools.python, ["-c", SourceTrees.wide, source, String(Self.directories), String(Self.filesPerDirectory)],
                  timeout: 300)
        report("generated \(Self.directories * Self.filesPerDirectory) files in \(String(format: "%.2f", seconds(since: start))) s")
        let key = try makeKeyFile()
        let bundle = scratch.url("wide.encfs")
        let packSeconds = try packOrThrow(source, bundle, keyFile: key, timeout: 300)
        report("packed in \(String(format: "%.2f", packSeconds)) s, bundle \(try BundleSurgery.size(of: bundle)) bytes")

        let mounted = try mount(bundle, keyFile: key)
        report("mounted in \(String(format: "%.3f", mounted.secondsToServe)) s")

        start = ContinuousClock.now
        let count = try sh(#"find "$1" | wc -l"#, [mounted.mountpoint], timeout: 300)
        let expected = 1 + Self.directories + Self.directories * Self.filesPerDirectory
        XCTAssertEqual(count.output.trimmingCharacters(in: .whitespacesAndNewlines), String(expected), count.summary)
        report("find listed \(expected) entries in \(String(format: "%.2f", seconds(since: start))) s")
        let sourceCount = try sh(#"find "$1" | wc -l"#, [source], timeout: 300)
        XCTAssertEqual(sourceCount.output, count.output)

        // 100 random files: each holds its own path.
        start = ContinuousClock.now
        let spot = try python("""
        import os, random, sys
        mnt, dirs, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
        rng = random.Random()
        bad = []
        for _ in range(100):
            rel = "d%04d/f%03d" % (rng.randrange(dirs), rng.randrange(per))
            got = open(os.path.join(mnt, rel), "rb").read()
            if got != (rel + "\\n").encode():
                bad.append((rel, got))
        names = sorted(os.listdir(os.path.join(mnt, "d%04d" % rng.randrange(dirs))))
        if names != ["f%03d" % i for i in range(per)]:
            bad.append(("listing", names[:5]))
        print(bad if bad else "ok")
        """, [mounted.mountpoint, String(Self.directories), String(Self.filesPerDirectory)])
        XCTAssertEqual(spot.output, "ok\n", spot.summary)
        report("spot-checked 100 files in \(String(format: "%.2f", seconds(since: start))) s")
        // The root lists all directories, and statfs counts every entry.
        let root = try python("import os, sys; print(len(os.listdir(sys.argv[1])), os.statvfs(sys.argv[1]).f_files)",
                              [mounted.mountpoint])
        XCTAssertEqual(root.output, "\(Self.directories) \(expected)\n")
    }
}
