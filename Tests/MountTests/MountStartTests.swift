import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// How the background mount starts: two processes (the command, then the
/// daemon it executes again), each of which would otherwise pay the
/// dynamic loader for a dozen Swift runtime libraries. encfs-mount links
/// the Swift runtime in (Package.swift); the daemon keeps its identity.
final class MountStartTests: MountTestCase {
    /// The Swift runtime libraries the dynamic loader maps into a program
    /// linked against them; none may appear in the daemon.
    private static let swiftRuntimeLibraries = ["libswiftCore.so", "libswift_Concurrency.so", "libswiftDispatch.so",
                                                "libswift_StringProcessing.so", "libswiftGlibc.so"]

    /// The daemon maps no Swift runtime library: it is linked in, so
    /// neither process of a mount resolves them at start.
    func testDaemon_MapsNoSwiftRuntimeLibrary() throws {
        let source = try scratch.makeDirectory("src")
        try scratch.write("src/file", Array("content\n".utf8))
        let key = try makeKeyFile()
        let bundle = scratch.url("d.encfs")
        try packOrThrow(source, bundle, keyFile: key)
        let mounted = try mount(bundle, keyFile: key)
        defer { unmount(mounted) }
        let pid = try XCTUnwrap(mounted.daemonPID)
        // Read by cat: Foundation stops early on /proc files (size 0).
        let maps = try check("cat", ["/proc/\(pid)/maps"]).output
        // The check sees libraries at all: libc is always mapped.
        XCTAssertTrue(maps.contains("libc.so"), "no libc in the daemon's maps:\n\(maps)")
        for library in Self.swiftRuntimeLibraries {
            XCTAssertFalse(maps.contains(library), "the daemon maps \(library)")
        }
        XCTAssertEqual(String(decoding: try XCTUnwrap(FileManager.default.contents(atPath: "/proc/\(pid)/comm")), as: UTF8.self),
                       "encfs-mount\n")
        XCTAssertEqual(try String(contentsOf: URL(fileURLWithPath: mounted.mountpoint + "/file"), encoding: .utf8), "content\n")
    }
}
