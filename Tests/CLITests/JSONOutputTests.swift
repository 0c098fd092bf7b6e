import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `--json` on encfs-pack, encfs-inspect info, ls, verify and rekey: one
/// document on stdout that Python's json module parses, numbers as
/// numbers, names that are not UTF-8 as a display string plus base64 of
/// the raw bytes, errors on stderr.
final class JSONOutputTests: ToolTestCase {
    private var source = ""
    private var bundle = ""
    private var key = ""

    /// argv: source directory. Names with a quote, a backslash, a newline,
    /// an escape byte, UTF-8 and bytes that are not UTF-8.
    static let awkwardTree = #"""
import os, sys
root = os.fsencode(sys.argv[1])
os.makedirs(os.path.join(root, b"d\xffir"), exist_ok=True)
for name, size in [(b"plain.txt", 3), (b'quote"back\\slash', 5), (b"new\nline", 7), (b"esc\x1b[31m", 11),
                   ("ünï文".encode(), 13), (b"d\xffir/bad\xfe\xfd", 17000)]:
    with open(os.path.join(root, name), "wb") as f:
        f.write(os.urandom(size))
os.symlink(b"bad\xfe\xfd", os.path.join(root, b"d\xffir/link"))
"""#

    /// argv: source directory, the output of `ls -R --json`.
    /// Checks that every entry of the source is listed once with its raw
    /// name, type and size, and nothing else.
    static let compareListing = #"""
import base64, json, os, stat, sys
root = os.fsencode(sys.argv[1])
doc = json.loads(sys.argv[2])
def raw(d, key):
    return base64.b64decode(d[key + "_base64"]) if key + "_base64" in d else d[key].encode()
listed = {}
for e in doc["entries"]:
    assert isinstance(e["size"], int) and isinstance(e["mode"], int) and isinstance(e["mtime_seconds"], int), e
    p = raw(e, "path")
    assert p not in listed, p
    assert raw(e, "name") == os.path.basename(p), e
    listed[p] = e
expected = {}
for dirpath, dirnames, filenames in os.walk(root):
    for n in dirnames + filenames:
        full = os.path.join(dirpath, n)
        expected[os.path.relpath(full, root)] = os.lstat(full)
assert set(listed) == set(expected), (sorted(listed), sorted(expected))
for p, st in expected.items():
    e = listed[p]
    kind = "symlink" if stat.S_ISLNK(st.st_mode) else "directory" if stat.S_ISDIR(st.st_mode) else "file"
    assert e["type"] == kind, (p, e)
    if kind == "file":
        assert e["size"] == st.st_size, (p, e)
        assert e["mode"] == stat.S_IMODE(st.st_mode), (p, e)
    if kind == "symlink":
        assert raw(e, "target") == os.readlink(os.path.join(root, p)), e
print(len(listed))
"""#

    override func setUpWithError() throws {
        try super.setUpWithError()
        source = try scratch.makeDirectory("src")
        assertSuccess(try python(Self.awkwardTree, [source]))
        key = try makeKeyFile()
        bundle = scratch.url("awkward.encfs")
    }

    /// Parses `stdout` as exactly one JSON document with python3 and
    /// prints `expression` evaluated over it as `d`.
    private func query(_ result: ProcessResult, _ expression: String) throws -> String {
        let script = "import json, sys\nd = json.loads(sys.argv[1])\nprint(\(expression))"
        let parsed = try python(script, [String(decoding: result.stdout, as: UTF8.self)])
        guard parsed.status == 0 else { throw SubprocessError("not one JSON document: \(result.output) (\(parsed.summary))") }
        return parsed.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func testPackJSON_SummaryIsOneDocumentWithNumbers() throws {
        let result = try pack(source, bundle, ["--key-file", key, "--json"])
        assertSuccess(result)
        XCTAssertEqual(try query(result, "[d['files'], d['directories'], d['symlinks'], d['plaintext_bytes'], d['bundle'] == sys.argv[1] or d['bundle']]"),
                       "[6, 1, 1, 17039, '\(bundle)']")
        XCTAssertEqual(try query(result, "all(isinstance(d[k], int) for k in ['bundle_bytes', 'milliseconds', 'skipped'])"), "True")
        XCTAssertEqual(try query(result, "d['signer']"), "None")
    }

    func testListJSON_EveryRawNameRoundTrips() throws {
        try packOrThrow(source, bundle, keyFile: key)
        let listing = try run(try Tools.inspect(), ["ls", "-R", "--json", bundle, "--key-file", key])
        assertSuccess(listing)
        XCTAssertEqual(listing.stderr, [])
        let compared = try python(Self.compareListing, [source, listing.output])
        assertSuccess(compared)
        XCTAssertEqual(compared.output, "8\n")
        // A name that is not UTF-8: display string and base64 both present.
        XCTAssertEqual(try query(listing, "[(e['path'], e['path_base64']) for e in d['entries'] if e['type'] == 'directory']"),
                       #"[('d\\xffir', 'ZP9pcg==')]"#)
        // Escape and newline bytes are escaped by JSON, never raw on stdout.
        XCTAssertFalse(listing.stdout.contains(0x1B))
        XCTAssertEqual(listing.stdout.filter { $0 == 0x0A }.count, 1)
    }

    func testVerifyJSON_IntactThenDamaged() throws {
        try packOrThrow(source, bundle, keyFile: key)
        let intact = try run(try Tools.inspect(), ["verify", "--json", bundle, "--key-file", key])
        assertSuccess(intact)
        XCTAssertEqual(try query(intact, "[d['intact'], d['files'], d['chunks'], d['damaged'], 'error' in d]"),
                       "[True, 6, 10, [], False]")
        let offset = try BundleSurgery.offset(ofChunk: 1, byte: 5, ofRawPath: [0x64, 0xFF] + Array("ir/bad".utf8) + [0xFE, 0xFD],
                                                 in: bundle, keyFile: key)
        try BundleSurgery.flipByte(at: offset, in: bundle)
        let damaged = try run(try Tools.inspect(), ["verify", "--json", bundle, "--key-file", key])
        XCTAssertEqual(damaged.status, 1, damaged.summary)
        XCTAssertEqual(try query(damaged, "[d['intact'], [(x['path'], x['path_base64'], x['chunks'], x['chunk_count']) for x in d['damaged']], d['error']]"),
                       #"[False, [('d\\xffir/bad\\xfe\\xfd', 'ZP9pci9iYWT+/Q==', [1], 5)], '1 damaged chunks in 1 files']"#)
    }

    func testRekeyJSON_ReportsSlots() throws {
        try packOrThrow(source, bundle, keyFile: key)
        let second = try makeKeyFile("second")
        let result = try run(try Tools.inspect(), ["rekey", bundle, "--key-file", key, "--add-key-file", second, "--json"])
        assertSuccess(result)
        XCTAssertEqual(try query(result, "[d['added'], d['removed'], d['reencrypted'], [s['kind'] for s in d['slots']], d['signature']]"),
                       "[1, 0, False, ['raw-key', 'raw-key'], None]")
    }

    func testJSON_ErrorsGoToStderrOnly() throws {
        try packOrThrow(source, bundle, keyFile: key)
        let wrong = try makeKeyFile("wrong")
        for command in ["info", "ls", "verify"] {
            let result = try run(try Tools.inspect(), [command, "--json", bundle, "--key-file", wrong])
            XCTAssertEqual(result.status, 1, result.summary)
            XCTAssertEqual(result.stdout, [], "\(command): \(result.output)")
            XCTAssertTrue(result.errorOutput.hasPrefix("encfs-inspect: error: "), result.summary)
        }
    }
}
