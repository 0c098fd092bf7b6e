import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Symlinks that point outside the bundle (security review, finding 3).
///
/// `abs -> /etc/hostname` and `sub/rel -> ../../../../etc/hostname` used to
/// be served unchanged, so whatever served the mount (nginx, an app) read
/// the host's files through it. Now `encfs-mount` refuses such a bundle,
/// naming the link, unless given `--allow-external-symlinks` (which must
/// reach the background daemon: it is the process that checks the index);
/// `encfs-pack` warns once per link and refuses with `--strict`;
/// `encfs-inspect` lists them (`ls`), reports them (`verify`) and does not
/// follow them (`cat`). Links that stay inside mount as before.
final class ExternalSymlinkTests: ToolTestCase {
    private var key = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        key = try makeKeyFile()
    }

    /// A source tree with `a`, `sub/b` and `links` (path, target).
    private func makeSource(_ name: String, links: [(String, String)]) throws -> String {
        let source = try scratch.makeDirectory(name)
        try scratch.makeDirectory("\(name)/sub")
        try scratch.write("\(name)/a", Array("a\n".utf8))
        try scratch.write("\(name)/sub/b", Array("b\n".utf8))
        for (path, target) in links {
            guard symlink(target, "\(source)/\(path)") == 0 else { throw SubprocessError("symlink \(path)") }
        }
        return source
    }

    /// The bundle of the review: one absolute link, one that climbs out.
    private func packEscaping() throws -> (source: String, bundle: String, result: ProcessResult) {
        let source = try makeSource("escaping", links: [("abs", "/etc/hostname"), ("sub/rel", "../../../../etc/hostname")])
        let bundle = scratch.url("escaping.encfs")
        return (source, bundle, try pack(source, bundle, ["--key-file", key]))
    }

    /// Runs `encfs-mount` expecting a refusal; the mountpoint is unmounted
    /// at teardown in case it mounted after all.
    private func refusedMount(_ bundle: String, _ extra: [String] = []) throws -> ProcessResult {
        let mountpoint = try scratch.makeDirectory(uniqueName("mnt-refused"))
        addTeardownBlock { MountedBundle.unmount(mountpoint: mountpoint, foreground: nil) }
        let result = try run(try Tools.mount(), [bundle, mountpoint, "--key-file", key] + extra, timeout: 60)
        XCTAssertEqual(result.status, 1, result.summary)
        XCTAssertFalse(MountTable.isMounted(mountpoint), "mounted although refused")
        return result
    }

    // MARK: - encfs-pack

    func testPack_ExternalLinks_OneWarningPerLink() throws {
        let (source, bundle, result) = try packEscaping()
        XCTAssertEqual(result.status, 0, result.summary)
        XCTAssertTrue(FileManager.default.fileExists(atPath: bundle))
        XCTAssertEqual(result.errorLines.filter { $0.hasPrefix("encfs-pack: warning:") }, [
            "encfs-pack: warning: symlink points outside the bundle: /etc/hostname (\(source)/abs)",
            "encfs-pack: warning: symlink points outside the bundle: ../../../../etc/hostname (\(source)/sub/rel)",
        ])
    }

    func testPack_Strict_RefusesAndWritesNothing() throws {
        let source = try makeSource("escaping", links: [("sub/rel", "../../../../etc/hostname")])
        let bundle = scratch.url("strict.encfs")
        let result = try pack(source, bundle, ["--key-file", key, "--strict", "-q"])
        XCTAssertEqual(result.status, 1, result.summary)
        XCTAssertEqual(result.errorLines.first,
                       "encfs-pack: error: symlink points outside the bundle: ../../../../etc/hostname (\(source)/sub/rel)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: bundle))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch.path).filter { $0.hasSuffix(".encfs") }, [])
    }

    // MARK: - encfs-mount

    /// In the background (the daemon checks the index and reports through
    /// the status pipe) and in the foreground: one line naming the link,
    /// and a hint naming the option.
    func testMount_ExternalLinks_RefusedByDefault() throws {
        let (_, bundle, packed) = try packEscaping()
        assertSuccess(packed)
        for extra in [[], ["-f"]] {
            let result = try refusedMount(bundle, extra)
            XCTAssertEqual(result.errorLines, [
                "encfs-mount: error: symlink points outside the bundle: /etc/hostname (abs)",
                "hint: to accept such links (served as they are stored), add --allow-external-symlinks",
            ], "\(extra)")
        }
        // The relative one alone is refused too, named by its path.
        let source = try makeSource("climbing", links: [("sub/rel", "../../../../etc/hostname")])
        let climbing = scratch.url("climbing.encfs")
        try packOrThrow(source, climbing, keyFile: key)
        let result = try refusedMount(climbing)
        XCTAssertEqual(result.errorLines.first,
                       "encfs-mount: error: symlink points outside the bundle: ../../../../etc/hostname (sub/rel)")
    }

    /// The flag reaches the daemon: without it the daemon would refuse.
    func testMount_AllowExternalSymlinks_MountsAndServesLinksAsStored() throws {
        let (_, bundle, packed) = try packEscaping()
        assertSuccess(packed)
        for foreground in [false, true] {
            let mounted = try mount(bundle, keyFile: key, options: ["--allow-external-symlinks"], foreground: foreground)
            XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: mounted.path("abs")), "/etc/hostname")
            XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: mounted.path("sub/rel")), "../../../../etc/hostname")
            unmount(mounted)
        }
    }

    func testMount_LinksInside_MountByDefault() throws {
        let source = try makeSource("inside", links: [("l", "sub/b"), ("sub/x", "../a"), ("sub/up", ".."), ("dot", ".")])
        let bundle = scratch.url("inside.encfs")
        let packed = try pack(source, bundle, ["--key-file", key, "--strict"])
        XCTAssertEqual(packed.status, 0, packed.summary)
        XCTAssertEqual(packed.errorLines, [])
        let mounted = try mount(bundle, keyFile: key)
        XCTAssertEqual(FileManager.default.contents(atPath: mounted.path("l")), Data("b\n".utf8))
        XCTAssertEqual(FileManager.default.contents(atPath: mounted.path("sub/x")), Data("a\n".utf8))
        XCTAssertEqual(FileManager.default.contents(atPath: mounted.path("sub/up/dot/sub/b")), Data("b\n".utf8))
    }

    // MARK: - encfs-inspect

    func testInspect_LsListsVerifyReportsCatRefuses() throws {
        let (_, bundle, packed) = try packEscaping()
        assertSuccess(packed)
        let inspect = try Tools.inspect()
        let ls = try run(inspect, ["ls", "-l", "-R", bundle, "--key-file", key])
        XCTAssertEqual(ls.status, 0, ls.summary)
        XCTAssertTrue(ls.output.contains(" abs -> /etc/hostname\n"), ls.output)
        XCTAssertTrue(ls.output.contains(" rel -> ../../../../etc/hostname\n"), ls.output)
        XCTAssertEqual(ls.errorLines, [
            "encfs-inspect: warning: symlink points outside the bundle: /etc/hostname (abs)",
            "encfs-inspect: warning: symlink points outside the bundle: ../../../../etc/hostname (sub/rel)",
            "hint: encfs-mount refuses a bundle with such links unless given --allow-external-symlinks",
        ])

        let verify = try run(inspect, ["verify", bundle, "--key-file", key])
        XCTAssertEqual(verify.status, 1, verify.summary)
        XCTAssertEqual(verify.output, "external symlink: abs -> /etc/hostname\n"
                       + "external symlink: sub/rel -> ../../../../etc/hostname\n"
                       + "verified 2 files, 2 chunks: 2 symlinks point outside the bundle\n")
        let allowed = try run(inspect, ["verify", bundle, "--key-file", key, "--allow-external-symlinks"])
        XCTAssertEqual(allowed.status, 0, allowed.summary)
        XCTAssertTrue(allowed.output.hasSuffix("verified 2 files, 2 chunks: intact (2 symlinks point outside the bundle, allowed)\n"),
                      allowed.output)

        for link in ["abs", "sub/rel"] {
            let cat = try run(inspect, ["cat", bundle, link, "--key-file", key])
            XCTAssertEqual(cat.status, 1, cat.summary)
            XCTAssertEqual(cat.stdout, [], "cat \(link) printed something")
            XCTAssertEqual(cat.errorLines, ["encfs-inspect: error: symlink points outside the bundle (\(link))"])
        }
    }
}
