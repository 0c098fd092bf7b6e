import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Set-id bits stay in the bundle but are never served, and every mount is
/// `nosuid,nodev`: `-o suid` and `-o dev` (which Debian's mount.fuse3 adds
/// for fstab mounts) are accepted and ignored.
final class SetIDBitsTests: ToolTestCase {
    func testSetIDBits_NotServedAndMountIsNoSuidNoDevDespiteOptions() throws {
        let source = try scratch.makeDirectory("src")
        let modes: [(String, mode_t, String)] = [
            ("setuid-program", 0o4755, "755"), ("setgid-program", 0o2755, "755"), ("both", 0o6711, "711"),
            ("plain", 0o640, "640"),
        ]
        for (name, mode, _) in modes {
            try scratch.write("src/\(name)", Array("#!/bin/sh\nid -u\n".utf8))
            XCTAssertEqual(chmod("\(source)/\(name)", mode), 0)
        }
        for (name, mode) in [("setgid-dir", mode_t(0o2755)), ("sticky-dir", 0o1777)] {
            try scratch.makeDirectory("src/\(name)")
            XCTAssertEqual(chmod("\(source)/\(name)", mode), 0)
        }
        let key = try makeKeyFile()
        let bundle = scratch.url("s.encfs")
        try packOrThrow(source, bundle, keyFile: key)

        // The bundle keeps the bits.
        let listing = try check(try Tools.inspect(), ["ls", "-l", bundle, "--key-file", key]).output
        for (name, shown) in [("setuid-program", "-rwsr-xr-x"), ("setgid-dir", "drwxr-sr-x"), ("both", "-rws--s--x")] {
            XCTAssertTrue(listing.split(separator: "\n").contains { $0.hasPrefix(shown) && $0.hasSuffix(name) }, "\(name): \(listing)")
        }

        for options in [["-o", "suid,dev"], ["-o", "allow_other", "-o", "dev", "-o", "suid"]] {
            let mounted = try mount(bundle, keyFile: key, options: options)
            for (name, _, served) in modes {
                XCTAssertEqual(try check("stat", ["-c", "%a", mounted.path(name)]).output, "\(served)\n", "\(name), \(options)")
            }
            XCTAssertEqual(try check("stat", ["-c", "%a", mounted.path("setgid-dir")]).output, "755\n", "\(options)")
            // The sticky bit is not a set-id bit: served as stored.
            XCTAssertEqual(try check("stat", ["-c", "%a", mounted.path("sticky-dir")]).output, "1777\n", "\(options)")
            let entry = try XCTUnwrap(MountTable.entry(at: mounted.mountpoint))
            for flag in ["ro", "nosuid", "nodev"] {
                XCTAssertTrue(entry.mountOptions.contains(flag), "\(flag) missing with \(options): \(entry.mountOptions)")
            }
            unmount(mounted)
        }
    }
}
