import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `encfs-inspect info|ls|cat|verify` on a bundle of the mixed source tree
/// (every entry kind, non-UTF-8 names, times before 1970 and after 2100):
/// `info` shows the header without a key and the contents with one, as text
/// and as JSON; `ls` matches the source tree byte for byte; `cat` streams a
/// multi-MiB file and follows symlinks inside the bundle; `verify` names
/// exactly the file and chunks a flipped byte damaged.
final class InspectTests: KeyTestCase {
    private var source = ""
    private var key = ""
    private var host: Identity?
    private var bundle = ""
    static let chunkSize = 16384

    override func setUpWithError() throws {
        try super.setUpWithError()
        source = scratch.url("src")
        let tree = try python(SourceTrees.mixed, [source])
        guard tree.status == 0 else { throw SubprocessError(tree.summary) }
        key = try makeRawKey()
        let host = try keygenIdentity("host.key")
        self.host = host
        bundle = scratch.url("b.encfs")
        // 16 KiB chunks, so that the chunk size shown is not the default.
        assertSuccess(try pack(source, bundle, ["--key-file", key, "--recipient", host.recipient, "--chunk-size", "16K", "-q"]))
    }

    /// Facts about the source tree computed by Python: counts below the
    /// root, total file bytes, and the number of chunks of 16 KiB.
    private func sourceFacts() throws -> (files: Int, directories: Int, symlinks: Int, bytes: Int, chunks: Int) {
        let script = #"""
import os, stat, sys
root, cs = os.fsencode(sys.argv[1]), int(sys.argv[2])
files = dirs = links = size = chunks = 0
for dirpath, dirnames, filenames in os.walk(root):
    for name in dirnames + filenames:
        st = os.lstat(os.path.join(dirpath, name))
        if stat.S_ISLNK(st.st_mode): links += 1
        elif stat.S_ISDIR(st.st_mode): dirs += 1
        else:
            files += 1; size += st.st_size; chunks += (st.st_size + cs - 1) // cs
print(files, dirs, links, size, chunks)
"""#
        let numbers = try python(script, [source, String(Self.chunkSize)]).output
            .split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        guard numbers.count == 5 else { throw SubprocessError("source facts: \(numbers)") }
        return (numbers[0], numbers[1], numbers[2], numbers[3], numbers[4])
    }

    // MARK: - info

    func testInfo_WithoutKey_ShowsHeaderOnly() throws {
        let host = try XCTUnwrap(host)
        let result = try inspect(["info", bundle])
        XCTAssertEqual(result.status, 0, result.summary)
        let lines = result.output.split(separator: "\n").map(String.init)
        let size = try BundleSurgery.size(of: bundle)
        XCTAssertTrue(lines.contains("format version: 1"), result.output)
        XCTAssertTrue(lines.contains("chunk size:     16384 (16.0 KiB)"), result.output)
        XCTAssertTrue(lines.contains { $0.hasPrefix("bundle size:    \(size) (") }, result.output)
        XCTAssertTrue(lines.contains("key slots:      2"), result.output)
        let slotLines = lines.filter { $0.hasPrefix("  ") }.map { $0.split(separator: " ").map(String.init) }
        XCTAssertEqual(slotLines.map { $0.first ?? "" }, ["raw-key", "x25519"], result.output)
        // The recipient slot shows the fingerprint encfs-keygen printed.
        XCTAssertTrue(slotLines.contains(["x25519", host.fingerprint]), result.output)
        // Nothing from the encrypted index without a key.
        for field in ["files:", "directories:", "symlinks:", "plaintext:", "created:"] {
            XCTAssertFalse(result.output.contains(field), "\(field) shown without a key")
        }
    }

    func testInfo_WithKey_AddsCountsAndPlaintextSize() throws {
        let host = try XCTUnwrap(host)
        let facts = try sourceFacts()
        for arguments in [["--key-file", key], ["--identity", host.key]] {
            let result = try inspect(["info", bundle] + arguments)
            XCTAssertEqual(result.status, 0, result.summary)
            let lines = result.output.split(separator: "\n").map(String.init)
            XCTAssertTrue(lines.contains("format version: 1"), result.output)
            XCTAssertTrue(lines.contains("key slots:      2"), result.output)
            XCTAssertTrue(lines.contains("files:          \(facts.files)"), result.output)
            XCTAssertTrue(lines.contains("directories:    \(facts.directories)"), result.output)
            XCTAssertTrue(lines.contains("symlinks:       \(facts.symlinks)"), result.output)
            XCTAssertTrue(lines.contains { $0.hasPrefix("plaintext:      \(facts.bytes) (") }, result.output)
            XCTAssertTrue(lines.contains { $0.wholeMatch(of: /created: +\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ/) != nil }, result.output)
        }
    }

    func testInfoJSON_ParsesWithPythonAndHasTheFields() throws {
        let host = try XCTUnwrap(host)
        let facts = try sourceFacts()
        // Python's json module parses the output and checks the fields.
        let script = #"""
import calendar, json, subprocess, sys, time
with_key = sys.argv[1] == "key"
d = json.loads(subprocess.run(sys.argv[2:], check=True, stdout=subprocess.PIPE).stdout)
assert isinstance(d, dict), d
assert d["format_version"] == 1, d
assert d["chunk_size"] == 16384, d
assert isinstance(d["bundle_size"], int), d
assert d["verified"] is with_key, d
assert [s["kind"] for s in d["slots"]] == ["raw-key", "x25519"], d
for field in ["files", "directories", "symlinks", "plaintext_bytes", "created"]:
    assert (field in d) == with_key, (field, d)
if with_key:
    created = calendar.timegm(time.strptime(d["created"], "%Y-%m-%dT%H:%M:%SZ"))
    assert abs(created - time.time()) < 3600, d["created"]
print(json.dumps(d, sort_keys=True))
"""#
        let inspectTool = try Tools.inspect()
        let headerOnly = try python(script, ["header", inspectTool, "info", bundle, "--json"])
        XCTAssertEqual(headerOnly.status, 0, headerOnly.summary)
        let withKey = try python(script, ["key", inspectTool, "info", bundle, "--json", "--identity", host.key])
        XCTAssertEqual(withKey.status, 0, withKey.summary)

        let header = try info(bundle)
        XCTAssertEqual(header["bundle_size"] as? Int, Int(try BundleSurgery.size(of: bundle)))
        let slots = try slots(bundle)
        XCTAssertEqual(slots.last, Slot(kind: "x25519", fingerprint: host.fingerprint))
        let full = try info(bundle, ["--key-file", key])
        XCTAssertEqual(full["files"] as? Int, facts.files)
        XCTAssertEqual(full["directories"] as? Int, facts.directories)
        XCTAssertEqual(full["symlinks"] as? Int, facts.symlinks)
        XCTAssertEqual(full["plaintext_bytes"] as? Int, facts.bytes)
    }

    // MARK: - ls

    /// What `encfs-inspect ls` should print for the source tree, computed by
    /// Python from `lstat`: names sorted by bytes, `-l` as `mode size
    /// mtime(UTC, ns) name [-> target]` (directories show size 4096), `-R`
    /// breadth first with `./dir:` headers; names and targets escaped
    /// (control characters and bytes that are not UTF-8 as \xNN, a
    /// backslash doubled), decoded here by Python's strict UTF-8.
    private func expectedListing(long: Bool, recursive: Bool, path: String = "") throws -> [UInt8] {
        let script = #"""
import os, stat, sys, time
root, long, recursive, start = os.fsencode(sys.argv[1]), sys.argv[2] == "1", sys.argv[3] == "1", os.fsencode(sys.argv[4])
out = []
def shown(b):
    text, i = [], 0
    while i < len(b):
        ch = None
        for n in (1, 2, 3, 4):
            try:
                ch = b[i:i + n].decode("utf-8")
                break
            except UnicodeDecodeError:
                pass
        if ch is None:
            text.append("\\x%02x" % b[i]); i += 1; continue
        c = ord(ch)
        if c < 0x20 or 0x7f <= c <= 0x9f: text.append("".join("\\x%02x" % x for x in ch.encode()))
        elif ch == "\\": text.append("\\\\")
        else: text.append(ch)
        i += n
    return "".join(text).encode()
def describe(path, name):
    st = os.lstat(path)
    line = b""
    if long:
        size = 4096 if stat.S_ISDIR(st.st_mode) else st.st_size
        s, ns = divmod(st.st_mtime_ns, 10**9)
        t = time.gmtime(s)
        stamp = "%04d-%02d-%02d %02d:%02d:%02d.%09d" % (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, ns)
        line += ("%s %12d %s " % (stat.filemode(st.st_mode), size, stamp)).encode()
    line += shown(name)
    if long and stat.S_ISLNK(st.st_mode):
        line += b" -> " + shown(os.readlink(path))
    out.append(line + b"\n")
def children(rel):
    full = os.path.join(root, rel) if rel else root
    return [(os.path.join(rel, n) if rel else n, n) for n in sorted(os.listdir(full))]
if recursive:
    queue, first = [start], True
    while queue:
        rel = queue.pop(0)
        if not first: out.append(b"\n")
        first = False
        out.append((b"./" + shown(rel) if rel else b".") + b":\n")
        for child, name in children(rel):
            describe(os.path.join(root, child), name)
            if stat.S_ISDIR(os.lstat(os.path.join(root, child)).st_mode): queue.append(child)
else:
    for child, name in children(start):
        describe(os.path.join(root, child), name)
sys.stdout.buffer.write(b"".join(out))
"""#
        let result = try python(script, [source, long ? "1" : "0", recursive ? "1" : "0", path])
        guard result.status == 0 else { throw SubprocessError(result.summary) }
        return result.stdout
    }

    func testLs_MatchesSourceTree() throws {
        let host = try XCTUnwrap(host)
        for (long, recursive) in [(false, false), (true, false), (false, true), (true, true)] {
            let flags = (long ? ["-l"] : []) + (recursive ? ["-R"] : [])
            let result = try inspect(["ls"] + flags + [bundle, "--identity", host.key])
            XCTAssertEqual(result.status, 0, result.summary)
            let expected = try expectedListing(long: long, recursive: recursive)
            XCTAssertTrue(result.stdout == expected,
                          "ls \(flags) differs:\n\(result.output)\n--- expected:\n\(String(decoding: expected, as: UTF8.self))")
        }
        // A subdirectory, and a file.
        let sub = try inspect(["ls", "-l", "-R", bundle, "d1", "--key-file", key])
        XCTAssertTrue(sub.stdout == (try expectedListing(long: true, recursive: true, path: "d1")), sub.output)
        let file = try inspect(["ls", bundle, "one-chunk", "--key-file", key])
        XCTAssertEqual(file.output, "one-chunk\n", file.summary)
    }

    func testLs_NonUTF8NamesShownEscaped() throws {
        // The directory name b"bad-dir-\xc3\x28" goes in through printf, and
        // its one child b"inner\x80" comes out as text, never raw bytes.
        let result = try sh(#"exec "$1" ls "$2" "$(printf 'bad-dir-\303\050')" --key-file "$3""#,
                            [try Tools.inspect(), bundle, key])
        XCTAssertEqual(result.status, 0, result.summary)
        XCTAssertEqual(result.output, #"inner\x80"# + "\n")
        let root = try inspect(["ls", bundle, "--key-file", key])
        XCTAssertTrue(root.output.split(separator: "\n").contains(#"bad-\xff\xfe-utf8"#), root.output)
        XCTAssertTrue(root.output.split(separator: "\n").contains(#"bad-dir-\xc3("#), root.output)
    }

    // MARK: - cat

    func testCat_MultiMiBFileEqualsSource() throws {
        let want = try XCTUnwrap(FileManager.default.contents(atPath: "\(source)/many-chunks"))
        XCTAssertGreaterThan(want.count, 2 << 20)
        let result = try inspect(["cat", bundle, "many-chunks", "--key-file", key])
        XCTAssertEqual(result.status, 0, result.summary)
        XCTAssertEqual(result.stdout.count, want.count)
        XCTAssertTrue(result.stdout == Array(want), "cat many-chunks differs from the source")
        XCTAssertEqual(result.stderr, [])
        for name in ["empty", "one-byte", "chunk-plus-one", "ünïcödé-dir/ファイル", "d1/nested/deeper/chunky"] {
            let cat = try inspect(["cat", bundle, name, "--key-file", key])
            let expected = try XCTUnwrap(FileManager.default.contents(atPath: "\(source)/\(name)"))
            XCTAssertTrue(cat.status == 0 && cat.stdout == Array(expected), "\(name): \(cat.summary)")
        }
    }

    func testCat_FollowsSymlinksInsideTheBundle() throws {
        // Also a link to a directory in the middle of the path (link-dir -> d1).
        let cases = [("link-rel", "one-chunk"), ("d1/nested/link-up", "many-chunks"),
                     ("link-dir/nested/link-up", "many-chunks")]
        for (link, target) in cases {
            let result = try inspect(["cat", bundle, link, "--key-file", key])
            let expected = try XCTUnwrap(FileManager.default.contents(atPath: "\(source)/\(target)"))
            XCTAssertEqual(result.status, 0, result.summary)
            XCTAssertTrue(result.stdout == Array(expected), "cat \(link) is not \(target)")
        }
        // A link to a non-UTF-8 name.
        let bad = try inspect(["cat", bundle, "link-bad-utf8", "--key-file", key])
        let expected = try check("sh", ["-c", #"cat "$1/$(printf 'bad-\377\376-utf8')""#, "sh", source]).stdout
        XCTAssertEqual(expected.count, 33)
        XCTAssertTrue(bad.status == 0 && bad.stdout == expected, bad.summary)
    }

    func testCat_NotARegularFileFailsNamingThePath() throws {
        let cases = [("missing", "no such file"), ("d1", "is a directory"), ("link-dangling", "no such file"),
                     ("link-abs", "outside the bundle")]
        for (path, fragment) in cases {
            let result = try inspect(["cat", bundle, path, "--key-file", key])
            XCTAssertEqual(result.status, 1, "\(path): \(result.summary)")
            XCTAssertEqual(result.stdout, [], path)
            XCTAssertEqual(result.errorLines.count, 1, result.errorOutput)
            let line = result.errorLines.first ?? ""
            XCTAssertTrue(line.hasPrefix("encfs-inspect: error: "), line)
            XCTAssertTrue(line.contains(fragment), "\(path): \(line)")
            // The message names the path inside the bundle, not only the bundle.
            XCTAssertTrue(line.contains("(\(path))"), "\(path): \(line)")
        }
    }

    // MARK: - verify

    /// What verify lists for the tree's two absolute links, which it
    /// reports every time (ExternalSymlinkTests: and fails without
    /// `--allow-external-symlinks`).
    private static let externalLinks = "external symlink: link-abs -> /etc/hostname\n"
        + "external symlink: d1/link-abs-dir -> /usr\n"
    private static let allowed = " (2 symlinks point outside the bundle, allowed)"

    func testVerify_IntactBundleExitsZero() throws {
        let facts = try sourceFacts()
        let result = try inspect(["verify", bundle, "--identity", try XCTUnwrap(host).key, "--allow-external-symlinks"])
        XCTAssertEqual(result.status, 0, result.summary)
        XCTAssertEqual(result.output, Self.externalLinks + "verified \(facts.files) files, \(facts.chunks) chunks: intact\(Self.allowed)\n")
        XCTAssertEqual(result.stderr, [])
    }

    func testVerify_FlippedChunkByte_NamesExactlyThatFileAndChunk() throws {
        let facts = try sourceFacts()
        // chunky is 2 * 64 KiB + 1 bytes: 9 chunks of 16 KiB.
        let offset = try BundleSurgery.offset(ofChunk: 4, byte: 1000, ofFile: "d1/nested/deeper/chunky", in: bundle, keyFile: key)
        try BundleSurgery.flipByte(at: offset, in: bundle)
        let result = try inspect(["verify", bundle, "--key-file", key, "--allow-external-symlinks"])
        XCTAssertEqual(result.status, 1, result.summary)
        XCTAssertEqual(result.output, "damaged: d1/nested/deeper/chunky (chunks 4 of 9)\n" + Self.externalLinks
                       + "verified \(facts.files) files, \(facts.chunks) chunks: 1 damaged chunks in 1 files\(Self.allowed)\n")
    }

    func testVerify_SeveralDamagedChunks_ListedAsRanges() throws {
        let facts = try sourceFacts()
        // many-chunks: 40 * 64 KiB + 4321 bytes = 161 chunks of 16 KiB.
        for chunk: UInt64 in [5, 6, 7, 160] {
            try BundleSurgery.flipByte(at: try BundleSurgery.offset(ofChunk: chunk, byte: chunk == 160 ? 4321 % 16384 + 3 : 0,
                                                                     ofFile: "many-chunks", in: bundle, keyFile: key),
                                       in: bundle)
        }
        let unicode = "ünïcödé-dir/ファイル"
        try BundleSurgery.flipByte(at: try BundleSurgery.offset(ofChunk: 0, byte: 299, ofFile: unicode, in: bundle, keyFile: key),
                                   in: bundle, mask: 0x80)
        let result = try inspect(["verify", bundle, "--key-file", key, "--allow-external-symlinks"])
        XCTAssertEqual(result.status, 1, result.summary)
        let lines = result.output.split(separator: "\n").map(String.init)
        XCTAssertEqual(Set(lines.dropLast(3)), ["damaged: many-chunks (chunks 5-7, 160 of 161)",
                                                "damaged: \(unicode) (chunks 0 of 1)"], result.output)
        XCTAssertEqual(lines.suffix(3).joined(separator: "\n") + "\n", Self.externalLinks
                       + "verified \(facts.files) files, \(facts.chunks) chunks: 5 damaged chunks in 2 files\(Self.allowed)\n")
    }

    func testVerify_DamagedIndexFails() throws {
        let layout = try BundleSurgery.layout(of: bundle)
        try BundleSurgery.flipByte(at: layout.indexStart + 5, in: bundle)
        let result = try inspect(["verify", bundle, "--key-file", key])
        XCTAssertEqual(result.status, 1, result.summary)
        XCTAssertEqual(result.errorLines.count, 1, result.errorOutput)
        XCTAssertTrue(result.errorOutput.contains("index"), result.errorOutput)
    }
}
