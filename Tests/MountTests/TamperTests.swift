import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A bundle changed after packing: damage inside a file's chunk shows up as
/// EIO on exactly that chunk (plus one log line naming the inode and chunk,
/// and the file only with `--log-names`),
/// while everything else still reads; damage to the length, header or
/// index stops the mount before anything is mounted.
final class TamperTests: ToolTestCase {
    private var source = ""
    private var key = ""
    private var bundle = ""
    static let chunk = 65536
    /// `big` spans 16 chunks and a partial 17th.
    static let bigSize = 16 * chunk + 1000

    override func setUpWithError() throws {
        try super.setUpWithError()
        source = try scratch.makeDirectory("src")
        // Known content: byte i of big is i mod 251.
        try scratch.write("src/big", (0..<Self.bigSize).map { UInt8($0 % 251) })
        try scratch.write("src/other", Array("other file\n".utf8))
        try scratch.makeDirectory("src/dir")
        try scratch.write("src/dir/more", Array(repeating: 0x4D, count: 3 * Self.chunk))
        key = try makeKeyFile()
        bundle = scratch.url("t.encfs")
        // The chunk arithmetic here (dd bs=chunk) assumes 64 KiB chunks.
        try packOrThrow(source, bundle, keyFile: key, ["--chunk-size", "64K"])
    }

    /// Reads chunk `index` of `path` with dd.
    private func readChunk(_ path: String, _ index: Int) throws -> ProcessResult {
        try run("dd", ["if=\(path)", "bs=\(Self.chunk)", "skip=\(index)", "count=1", "status=none"])
    }

    private func errorLines(_ mounted: MountedBundle) -> [String] {
        mounted.logLines().filter { !$0.contains(" info: ") }
    }

    /// The inode number the mount serves `path` with.
    private func inode(_ mounted: MountedBundle, _ path: String) throws -> String {
        try check("stat", ["-c", "%i", mounted.path(path)]).output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Flips one byte at `byte` of chunk `chunk` of `big`, mounts, and
    /// checks that exactly that chunk fails, once logged.
    private func checkDamagedChunk(_ chunk: Int, byte: UInt64, file: StaticString = #filePath, line: UInt = #line) throws {
        let offset = try BundleSurgery.offset(ofChunk: UInt64(chunk), byte: byte, ofFile: "big", in: bundle, keyFile: key)
        try BundleSurgery.flipByte(at: offset, in: bundle)
        let mounted = try mount(bundle, keyFile: key)

        let cat = try run("cat", [mounted.path("big")])
        XCTAssertEqual(cat.status, 1, cat.summary, file: file, line: line)
        XCTAssertTrue(cat.errorOutput.contains("Input/output error"), cat.errorOutput, file: file, line: line)
        // Whatever cat printed before the error is correct plaintext.
        let want = (0..<Self.bigSize).map { UInt8($0 % 251) }
        XCTAssertLessThanOrEqual(cat.stdout.count, chunk * Self.chunk, file: file, line: line)
        XCTAssertEqual(cat.stdout, Array(want[0..<min(cat.stdout.count, want.count)]), file: file, line: line)

        let errors = errorLines(mounted)
        XCTAssertEqual(errors.count, 1, "log: \(mounted.logLines())", file: file, line: line)
        let logged = errors.first ?? ""
        XCTAssertTrue(logged.contains("chunk \(chunk) of inode \(try inode(mounted, "big")) "), logged, file: file, line: line)
        XCTAssertFalse(logged.contains("big"), "a file name in the log: \(logged)", file: file, line: line)

        // Every other chunk of the file still reads, and correctly.
        let chunks = (Self.bigSize + Self.chunk - 1) / Self.chunk
        for index in 0..<chunks where index != chunk {
            let result = try readChunk(mounted.path("big"), index)
            XCTAssertEqual(result.status, 0, "chunk \(index): \(result.summary)", file: file, line: line)
            let range = (index * Self.chunk)..<min((index + 1) * Self.chunk, Self.bigSize)
            XCTAssertEqual(result.stdout, Array(want[range]), "chunk \(index)", file: file, line: line)
        }
        // The damaged chunk fails every time, never with stale or zeroed data.
        for _ in 0..<3 {
            let again = try readChunk(mounted.path("big"), chunk)
            XCTAssertEqual(again.status, 1, again.summary, file: file, line: line)
            XCTAssertEqual(again.stdout, [], file: file, line: line)
        }
        // Other files are untouched.
        XCTAssertEqual(try check("cat", [mounted.path("other")]).output, "other file\n", file: file, line: line)
        let more = try run("cmp", ["\(source)/dir/more", mounted.path("dir/more")])
        XCTAssertEqual(more.status, 0, more.summary, file: file, line: line)
        // Still one line per damaged chunk, however often it was read.
        XCTAssertEqual(errorLines(mounted).count, 1, "log: \(mounted.logLines())", file: file, line: line)
    }

    func testDamagedChunk_ReadFailsWithEIO_MiddleOfFile() throws {
        try checkDamagedChunk(8, byte: 12345)
    }

    func testDamagedChunk_ReadFailsWithEIO_FirstByteOfFirstChunk() throws {
        try checkDamagedChunk(0, byte: 0)
    }

    func testDamagedChunk_ReadFailsWithEIO_TagOfLastPartialChunk() throws {
        // The last chunk holds 1000 bytes; its tag follows at 1000…1015.
        try checkDamagedChunk(16, byte: 1000 + 15)
    }

    func testDamagedChunk_FoundByFlippingTheMiddleOfTheBundle() throws {
        // Without the library's help: big is most of the bundle, so the
        // middle byte of the file lies in one of big's chunks.
        let size = try BundleSurgery.size(of: bundle)
        try BundleSurgery.flipByte(at: size / 2, in: bundle, mask: 0x80)
        let mounted = try mount(bundle, keyFile: key)
        let cat = try run("cat", [mounted.path("big")])
        XCTAssertEqual(cat.status, 1, cat.summary)
        XCTAssertTrue(cat.errorOutput.contains("Input/output error"), cat.errorOutput)
        let errors = errorLines(mounted)
        XCTAssertEqual(errors.count, 1, "\(mounted.logLines())")
        XCTAssertTrue(errors.first?.contains("of inode \(try inode(mounted, "big")) failed") ?? false, "\(errors)")
        XCTAssertEqual(try check("cat", [mounted.path("other")]).output, "other file\n")
    }

    // MARK: - Names in the log

    /// A file whose name holds an escape sequence, damaged in chunk 1.
    private func packDamagedSecretName() throws -> (bundle: String, name: String) {
        let name = "plan-for \u{1b}[31mQ3"
        let src = try scratch.makeDirectory("named")
        try scratch.makeDirectory("named/secret-dir")
        try scratch.write("named/secret-dir/\(name)", Array(repeating: 0x42, count: 3 * Self.chunk))
        let named = scratch.url("named.encfs")
        try packOrThrow(src, named, keyFile: key, ["--chunk-size", "64K"])
        let offset = try BundleSurgery.offset(ofChunk: 1, byte: 100, ofFile: "secret-dir/\(name)", in: named, keyFile: key)
        try BundleSurgery.flipByte(at: offset, in: named)
        return (named, name)
    }

    func testDamagedChunk_LogNamesInodeAndChunkNeverTheFileName() throws {
        let (named, name) = try packDamagedSecretName()
        let mounted = try mount(named, keyFile: key)
        let path = "secret-dir/\(name)"
        XCTAssertEqual(try readChunk(mounted.path(path), 1).status, 1)
        XCTAssertEqual(try readChunk(mounted.path(path), 0).status, 0)
        let errors = errorLines(mounted)
        XCTAssertEqual(errors.count, 1, "\(mounted.logLines())")
        let logged = errors.first ?? ""
        XCTAssertTrue(logged.contains("error: chunk 1 of inode \(try inode(mounted, path)) failed authentication"), logged)
        let log = try XCTUnwrap(mounted.logFile.flatMap { FileManager.default.contents(atPath: $0) })
        for secret in ["plan-for", "secret-dir", "\u{1b}"] {
            XCTAssertNil(String(decoding: log, as: UTF8.self).range(of: secret), "\(secret) in the log: \(logged)")
        }
    }

    func testDamagedChunk_LogNamesFlagAddsTheEscapedPath() throws {
        let (named, name) = try packDamagedSecretName()
        let mounted = try mount(named, keyFile: key, options: ["--log-names"])
        let path = "secret-dir/\(name)"
        XCTAssertEqual(try readChunk(mounted.path(path), 1).status, 1)
        let errors = errorLines(mounted)
        XCTAssertEqual(errors.count, 1, "\(mounted.logLines())")
        let logged = errors.first ?? ""
        XCTAssertTrue(logged.contains("chunk 1 of inode \(try inode(mounted, path)) "), logged)
        XCTAssertTrue(logged.hasSuffix("(secret-dir/plan-for \\x1b[31mQ3)"), logged)
        XCTAssertFalse(logged.contains("\u{1b}"), "a raw escape byte in the log: \(logged)")
    }

    func testTruncatedBundle_MountRefused() throws {
        let size = try BundleSurgery.size(of: bundle)
        try BundleSurgery.truncate(bundle, to: size - 1)
        let mnt = try scratch.makeDirectory("mnt")
        addTeardownBlock { MountedBundle.unmount(mountpoint: mnt, foreground: nil) }
        let result = try run(try Tools.mount(), [bundle, mnt, "--key-file", key])
        XCTAssertEqual(result.status, 1, result.summary)
        XCTAssertEqual(result.errorLines.count, 1, result.errorOutput)
        XCTAssertTrue(result.errorOutput.hasPrefix("encfs-mount: error: "), result.errorOutput)
        XCTAssertTrue(result.errorOutput.contains("truncated"), result.errorOutput)
        XCTAssertTrue(result.errorOutput.contains(bundle), result.errorOutput)
        XCTAssertFalse(MountTable.isMounted(mnt))
    }

    func testExtendedBundle_MountRefused() throws {
        let size = try BundleSurgery.size(of: bundle)
        try BundleSurgery.truncate(bundle, to: size + 1)
        let mnt = try scratch.makeDirectory("mnt")
        addTeardownBlock { MountedBundle.unmount(mountpoint: mnt, foreground: nil) }
        let result = try run(try Tools.mount(), [bundle, mnt, "--key-file", key])
        XCTAssertEqual(result.status, 1, result.summary)
        XCTAssertEqual(result.errorLines.count, 1, result.errorOutput)
        XCTAssertTrue(result.errorOutput.contains("extended"), result.errorOutput)
        XCTAssertFalse(MountTable.isMounted(mnt))
    }

    func testDamagedIndex_MountRefused() throws {
        let layout = try BundleSurgery.layout(of: bundle)
        try BundleSurgery.flipByte(at: layout.indexStart + layout.indexLength / 2, in: bundle)
        let mnt = try scratch.makeDirectory("mnt")
        addTeardownBlock { MountedBundle.unmount(mountpoint: mnt, foreground: nil) }
        let result = try run(try Tools.mount(), [bundle, mnt, "--key-file", key])
        XCTAssertEqual(result.status, 1, result.summary)
        XCTAssertEqual(result.errorLines.count, 1, result.errorOutput)
        XCTAssertTrue(result.errorOutput.contains("index"), result.errorOutput)
        XCTAssertFalse(MountTable.isMounted(mnt))
    }

    func testDamagedHeader_MountRefused() throws {
        // Every byte of the header is covered: magic, version, the fixed
        // fields, the key slot, the header MAC.
        let layout = try BundleSurgery.layout(of: bundle)
        let mnt = try scratch.makeDirectory("mnt")
        addTeardownBlock { MountedBundle.unmount(mountpoint: mnt, foreground: nil) }
        let pristine = try check("cat", [bundle]).stdout
        for offset in stride(from: UInt64(0), to: layout.headerLength, by: 7) {
            try BundleSurgery.flipByte(at: offset, in: bundle)
            let result = try run(try Tools.mount(), [bundle, mnt, "--key-file", key])
            XCTAssertEqual(result.status, 1, "byte \(offset): \(result.summary)")
            XCTAssertEqual(result.errorLines.count, 1, "byte \(offset): \(result.errorOutput)")
            XCTAssertTrue(result.errorOutput.hasPrefix("encfs-mount: error: "), result.errorOutput)
            XCTAssertFalse(MountTable.isMounted(mnt), "byte \(offset) mounted")
            if MountTable.isMounted(mnt) { MountedBundle.unmount(mountpoint: mnt, foreground: nil) }
            try BundleSurgery.flipByte(at: offset, in: bundle)
        }
        XCTAssertEqual(try check("cat", [bundle]).stdout, pristine)
    }
}
