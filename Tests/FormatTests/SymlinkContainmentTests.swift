import CryptCore
@testable import EncFSCore
import SharedTestSupport
import XCTest

/// Symlinks that lead outside the bundle (security review, finding 3): an
/// absolute target, or one that climbs above the root from the link's own
/// directory, would let a mount read the host's files. Readers refuse such
/// a bundle unless told otherwise, naming the link; the packer warns about
/// each one, or refuses with `refusesExternalSymlinks`; `resolve` never
/// follows one. Links that stay inside keep working.
final class SymlinkContainmentTests: XCTestCase {
    private var tmp: TemporaryDirectory!
    private let key = TestSecrets.key(3)

    override func setUpWithError() throws { tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp") }
    override func tearDown() { tmp = nil }

    /// A source tree: `a.txt`, `sub/b.txt`, and `links` (path, target).
    private func source(_ links: [(String, String)]) throws -> [UInt8] {
        let source = tmp.appending("source")
        try FileTree.makeDirectory(source)
        try FileTree.makeDirectory(join(source, bytes("sub")))
        try FileTree.writeFile(join(source, bytes("a.txt")), bytes("a\n"))
        try FileTree.writeFile(join(source, bytes("sub/b.txt")), bytes("b\n"))
        for (path, target) in links { try FileTree.makeSymlink(join(source, bytes(path)), target: bytes(target)) }
        return source
    }

    /// Packs `links`, returning the bundle and each warning (message, path).
    private func pack(_ links: [(String, String)], refusing: Bool = false) throws
        -> (bundle: [UInt8], source: [UInt8], warnings: [(String, [UInt8])]) {
        let source = try source(links)
        let bundle = tmp.appending("b.bundle")
        var options = PackOptions()
        options.chunkSizeLog2 = 12
        options.keys = [.rawKey(key)]
        options.refusesExternalSymlinks = refusing
        var warnings: [(String, [UInt8])] = []
        _ = try BundleWriter.pack(source: source, destination: bundle, options: options) { warnings.append(($0, $1)) }
        return (bundle, source, warnings)
    }

    private func open(_ bundle: [UInt8], allowing: Bool = false) throws -> BundleReader {
        try BundleReader.open(path: bundle, materials: [.rawKey(key)], options: OpenOptions(allowsExternalSymlinks: allowing))
    }

    private func assertRefused(_ bundle: [UInt8], path: String, target: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try open(bundle), file: file, line: line) { error in
            guard case BundleError.externalSymlink(let p, let t) = error else { return XCTFail("\(error)", file: file, line: line) }
            XCTAssertEqual(p, bytes(path), file: file, line: line)
            XCTAssertEqual(t, bytes(target), file: file, line: line)
            XCTAssertEqual((error as? BundleError)?.message, "symlink points outside the bundle: \(target)", file: file, line: line)
        }
    }

    // MARK: - Reader

    func testOpen_AbsoluteTarget_RefusedNamingTheLink() throws {
        let (bundle, _, _) = try pack([("abs", "/etc/hostname")])
        assertRefused(bundle, path: "abs", target: "/etc/hostname")
    }

    func testOpen_RelativeTargetClimbingOut_RefusedNamingTheLink() throws {
        let (bundle, _, _) = try pack([("sub/rel", "../../../../etc/hostname")])
        assertRefused(bundle, path: "sub/rel", target: "../../../../etc/hostname")
    }

    /// One ".." too many: from `sub`, "../.." is the root's parent.
    func testOpen_OneLevelTooHigh_Refused() throws {
        let (bundle, _, _) = try pack([("sub/up", "../../a.txt")])
        assertRefused(bundle, path: "sub/up", target: "../../a.txt")
    }

    /// Lexically the walk climbs out, even through a name that does not
    /// exist (the rule the review asked for; a reader cannot rely on ENOENT).
    func testOpen_ClimbsOutLexicallyThroughMissingName_Refused() throws {
        let (bundle, _, _) = try pack([("sub/l", "missing/../../../x")])
        assertRefused(bundle, path: "sub/l", target: "missing/../../../x")
    }

    /// Lexically inside (x, x, .., ..), but x is a link to ".", so the
    /// kernel would be at the root after "x/x" and leave it with "..".
    func testOpen_ClimbsOutThroughAnotherLink_Refused() throws {
        let (bundle, _, _) = try pack([("x", "."), ("y", "x/x/../..")])
        assertRefused(bundle, path: "y", target: "x/x/../..")
    }

    func testOpen_LinksInside_Open() throws {
        let links = [("in", "sub/b.txt"), ("sub/x", "../a.txt"), ("sub/self", "./../sub/./b.txt"), ("dot", "."),
                     ("sub/root", ".."), ("dangling", "does/not/exist"), ("sub/deep", "../sub/../sub/b.txt")]
        let (bundle, _, warnings) = try pack(links)
        XCTAssertEqual(warnings.map(\.0), [])
        let reader = try open(bundle)
        XCTAssertEqual(try reader.index.externalSymlinks(), [])
        XCTAssertEqual(try reader.contents(of: try reader.index.resolve(path: bytes("in"), followingLast: true)), bytes("b\n"))
        XCTAssertEqual(try reader.contents(of: try reader.index.resolve(path: bytes("sub/x"), followingLast: true)), bytes("a\n"))
        XCTAssertEqual(try reader.contents(of: try reader.index.resolve(path: bytes("sub/root/sub/deep"), followingLast: true)),
                       bytes("b\n"))
    }

    func testOpen_AllowingExternal_OpensAndListsThem() throws {
        let (bundle, _, _) = try pack([("abs", "/etc/hostname"), ("sub/rel", "../../etc/hostname"), ("in", "sub/b.txt")])
        let reader = try open(bundle, allowing: true)
        let external = try reader.index.externalSymlinks()
        XCTAssertEqual(try external.map { try reader.index.path(of: $0) }, [bytes("abs"), bytes("sub/rel")])
        XCTAssertTrue(try reader.index.isExternalSymlink(try reader.index.resolve(path: bytes("sub/rel"))))
        XCTAssertFalse(try reader.index.isExternalSymlink(try reader.index.resolve(path: bytes("in"))))
    }

    /// `resolve` (`encfs-inspect cat`) does not follow a link out of the
    /// bundle: it used to stop ".." at the root, reading `a.txt` for
    /// `sub/rel -> ../../a.txt` where the kernel would read the host's.
    func testResolve_ThroughClimbingLink_Rejected() throws {
        let (bundle, _, _) = try pack([("sub/rel", "../../a.txt")])
        let reader = try open(bundle, allowing: true)
        XCTAssertThrowsBundleError(.externalSymlink(path: bytes("sub/rel"), target: [])) {
            _ = try reader.index.resolve(path: bytes("sub/rel"), followingLast: true)
        }
        // The path the caller gives may still say ".." at the root.
        XCTAssertEqual(try reader.index.resolve(path: bytes("../../sub/b.txt")).kind, .file)
    }

    // MARK: - Writer

    func testPack_ExternalLinks_OneWarningEach() throws {
        let (_, source, warnings) = try pack([("abs", "/etc/hostname"), ("sub/rel", "../../../../etc/hostname"), ("in", "sub/b.txt")])
        XCTAssertEqual(warnings.map(\.0), ["symlink points outside the bundle: /etc/hostname",
                                           "symlink points outside the bundle: ../../../../etc/hostname"])
        XCTAssertEqual(warnings.map(\.1), [join(source, bytes("abs")), join(source, bytes("sub/rel"))])
    }

    func testPack_RefusingExternalLinks_ThrowsAndWritesNothing() throws {
        XCTAssertThrowsError(try pack([("in", "sub/b.txt"), ("sub/rel", "../../x")], refusing: true)) { error in
            guard case BundleError.externalSymlink(let path, let target) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(path, join(tmp.appending("source"), bytes("sub/rel")))
            XCTAssertEqual(target, bytes("../../x"))
        }
        XCTAssertFalse(FileTree.exists(tmp.appending("b.bundle")))
    }

    // MARK: - Rules

    func testIsSuspect_OnlyAbsoluteOrDotDot() {
        for (target, suspect) in [("/x", true), ("..", true), ("a/..", true), ("../a", true), ("a/../b", true), ("a/..b", false),
                                  ("..a", false), ("a/b", false), (".", false), ("./a", false), ("a//..//", true)] {
            XCTAssertEqual(bytes(target).withUnsafeBytes(SymlinkContainment.isSuspect), suspect, target)
        }
    }

    func testClimbsAboveRoot_CountsFromTheLinksDepth() {
        let cases: [(String, Int, Bool)] = [("..", 0, true), ("..", 1, false), ("../..", 1, true), ("a/../..", 1, false),
                                            ("a/../../..", 1, true), ("./../.", 1, false), ("b/c/../../../..", 2, false)]
        for (target, depth, climbs) in cases {
            XCTAssertEqual(SymlinkContainment.climbsAboveRoot(SymlinkContainment.components(of: bytes(target)), fromDepth: depth),
                           climbs, "\(target) from depth \(depth)")
        }
    }
}
