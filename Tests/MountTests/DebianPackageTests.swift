import EncFSCore
import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Scripts/package-deb.sh builds a package that installs with dpkg, needs
/// no Swift, and packs, mounts and reads from /usr/bin with the build tree
/// out of PATH; then it is removed again.
///
/// The first run pays for a static build into .build-static (minutes);
/// later runs rebuild only what changed. The package is installed on this machine for the test and
/// removed at teardown; a machine that already has encfs-tools installed
/// is not touched (the test fails saying so).
final class DebianPackageTests: ToolTestCase {
    /// Runs dpkg, waiting (bounded) while another dpkg or apt holds the lock.
    private func dpkg(_ arguments: [String]) throws -> ProcessResult {
        let deadline = Deadline(seconds: 120)
        while true {
            let result = try run("/usr/bin/dpkg", arguments, timeout: 300)
            let locked = result.errorOutput.contains("lock") && result.status != 0
            if !locked || deadline.hasPassed { return result }
            sleep(2)
        }
    }

    func testPackage_InstallsPacksMountsReadsAndRemoves() throws {
        let built = try run("\(Tools.repositoryRoot)/Scripts/package-deb.sh", [], timeout: 3600)
        assertSuccess(built)
        let deb = built.output.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertTrue(deb.hasSuffix("/dist/encfs-tools_\(EncFSVersion.string)_amd64.deb"), deb)

        // Metadata: the exact shared libraries, fuse3 for fusermount3, nothing of Swift.
        let depends = try check("/usr/bin/dpkg-deb", ["-f", deb, "Depends"]).output
        for library in ["libc6", "libfuse3-3", "libssl3", "libipsec-mb1", "libmicrohttpd12", "fuse3"] {
            XCTAssertTrue(depends.contains(library), "\(library) not in Depends: \(depends)")
        }
        XCTAssertFalse(depends.lowercased().contains("swift"), depends)
        let contents = try check("/usr/bin/dpkg-deb", ["-c", deb]).output
        for path in ["./usr/bin/encfs-pack", "./usr/bin/encfs-mount", "./usr/bin/encfs-inspect", "./usr/bin/encfs-keygen",
                     "./usr/bin/encfs-rekey", "./usr/share/man/man1/encfs-rekey.1.gz",
                     "./usr/bin/encfs-serve", "./usr/share/man/man1/encfs-serve.1.gz",
                     "./usr/bin/encfs-ctl", "./usr/share/man/man1/encfs-ctl.1.gz",
                     "./usr/share/bash-completion/completions/encfs-rekey",
                     "./usr/share/man/man1/encfs-mount.1.gz", "./usr/share/man/man5/encfs.5.gz",
                     "./usr/share/bash-completion/completions/encfs-mount",
                     "./usr/share/doc/encfs-tools/examples/systemd/encfs-assets.service",
                     "./usr/lib/x86_64-linux-gnu/libencfs.so.0", "./usr/lib/x86_64-linux-gnu/libencfs.so",
                     "./usr/include/encfs.h", "./usr/lib/x86_64-linux-gnu/pkgconfig/encfs.pc",
                     "./usr/share/doc/encfs-tools/examples/c/encfs-cat.c"] {
            XCTAssertTrue(contents.contains(path), "\(path) not in the package")
        }
        for tooling in BuiltBinaries.testTooling {
            XCTAssertFalse(contents.contains("/\(tooling)"), "test tooling \(tooling) in the package")
        }
        XCTAssertFalse(contents.split(separator: "\n").contains { !$0.contains(" root/root ") }, "files not owned by root")
        // Debian's checker: no error and no warning (informational tags remain, listed in the report).
        let lintian = try run("/usr/bin/lintian", ["--fail-on", "error,warning", deb], timeout: 900)
        XCTAssertEqual(lintian.status, 0, lintian.output + lintian.errorOutput)

        let before = try run("/usr/bin/dpkg-query", ["-W", "-f=${Status}", "encfs-tools"])
        guard !before.output.contains("install ok installed") else {
            throw SubprocessError("encfs-tools is already installed on this machine: not touching it")
        }
        addTeardownBlock { [self] in _ = try? dpkg(["-r", "encfs-tools"]) }
        assertSuccess(try dpkg(["-i", deb]))

        let system = ["PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": nil as String?]
        for tool in ["encfs-pack", "encfs-mount", "encfs-inspect", "encfs-keygen", "encfs-rekey"] {
            assertSuccess(try run("/usr/bin/\(tool)", ["--version"], environment: system))
            let libraries = try check("/usr/bin/ldd", ["/usr/bin/\(tool)"]).output
            XCTAssertFalse(libraries.contains("swift") || libraries.contains("not found"), "\(tool): \(libraries)")
        }
        let source = try scratch.makeDirectory("src")
        _ = try scratch.write("src/page.html", Array("<p>installed</p>\n".utf8))
        let key = scratch.url("k")
        assertSuccess(try run("/usr/bin/encfs-keygen", ["--symmetric", "-o", key], environment: system))
        let bundle = scratch.url("site.encfs")
        assertSuccess(try run("/usr/bin/encfs-pack", [source, bundle, "--key-file", key, "--quiet"], environment: system))
        let mountpoint = try scratch.makeDirectory("mnt")
        addTeardownBlock { MountedBundle.unmount(mountpoint: mountpoint, foreground: nil) }
        assertSuccess(try run("/usr/bin/encfs-mount", [bundle, mountpoint, "--key-file", key], environment: system, timeout: 60))
        XCTAssertEqual(try String(contentsOfFile: "\(mountpoint)/page.html", encoding: .utf8), "<p>installed</p>\n")
        // The daemon runs the installed binary.
        if let daemon = ProcessTable.daemon(servingAt: mountpoint) {
            XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(daemon)/exe"), "/usr/bin/encfs-mount")
        } else {
            XCTFail("no daemon serves \(mountpoint)")
        }
        assertSuccess(try run(Tools.fusermount, ["-u", mountpoint]))
        XCTAssertEqual(try check("/usr/bin/man", ["-w", "encfs-mount"]).output, "/usr/share/man/man1/encfs-mount.1.gz\n")

        // libencfs (issue 29): a C user with only the package builds against
        // encfs.pc and reads the bundle packed above.
        let program = scratch.url("encfs-cat")
        let flags = try check("/usr/bin/pkg-config", ["--cflags", "--libs", "encfs"]).output
            .split(whereSeparator: \.isWhitespace).map(String.init)
        XCTAssertTrue(flags.contains("-lencfs"), "\(flags)")
        assertSuccess(try run("/usr/bin/cc", ["-o", program, "/usr/share/doc/encfs-tools/examples/c/encfs-cat.c"] + flags,
                              environment: system))
        let cat = try run(program, [bundle, key, "page.html"], environment: system)
        assertSuccess(cat)
        XCTAssertEqual(cat.output, "<p>installed</p>\n")

        assertSuccess(try dpkg(["-r", "encfs-tools"]))
        XCTAssertNotEqual(access("/usr/bin/encfs-mount", F_OK), 0)
    }
}
