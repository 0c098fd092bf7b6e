import Foundation
import XCTest
import SharedTestSupport

/// What listing a mount costs in requests: `getxattr` is answered ENOSYS,
/// which the kernel remembers for the mount, so `ls -l` (which asks every
/// file for its ACL and security label) sends no request for them
/// (docs/PERFORMANCE.md, "Listing a real tree").
final class ListingTests: ToolTestCase {
    func testGetxattr_NotSupported_LsListsWithoutErrors() throws {
        let source = try scratch.makeDirectory("src")
        try scratch.makeDirectory("src/d")
        for i in 0..<20 { try scratch.write("src/d/f\(i).txt", Array("file \(i)\n".utf8)) }
        let key = try makeKeyFile()
        let bundle = scratch.url("l.encfs")
        try packOrThrow(source, bundle, keyFile: key, ["--compress", "zstd"])
        let mounted = try mount(bundle, keyFile: key)
        defer { unmount(mounted) }
        // Twice: the first answer (ENOSYS from the daemon) and the kernel's
        // own from then on must agree: "not supported" (it was ENODATA,
        // one request per file and attribute).
        let script = """
            import errno, os, sys
            for attempt in range(2):
                for name in ("user.x", "system.posix_acl_access", "security.selinux"):
                    try:
                        os.getxattr(sys.argv[1], name)
                        print("present")
                    except OSError as e:
                        print(errno.errorcode[e.errno])
            print(len(os.listxattr(sys.argv[1])))
            """
        let output = try check("python3", ["-c", script, mounted.path("d/f3.txt")]).output
        // The ACL is the kernel's own answer (no ACL: ENODATA) on either behaviour.
        XCTAssertEqual(output, String(repeating: "ENOTSUP\nENODATA\nENOTSUP\n", count: 2) + "0\n")
        let listing = try check("ls", ["-lR", mounted.mountpoint])
        XCTAssertEqual(listing.output.split(separator: "\n").filter { $0.hasPrefix("-r") }.count, 20, listing.output)
    }
}
