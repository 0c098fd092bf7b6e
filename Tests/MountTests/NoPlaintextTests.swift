import Foundation
import SharedTestSupport
import XCTest

/// Packing and reading through the mount leave no plaintext on disk.
///
/// Files hold a fresh random marker repeated; another marker is part of a
/// file name and a symlink target. After everything was read through the
/// mount, neither marker may appear in the bundle, the daemon's log, the
/// scratch directory (apart from the source tree), /tmp or the working
/// directory. Out of scope: the page cache and swap (see docs/SECURITY.md).
///
/// The markers reach child processes only through argv and the test
/// keeps every captured output in memory, so the test itself writes them
/// nowhere but the source tree.
final class NoPlaintextTests: ToolTestCase {
    /// Lists entries under `$1` (same file system only, not below `$2`)
    /// whose name contains `$4`, and files below 64 MiB that contain `$3`
    /// or `$4`.
    static let search = #"""
    find "$1" -xdev -name "*$4*" ! -path "$2/*" -print 2>/dev/null
    find "$1" -xdev -type f -size -64M ! -path "$2/*" -print0 2>/dev/null |
        xargs -0 -r grep -a -l -F -e "$3" -e "$4" 2>/dev/null
    exit 0
    """#

    func testMarkers_AbsentFromDiskAfterPackAndReads() throws {
        let marker = randomHex(bytes: 16)
        let nameMarker = randomHex(bytes: 16)
        let source = scratch.url("src")
        try check(Tools.python, ["-c", SourceTrees.marked, source, "12", "200000", marker, nameMarker])
        let key = try makeKeyFile()
        let bundle = scratch.url("marked.encfs")
        try packOrThrow(source, bundle, keyFile: key)
        let mounted = try mount(bundle, keyFile: key)

        // Read every byte and every name through the mount.
        let digests = #"cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum"#
        let viaMount = try sh(digests, [mounted.mountpoint])
        assertSuccess(viaMount)
        XCTAssertEqual(viaMount.output, try sh(digests, [source]).output)
        XCTAssertEqual(viaMount.outputLines.count, 13)
        let names = try sh(#"ls -lR "$1" && readlink "$1/link""#, [mounted.mountpoint])
        assertSuccess(names)
        XCTAssertTrue(names.output.contains("named-\(nameMarker)"), "the name must be readable through the mount")
        XCTAssertTrue(names.output.contains("target-\(nameMarker)"))
        let tar = try sh(#"tar -C "$1" -cf - . | wc -c"#, [mounted.mountpoint])
        assertSuccess(tar)

        // While the daemon runs (it might keep files it deletes on exit)…
        let places = [bundle, scratch.path, "/tmp", FileManager.default.currentDirectoryPath]
            + (mounted.logFile.map { [$0] } ?? [])
        var hits: [String] = []
        let start = ContinuousClock.now
        for place in places {
            let result = try sh(Self.search, [place, source, marker, nameMarker], timeout: 240)
            hits += result.output.split(separator: "\n").map(String.init)
        }
        report("searched \(places.count) places in \(String(format: "%.1f", seconds(since: start))) s")
        // …and after it ended.
        unmount(mounted)
        for place in [bundle, scratch.path] + (mounted.logFile.map { [$0] } ?? []) {
            let result = try sh(Self.search, [place, source, marker, nameMarker], timeout: 240)
            hits += result.output.split(separator: "\n").map(String.init)
        }
        XCTAssertEqual(Set(hits), [], "plaintext found on disk")

        // Sanity: the search does find the markers where they are, also
        // through the widest place searched.
        let control = try sh(Self.search, [source, "/nonexistent", marker, nameMarker])
        XCTAssertEqual(control.outputLines.count, 13, "the search itself must work")
        let decoy = try scratch.write("decoy", Array("..\(marker)..".utf8))
        let wide = scratch.path.hasPrefix("/tmp/") ? "/tmp" : scratch.path
        let found = try sh(Self.search, [wide, source, marker, nameMarker], timeout: 240)
        XCTAssertEqual(found.output, "\(decoy)\n", "the search must reach the scratch directory")
        // The bundle holds no name of the tree either.
        let names2 = try run("grep", ["-c", "-a", "-F", "-e", "named-", "-e", "file10", bundle])
        XCTAssertEqual(names2.output, "0\n", "names in the bundle in clear")
    }
}
