import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A mounted bundle looks, to ordinary tools, exactly like the directory it
/// was packed from: contents, names, sizes, modes, mtimes with nanoseconds,
/// link counts, symlink targets.
///
/// Each test packs and mounts `SourceTrees.mixed` afresh (about 0.1 s), then
/// compares one view of both trees. The mount's files belong to the mounting
/// user; the source tree is created by the same user, so only `ls -l` needs
/// its owner columns normalized.
final class TreeEquivalenceTests: ToolTestCase {
    private var source = ""
    private var mounted: MountedBundle?

    private var mnt: String {
        guard let mounted else { preconditionFailure("internal error: setUp did not mount") }
        return mounted.mountpoint
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        source = scratch.url("src")
        try check(Tools.python, ["-c", SourceTrees.mixed, source])
        let key = try makeKeyFile()
        let bundle = scratch.url("tree.encfs")
        try packOrThrow(source, bundle, keyFile: key)
        // The tree holds absolute links (link-abs, d1/link-abs-dir), to be
        // served as stored: that needs saying since the review's finding 3.
        mounted = try mount(bundle, keyFile: key, options: ["--allow-external-symlinks"])
    }

    /// `cd DIR && find . -print0 | sort -z | xargs -0 COMMAND`, for both trees.
    private func eachEntry(_ command: String, filter: String = "") throws -> (source: ProcessResult, mount: ProcessResult) {
        let script = "cd \"$1\" && find . \(filter) -print0 | sort -z | xargs -0 -r \(command)"
        return (try sh(script, [source]), try sh(script, [mnt]))
    }

    private func assertSameLines(_ a: [[UInt8]], _ b: [[UInt8]], _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(a.count, b.count, "\(what): line counts differ", file: file, line: line)
        for (x, y) in zip(a, b) where x != y {
            XCTFail("\(what) differs:\n  source: \(String(decoding: x, as: UTF8.self))\n  mount:  \(String(decoding: y, as: UTF8.self))",
                    file: file, line: line)
        }
    }

    func testDiff_NoDifferences() throws {
        let result = try run("diff", ["-r", "--no-dereference", source, mnt])
        XCTAssertEqual(result.status, 0, result.output + result.errorOutput)
        XCTAssertEqual(result.output, "")
    }

    func testSha256sum_EveryFileEqual() throws {
        let (a, b) = try eachEntry("sha256sum", filter: "-type f")
        assertSuccess(a)
        assertSuccess(b)
        XCTAssertEqual(a.outputLines.count, 22)
        assertSameLines(a.outputLines, b.outputLines, "sha256sum")
    }

    func testStat_SizesModesMtimesEqual() throws {
        // %y carries nanoseconds; %Y the seconds (negative before 1970).
        // Directory sizes depend on the source file system, so they are
        // compared apart from this (see testStat_DirectorySizeAndLinkCounts).
        let format = "%n|%F|%a|%Y|%y|%X"
        let (a, b) = try eachEntry("stat -c '\(format)'")
        assertSuccess(a)
        assertSuccess(b)
        // Atime is not stored: the mount reports the mtime as atime.
        func dropAtime(_ lines: [[UInt8]]) -> [[UInt8]] {
            lines.map { line in Array(line[..<(line.lastIndex(of: UInt8(ascii: "|")) ?? line.endIndex)]) }
        }
        XCTAssertEqual(a.outputLines.count, 40)
        assertSameLines(dropAtime(a.outputLines), dropAtime(b.outputLines), "stat")
        let sizes = try eachEntry("stat -c '%n|%F|%s|%h'", filter: "! -type d")
        assertSameLines(sizes.source.outputLines, sizes.mount.outputLines, "stat sizes and link counts of non-directories")
        // atime of the mount equals mtime.
        for line in b.outputLines {
            let fields = line.split(separator: UInt8(ascii: "|"), omittingEmptySubsequences: false)
            guard fields.count >= 6 else { continue }
            XCTAssertEqual(Array(fields[fields.count - 3]), Array(fields[fields.count - 1]), "atime of \(String(decoding: fields[0], as: UTF8.self))")
        }
    }

    func testStat_SymlinksNotFollowed() throws {
        let (a, b) = try eachEntry("stat -c '%n|%F|%s|%a|%y|%N'", filter: "-type l")
        assertSuccess(a)
        assertSuccess(b)
        XCTAssertEqual(a.outputLines.count, 9)
        assertSameLines(a.outputLines, b.outputLines, "stat of symlinks")
    }

    func testStat_RootModeAndMtimeEqualSource() throws {
        let a = try check("stat", ["-c", "%F %a %Y %y", source])
        let b = try check("stat", ["-c", "%F %a %Y %y", mnt])
        XCTAssertEqual(b.output, a.output)
        XCTAssertTrue(a.output.hasPrefix("directory 750 "), a.output)
    }

    func testStat_DirectorySizeAndLinkCounts() throws {
        // nlink of a directory is 2 + its subdirectories, computed from the
        // source tree (independent of the source file system's own habits).
        let expected = try run("/bin/bash", ["-c", #"cd "$1" && find . -type d -print0 | sort -z | while IFS= read -r -d '' d; do printf '%s|%s\n' "$d" $((2 + $(find "$d" -mindepth 1 -maxdepth 1 -type d | wc -l))); done"#, "bash", source])
        assertSuccess(expected)
        let actual = try eachEntry("stat -c '%n|%h'", filter: "-type d").mount
        assertSuccess(actual)
        XCTAssertEqual(actual.outputLines.count, 9)
        assertSameLines(expected.outputLines, actual.outputLines, "directory link counts")
        let sizes = try eachEntry("stat -c '%s'", filter: "-type d").mount
        XCTAssertEqual(Set(sizes.outputLines.map { String(decoding: $0, as: UTF8.self) }), ["4096"])
    }

    func testLsLR_AgreesAfterOwnerNormalized() throws {
        let script = #"cd "$1" && ls -lRan --time-style=+%s.%N ."#
        let a = try sh(script, [source])
        let b = try sh(script, [mnt])
        assertSuccess(a)
        assertSuccess(b)
        let uid = String(getuid())
        let gid = String(getgid())
        XCTAssertFalse(b.outputLines.isEmpty)
        // Owner and group are the mounting user's; directory sizes and
        // "total" block counts are the source file system's business.
        for line in b.outputLines where line.first == UInt8(ascii: "-") || line.first == UInt8(ascii: "d") {
            let fields = line.split(separator: UInt8(ascii: " "))
            guard fields.count > 4 else { continue }
            XCTAssertEqual(String(decoding: fields[2], as: UTF8.self), uid)
            XCTAssertEqual(String(decoding: fields[3], as: UTF8.self), gid)
        }
        assertSameLines(normalizeLs(a.outputLines), normalizeLs(b.outputLines), "ls -lR")
    }

    /// Replaces owner and group (fields 3 and 4) with `-`, drops directory
    /// sizes and `total` lines; keeps the rest of each line byte for byte.
    private func normalizeLs(_ lines: [[UInt8]]) -> [[UInt8]] {
        lines.compactMap { line in
            if line.starts(with: Array("total ".utf8)) { return nil }
            guard let kind = line.first, "-dlpcbs".utf8.contains(kind) else { return line }
            var fields: [[UInt8]] = []
            var rest = line[...]
            for _ in 0..<5 {
                while rest.first == 0x20 { rest = rest.dropFirst() }
                let end = rest.firstIndex(of: 0x20) ?? rest.endIndex
                fields.append(Array(rest[..<end]))
                rest = rest[end...]
            }
            fields[2] = [UInt8(ascii: "-")]
            fields[3] = [UInt8(ascii: "-")]
            if kind == UInt8(ascii: "d") { fields[4] = [UInt8(ascii: "-")] }
            return Array(fields.joined(separator: [0x20])) + Array(rest)
        }
    }

    func testFind_SameEntriesTypesModesAndTargets() throws {
        let script = #"cd "$1" && find . -printf '%y %m %T@ %p -> %l\n' | sort"#
        let a = try sh(script, [source])
        let b = try sh(script, [mnt])
        assertSuccess(a)
        assertSuccess(b)
        XCTAssertEqual(a.outputLines.count, 40)
        assertSameLines(a.outputLines, b.outputLines, "find")
    }

    func testDu_ApparentSizeEqual() throws {
        // Counts directories at their st_size: equal when the source file
        // system reports 4096 for small directories, as ext4 and xfs do.
        let a = try check("du", ["--apparent-size", "-s", "-B1", source])
        let b = try check("du", ["--apparent-size", "-s", "-B1", mnt])
        let total = a.output.split(separator: "\t").first
        XCTAssertNotNil(total)
        XCTAssertEqual(total, b.output.split(separator: "\t").first)
    }

    func testCpA_CopyOfMountEqualsSource() throws {
        let copy = scratch.url("copy")
        try check("cp", ["-a", mnt, copy])
        let diff = try run("diff", ["-r", "--no-dereference", source, copy])
        XCTAssertEqual(diff.status, 0, diff.output)
        // cp -a keeps mtimes (with nanoseconds) and modes.
        let format = "%n|%F|%a|%s|%y"
        let script = "cd \"$1\" && find . ! -type d -print0 | sort -z | xargs -0 stat -c '\(format)'"
        let a = try sh(script, [source])
        let b = try sh(script, [copy])
        assertSameLines(a.outputLines, b.outputLines, "stat of the copy")
        let root = try check("stat", ["-c", "%a %y", copy])
        XCTAssertEqual(root.output, try check("stat", ["-c", "%a %y", source]).output)
    }

    func testTar_ListsSameEntries() throws {
        let script = #"tar -C "$1" -cf - . | tar -tvf - | sort -k6"#
        let a = try sh(script, [source])
        let b = try sh(script, [mnt])
        assertSuccess(a)
        assertSuccess(b)
        XCTAssertEqual(a.outputLines.count, 40)
        assertSameLines(a.outputLines, b.outputLines, "tar -tv")
        // And what tar reads extracts to the same tree.
        let extracted = try scratch.makeDirectory("extracted")
        try check("/bin/sh", ["-c", #"tar -C "$1" -cf - . | tar -C "$2" -xf -"#, "sh", mnt, extracted])
        let diff = try run("diff", ["-r", "--no-dereference", source, extracted])
        XCTAssertEqual(diff.status, 0, diff.output)
    }

    func testMmap_MultiChunkFileEqualsSource() throws {
        let script = #"""
import mmap, os, sys
src, mnt = sys.argv[1], sys.argv[2]
for name in ("many-chunks", "chunk-plus-one", "d1/nested/deeper/chunky", "one-byte"):
    want = open(os.path.join(src, name), "rb").read()
    with open(os.path.join(mnt, name), "rb") as f:
        with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
            assert len(m) == len(want), (name, len(m), len(want))
            assert m[:] == want, name
            # Slices across chunk boundaries, in reverse order.
            for boundary in range(len(want) // 65536, 0, -1):
                lo, hi = boundary * 65536 - 3, min(boundary * 65536 + 5, len(want))
                assert m[lo:hi] == want[lo:hi], (name, boundary)
        # A mapping at a page offset inside chunk 1.
        if len(want) >= 65536 + 4096 * 18:
            with mmap.mmap(f.fileno(), 4096 * 3, prot=mmap.PROT_READ, offset=65536 + 4096 * 15) as m:
                assert m[:] == want[65536 + 4096 * 15:65536 + 4096 * 18], name
print("ok")
"""#
        let result = try python(script, [source, mnt])
        assertSuccess(result)
        XCTAssertEqual(result.output, "ok\n")
    }
}
