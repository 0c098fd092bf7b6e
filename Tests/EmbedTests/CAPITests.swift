import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// libencfs through its C ABI: C programs compiled here with the system's
/// C compiler and `pkg-config --cflags --libs encfs`, as a C user would,
/// run plain, under AddressSanitizer and under Valgrind, locally and
/// against nginx on 127.0.0.1; and the library file itself (SONAME,
/// exports, what it needs at run time).
final class CAPITests: EmbedTestCase {
    /// Compiles `sources` into `output` against encfs.pc, with `flags`.
    private func compile(_ sources: [String], _ output: String, flags: [String] = []) throws {
        let fixture = try EmbedFixture.shared()
        let pc = try Subprocess.check("pkg-config", ["--cflags", "--libs", "encfs"],
                                      environment: ["PKG_CONFIG_PATH": fixture.pkgConfigPath])
        let pkgFlags = pc.output.split(whereSeparator: \.isWhitespace).map(String.init)
        try Subprocess.check("cc", ["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-g", "-O1"] + flags
                               + sources + ["-o", output] + pkgFlags + ["-lpthread"])
    }

    /// The environment a compiled program runs in: libencfs.so.0 found
    /// beside libencfs.so in the build, nothing from the Swift toolchain.
    private func runtime(_ fixture: EmbedFixture) -> [String: String?] {
        ["LD_LIBRARY_PATH": fixture.binDirectory]
    }

    private var abiTest: String { EmbedFixture.root + "/Tests/EmbedTests/C/abi-test.c" }

    func testExample_BuiltWithPkgConfigListsAndPrintsAFile() throws {
        let fixture = try EmbedFixture.shared()
        let program = fixture.path("encfs-cat")
        try compile([EmbedFixture.root + "/examples/c/encfs-cat.c"], program)
        let listing = try Subprocess.check(program, [fixture.path("app.bundle"), fixture.path("app.key")],
                                           environment: runtime(fixture))
        let lines = listing.output.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.contains("f 1048699 big.bin"), listing.output)
        XCTAssertTrue(lines.contains("f 10000 docs/a.pdf"), listing.output)
        XCTAssertTrue(lines.contains("l 10 link-a -> docs/a.pdf"), listing.output)
        XCTAssertTrue(lines.contains("d 0 docs/sub"), listing.output)
        XCTAssertEqual(lines.count, 18, listing.output)
        let cat = try Subprocess.run(program, [fixture.path("app.bundle"), fixture.path("app.key"), "docs/data.csv"],
                                     environment: runtime(fixture))
        XCTAssertEqual(cat.status, 0)
        XCTAssertEqual(cat.output, try String(contentsOfFile: fixture.path("src/docs/data.csv"), encoding: .utf8))
        let wrong = try Subprocess.run(program, [fixture.path("app.bundle"), fixture.path("other.key")], environment: runtime(fixture))
        XCTAssertEqual(wrong.status, 1)
        XCTAssertEqual(wrong.output, "")
        XCTAssertTrue(wrong.errorOutput.hasPrefix("encfs-cat: error: "), wrong.errorOutput)
        XCTAssertTrue(wrong.errorOutput.contains("wrong key"), wrong.errorOutput)
    }

    /// The example as the issue asks: under AddressSanitizer (leaks
    /// included) and under Valgrind, listing the bundle and printing a file.
    func testExample_CleanUnderAddressSanitizerAndValgrind() throws {
        let fixture = try EmbedFixture.shared()
        let plain = fixture.path("encfs-cat-vg")
        let asan = fixture.path("encfs-cat-asan")
        try compile([EmbedFixture.root + "/examples/c/encfs-cat.c"], plain)
        try compile([EmbedFixture.root + "/examples/c/encfs-cat.c"], asan,
                    flags: ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all"])
        let expected = try String(contentsOfFile: fixture.path("src/docs/data.csv"), encoding: .utf8)
        for arguments in [[fixture.path("app.bundle"), fixture.path("app.key")],
                          [fixture.path("app.bundle"), fixture.path("app.key"), "docs/data.csv"]] {
            let sanitized = try Subprocess.run(asan, arguments,
                                               environment: runtime(fixture).merging(["ASAN_OPTIONS": "detect_leaks=1:exitcode=98"]) { $1 })
            XCTAssertEqual(sanitized.status, 0, sanitized.summary)
            let checked = try Subprocess.run("/usr/bin/valgrind", ["-q", "--error-exitcode=99", "--leak-check=full",
                                                                   "--errors-for-leak-kinds=definite,indirect", plain] + arguments,
                                             environment: runtime(fixture), timeout: 600)
            XCTAssertEqual(checked.status, 0, checked.summary)
            XCTAssertEqual(checked.output, sanitized.output)
            if arguments.count == 3 { XCTAssertEqual(sanitized.output, expected) }
        }
    }

    func testABI_EveryCallAndErrorCode() throws {
        let fixture = try EmbedFixture.shared()
        let program = fixture.path("abi-test")
        try compile([abiTest], program)
        let run = try Subprocess.run(program, [fixture.directory, try serveAppBundle()], environment: runtime(fixture))
        XCTAssertEqual(run.status, 0, run.summary)
        XCTAssertTrue(run.output.hasSuffix(" passed, 0 failed\n"), run.output)
        XCTAssertFalse(run.output.contains("FAILED"), run.output)
    }

    func testABI_UnderAddressSanitizer() throws {
        let fixture = try EmbedFixture.shared()
        let program = fixture.path("abi-test-asan")
        try compile([abiTest], program, flags: ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all"])
        // detect_leaks: LeakSanitizer at exit; any report fails the run.
        let run = try Subprocess.run(program, [fixture.directory, try serveAppBundle()],
                                     environment: runtime(fixture).merging(["ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=98"]) { $1 })
        XCTAssertEqual(run.status, 0, run.summary)
        XCTAssertTrue(run.output.hasSuffix(" passed, 0 failed\n"), run.output)
        XCTAssertFalse(run.errorOutput.contains("ERROR: AddressSanitizer"), run.errorOutput)
        XCTAssertFalse(run.errorOutput.contains("ERROR: LeakSanitizer"), run.errorOutput)
    }

    func testABI_UnderValgrind() throws {
        guard access("/usr/bin/valgrind", X_OK) == 0 else { throw SubprocessError("valgrind is not installed (Scripts/install-deps.sh)") }
        let fixture = try EmbedFixture.shared()
        let program = fixture.path("abi-test-valgrind")
        try compile([abiTest], program)
        // Leaks counted are memory no pointer reaches any more; what the
        // Swift runtime keeps reachable in its caches for the process's
        // life is not a leak.
        let run = try Subprocess.run("/usr/bin/valgrind", ["-q", "--error-exitcode=99", "--leak-check=full",
                                                           "--errors-for-leak-kinds=definite,indirect",
                                                           "--show-leak-kinds=definite,indirect",
                                                           program, fixture.directory, try serveAppBundle()],
                                     environment: runtime(fixture), timeout: 600)
        XCTAssertEqual(run.status, 0, run.summary)
        XCTAssertTrue(run.output.contains(" passed, 0 failed\n"), run.output)
        XCTAssertFalse(run.errorOutput.contains("definitely lost"), run.errorOutput)
        XCTAssertFalse(run.errorOutput.contains("Invalid read"), run.errorOutput)
        XCTAssertFalse(run.errorOutput.contains("Invalid write"), run.errorOutput)
    }

    /// The read path allocates nothing: alloc-test counts every malloc of
    /// the process (libencfs and its Swift runtime included) over 2000
    /// preads of all shapes after a warm-up pass.
    func testPread_AllocatesNothingOnceWarm() throws {
        let fixture = try EmbedFixture.shared()
        let program = fixture.path("alloc-test")
        try compile([EmbedFixture.root + "/Tests/EmbedTests/C/alloc-test.c"], program)
        let run = try Subprocess.run(program, [fixture.path("app.bundle"), fixture.path("app.key"), "big.bin"], environment: runtime(fixture))
        XCTAssertEqual(run.status, 0, run.summary)
        XCTAssertTrue(run.output.contains("pass 1: 0 allocations in 2000 preads"), run.output)
        // The counter counts: the first pass, which fills the reader's pool, allocates.
        XCTAssertFalse(run.output.contains("pass 0: 0 allocations"), run.output)
    }

    func testLibrary_SONAMEAndOnlyEncfsSymbolsExported() throws {
        let fixture = try EmbedFixture.shared()
        let library = fixture.binDirectory + "/libencfs.so"
        let dynamic = try Subprocess.check("readelf", ["-d", library])
        XCTAssertTrue(dynamic.output.contains("Library soname: [libencfs.so.0]"), dynamic.output)
        let symbols = try Subprocess.check("nm", ["-D", "--defined-only", library])
        let names = symbols.output.split(separator: "\n").compactMap { $0.split(separator: " ").last.map(String.init) }
        XCTAssertGreaterThanOrEqual(names.count, 30, symbols.output)
        XCTAssertEqual(names.filter { !$0.hasPrefix("encfs_") }, [], "only encfs_* is exported")
        // Every function of the header is exported.
        let header = try String(contentsOfFile: EmbedFixture.root + "/include/encfs.h", encoding: .utf8)
        let declared = header.split(separator: "\n").compactMap { line -> String? in
            guard let range = line.range(of: #"\bencfs_[a-z_]+(?=\()"#, options: .regularExpression) else { return nil }
            return String(line[range])
        }
        XCTAssertEqual(Set(declared), Set(names.map { $0.replacingOccurrences(of: "@@ENCFS_0", with: "") }))
    }

    func testLibrary_LoadsWithoutTheSwiftToolchain() throws {
        let fixture = try EmbedFixture.shared()
        // A clean environment: no LD_LIBRARY_PATH to the toolchain.
        let ldd = try Subprocess.run("/usr/bin/env", ["-i", "/usr/bin/ldd", fixture.binDirectory + "/libencfs.so"])
        XCTAssertEqual(ldd.status, 0, ldd.summary)
        XCTAssertTrue(ldd.output.contains("libcrypto"), ldd.output)
        XCTAssertFalse(ldd.output.contains("not found"), ldd.output)
        XCTAssertFalse(ldd.output.contains("swift"), ldd.output)
        XCTAssertFalse(ldd.output.contains("libdispatch"), ldd.output)
        XCTAssertFalse(ldd.output.contains("Foundation"), ldd.output)
    }
}
