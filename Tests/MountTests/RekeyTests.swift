import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `encfs-inspect rekey`: added recipients, keys and passphrases open the
/// bundle, and adding keeps the payload (everything after the header)
/// byte-identical; removed slots no longer open it, and removing
/// re-encrypts the payload under a new bundle id (`RekeyRevocationTests`
/// checks the revocation itself); the file keeps its mode, owner and
/// group; the last slot cannot be removed, and a wrong key or an unknown
/// fingerprint changes nothing.
final class RekeyTests: KeyTestCase {
    private var source = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        source = try scratch.makeDirectory("src")
        try scratch.write("src/hello.txt", Array("hello, rekey\n".utf8))
        try scratch.makeDirectory("src/sub")
        try scratch.write("src/sub/data.bin", (0..<150_000).map { UInt8(truncatingIfNeeded: $0 / 3 &+ $0) })
    }

    private func contents(_ path: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else { throw SubprocessError("cannot read \(path)") }
        return Array(data)
    }

    /// The header length H: the u32 (little-endian) at offset 12.
    private func headerLength(_ bytes: [UInt8]) -> Int {
        guard bytes.count >= 16 else { return 0 }
        return (0..<4).reduce(0) { $0 | Int(bytes[12 + $1]) << (8 * $1) }
    }

    /// Everything after the header: the chunks and the sealed index.
    private func payload(_ path: String) throws -> ArraySlice<UInt8> {
        let bytes = try contents(path)
        return bytes[headerLength(bytes)...]
    }

    private func mode(_ path: String) throws -> mode_t {
        var st = stat()
        guard stat(path, &st) == 0 else { throw SubprocessError("stat \(path)") }
        return st.st_mode & 0o7777
    }

    /// Asserts `encfs-inspect cat` with `arguments` fails with a one-line
    /// "wrong key" error that names `kinds`.
    private func assertWrongKey(_ bundle: String, _ arguments: [String], naming kinds: String,
                                file: StaticString = #filePath, line: UInt = #line) throws {
        let result = try inspect(["cat", bundle, "hello.txt"] + arguments)
        XCTAssertEqual(result.status, 1, result.summary, file: file, line: line)
        XCTAssertEqual(result.stdout, [], file: file, line: line)
        XCTAssertEqual(result.errorLines.count, 1, result.errorOutput, file: file, line: line)
        XCTAssertTrue(result.errorOutput.contains("wrong key"), result.errorOutput, file: file, line: line)
        XCTAssertTrue(result.errorOutput.contains("(the bundle has \(kinds) slots)"), result.errorOutput, file: file, line: line)
    }

    private func assertOpens(_ bundle: String, _ arguments: [String], file: StaticString = #filePath, line: UInt = #line) throws {
        let result = try inspect(["cat", bundle, "hello.txt"] + arguments)
        XCTAssertEqual(result.status, 0, result.summary, file: file, line: line)
        XCTAssertEqual(result.output, "hello, rekey\n", file: file, line: line)
    }

    /// Adding passphrase slots that would take the bundle over the total
    /// scrypt work a reader spends is refused before any work, the bundle
    /// unchanged.
    func testRekey_PassphraseSlotsOverTotalWork_RefusedBundleUnchanged() throws {
        let raw = try makeRawKey()
        let bundle = scratch.url("heavy.encfs")
        assertSuccess(try pack(source, bundle, ["--key-file", raw, "-q"]))
        let before = try contents(bundle)
        var arguments = ["rekey", bundle, "--key-file", raw, "--scrypt-log-n", "20"]
        for i in 0..<9 { arguments += ["--add-passphrase-file", try makePassphraseFile("pass-\(i)")] }
        let result = try inspect(arguments)
        XCTAssertEqual(result.status, 1, result.summary)
        XCTAssertTrue(result.errorOutput.contains("9 passphrase slots need scrypt work 75497472"), result.summary)
        XCTAssertTrue(try contents(bundle) == before, "the bundle changed")
    }

    func testRekey_AddSlots_NewSecretsOpen_PayloadIdentical_ModeKept() throws {
        let host = try keygenIdentity("host.key")
        let bundle = scratch.url("b.encfs")
        assertSuccess(try pack(source, bundle, ["--recipient", host.recipient, "-q"]))
        chmod(bundle, 0o640)
        let old = try contents(bundle)

        let rsa = try opensslRSA("rsa.pem")
        let raw = try makeRawKey()
        let passphrase = try makePassphraseFile()
        let rekeyed = try inspect(["rekey", bundle, "--identity", host.key, "--add-recipient", rsa.recipient,
                                   "--add-key-file", raw, "--add-passphrase-file", passphrase, "--scrypt-log-n", "14"])
        XCTAssertEqual(rekeyed.status, 0, rekeyed.summary)
        XCTAssertTrue(rekeyed.output.hasPrefix("rekeyed: 3 slots added, 0 removed, 4 now:"), rekeyed.output)

        let new = try contents(bundle)
        let slots = try slots(bundle)
        XCTAssertEqual(slots.map(\.kind).sorted(), ["passphrase", "raw-key", "rsa", "x25519"], "\(slots)")
        XCTAssertTrue(slots.contains(Slot(kind: "x25519", fingerprint: host.fingerprint)), "\(slots)")
        XCTAssertTrue(slots.contains(Slot(kind: "rsa", fingerprint: rsa.fingerprint)), "\(slots)")
        XCTAssertEqual(headerLength(new), headerLength(old) + 4 + 264 + 4 + 72 + 4 + 76)
        // Same bundle id, same content key: the payload is copied byte for byte.
        XCTAssertEqual(new[16..<32], old[16..<32], "bundle id changed")
        XCTAssertTrue(new[headerLength(new)...] == old[headerLength(old)...], "the payload changed")
        XCTAssertEqual(try mode(bundle), 0o640)

        let mounted = try mount(bundle, keyArguments: ["--identity", rsa.key])
        try assertSameTree(source, mounted.mountpoint)
        unmount(mounted)
        try assertOpens(bundle, ["--key-file", raw])
        try assertOpens(bundle, ["--passphrase-file", passphrase])
        try assertOpens(bundle, ["--identity", host.key])
        XCTAssertEqual(try inspect(["verify", bundle, "--key-file", raw]).status, 0)
    }

    func testRekey_RemoveSlots_RemovedSecretsNoLongerOpen() throws {
        let host = try keygenIdentity("host.key")
        let rsa = try opensslRSA("rsa.pem")
        let raw = try makeRawKey()
        let bundle = scratch.url("b.encfs")
        assertSuccess(try pack(source, bundle, ["--recipient", host.recipient, "--recipient", rsa.recipient,
                                                "--key-file", raw, "-q"]))
        chmod(bundle, 0o600)
        let original = try payload(bundle)
        let copy = try scratch.write("copy.encfs", try contents(bundle))

        // Remove the X25519 recipient, opening with the raw key and giving
        // the RSA recipient's public key back (its slot is made again for
        // the new content key); the fingerprint comes from info --json.
        let x25519 = try XCTUnwrap(try slots(bundle).first { $0.kind == "x25519" })
        XCTAssertEqual(x25519.fingerprint, host.fingerprint)
        let first = try inspect(["rekey", bundle, "--key-file", raw, "--remove", x25519.fingerprint, "--add-recipient", rsa.recipient])
        XCTAssertEqual(first.status, 0, first.summary)
        XCTAssertTrue(first.output.hasPrefix("rekeyed: 0 slots added, 1 removed, 2 carried over, 2 now; "
                                             + "re-encrypted under a new content key and bundle id:"), first.output)
        XCTAssertEqual(try slots(bundle).map(\.kind), ["raw-key", "rsa"])
        try assertWrongKey(bundle, ["--identity", host.key], naming: "raw-key, rsa")
        let mnt = try scratch.makeDirectory("refused")
        addTeardownBlock { MountedBundle.unmount(mountpoint: mnt, foreground: nil) }
        let refused = try run(try Tools.mount(), [bundle, mnt, "--identity", host.key])
        XCTAssertEqual(refused.status, 1, refused.summary)
        XCTAssertTrue(refused.errorOutput.contains("wrong key"), refused.errorOutput)
        XCTAssertFalse(MountTable.isMounted(mnt))

        // Remove the raw key (fingerprints are case-insensitive), opening with RSA.
        let rawSlot = try XCTUnwrap(try slots(bundle).first { $0.kind == "raw-key" })
        let second = try inspect(["rekey", bundle, "--identity", rsa.key, "--remove", rawSlot.fingerprint.uppercased()])
        XCTAssertEqual(second.status, 0, second.summary)
        XCTAssertEqual(try slots(bundle), [Slot(kind: "rsa", fingerprint: rsa.fingerprint)])
        try assertWrongKey(bundle, ["--key-file", raw], naming: "rsa")
        try assertWrongKey(bundle, ["--identity", host.key], naming: "rsa")

        // The remaining one still opens the same tree; every byte after the
        // header was re-encrypted (same length), under a new bundle id.
        let mounted = try mount(bundle, keyArguments: ["--identity", rsa.key])
        try assertSameTree(source, mounted.mountpoint)
        let now = try payload(bundle)
        XCTAssertEqual(now.count, original.count)
        XCTAssertFalse(now == original, "the payload was not re-encrypted")
        XCTAssertNotEqual(try contents(bundle)[16..<32], try contents(copy)[16..<32], "the bundle id did not change")
        XCTAssertEqual(try mode(bundle), 0o600)
        // As documented: a copy of the old file still opens with the old secrets.
        try assertOpens(copy, ["--identity", host.key])
        try assertOpens(copy, ["--key-file", raw])
    }

    func testRekey_ReplaceTheOnlySlot() throws {
        let raw = try makeRawKey()
        let bundle = scratch.url("b.encfs")
        assertSuccess(try pack(source, bundle, ["--key-file", raw, "-q"]))
        let original = try payload(bundle)
        let host = try keygenIdentity("host.key")
        let only = try XCTUnwrap(try slots(bundle).first)
        let result = try inspect(["rekey", bundle, "--key-file", raw, "--remove", only.fingerprint,
                                  "--add-recipient", host.recipient])
        XCTAssertEqual(result.status, 0, result.summary)
        XCTAssertTrue(result.output.hasPrefix("rekeyed: 1 slots added, 1 removed, 0 carried over, 1 now; re-encrypted"), result.output)
        XCTAssertEqual(try slots(bundle), [Slot(kind: "x25519", fingerprint: host.fingerprint)])
        try assertOpens(bundle, ["--identity", host.key])
        try assertWrongKey(bundle, ["--key-file", raw], naming: "x25519")
        XCTAssertFalse(try payload(bundle) == original, "the payload was not re-encrypted")
    }

    func testRekey_ThroughSymlink_RewritesTheTargetAndKeepsTheLink() throws {
        let raw = try makeRawKey()
        let bundle = scratch.url("real.encfs")
        assertSuccess(try pack(source, bundle, ["--key-file", raw, "-q"]))
        let original = try payload(bundle)
        _ = try scratch.makeDirectory("links")
        let link = scratch.url("links/app.encfs")
        XCTAssertEqual(symlink("../real.encfs", link), 0)
        let host = try keygenIdentity("host.key")
        let result = try inspect(["rekey", link, "--key-file", raw, "--add-recipient", host.recipient])
        XCTAssertEqual(result.status, 0, result.summary)
        var st = stat()
        XCTAssertEqual(lstat(link, &st), 0)
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFLNK, "the link was replaced by a file")
        XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: link), "../real.encfs")
        XCTAssertEqual(try slots(bundle).count, 2, "the target did not get the new slot")
        try assertOpens(bundle, ["--identity", host.key])
        try assertOpens(link, ["--identity", host.key])
        XCTAssertTrue(try payload(bundle) == original, "the payload changed")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch.url("links")), ["app.encfs"], "a temporary file was left")
    }

    func testRekey_RefusesToRemoveTheLastSlot_FileUnchanged() throws {
        let raw = try makeRawKey()
        let passphrase = try makePassphraseFile()
        let bundle = scratch.url("b.encfs")
        assertSuccess(try pack(source, bundle, ["--key-file", raw, "--passphrase-file", passphrase,
                                                "--scrypt-log-n", "14", "-q"]))
        let fingerprints = try slots(bundle).map(\.fingerprint)
        let before = try snapshot(scratch.path)
        let result = try inspect(["rekey", bundle, "--key-file", raw, "--remove", fingerprints[0], "--remove", fingerprints[1]])
        XCTAssertEqual(result.status, 1, result.summary)
        XCTAssertEqual(result.errorLines.count, 1, result.errorOutput)
        XCTAssertTrue(result.errorOutput.contains("refusing to remove the last key slot"), result.errorOutput)
        XCTAssertEqual(result.stdout, [])
        assertUnchanged(before, try snapshot(scratch.path), "rekey removing every slot")

        let single = scratch.url("single.encfs")
        assertSuccess(try pack(source, single, ["--key-file", raw, "-q"]))
        let singleBefore = try snapshot(scratch.path)
        let fingerprint = try XCTUnwrap(try slots(single).first).fingerprint
        let last = try inspect(["rekey", single, "--key-file", raw, "--remove", fingerprint])
        XCTAssertEqual(last.status, 1, last.summary)
        XCTAssertTrue(last.errorOutput.contains("refusing to remove the last key slot"), last.errorOutput)
        assertUnchanged(singleBefore, try snapshot(scratch.path), "rekey removing the last slot")
    }

    func testRekey_WrongKeyOrUnknownFingerprint_FileUnchanged() throws {
        let host = try keygenIdentity("host.key")
        let other = try keygenIdentity("other.key")
        let raw = try makeRawKey()
        let wrongRaw = try makeRawKey("wrong.key")
        let bundle = scratch.url("b.encfs")
        assertSuccess(try pack(source, bundle, ["--recipient", host.recipient, "--key-file", raw, "-q"]))
        let newcomer = try keygenIdentity("new.key")
        let before = try snapshot(scratch.path)

        let cases: [(arguments: [String], status: Int32, fragment: String)] = [
            (["--identity", other.key, "--add-recipient", newcomer.recipient], 1, "wrong key"),
            (["--key-file", wrongRaw, "--add-recipient", newcomer.recipient], 1, "wrong key"),
            (["--add-recipient", newcomer.recipient], 1, "no key given"),
            (["--key-file", raw, "--remove", "0123456789abcdef"], 1, "0123456789abcdef"),
            (["--key-file", raw, "--remove", host.fingerprint, "--remove", "fedcba9876543210"], 1, "fedcba9876543210"),
            (["--key-file", raw], 2, "rekey needs"),
        ]
        for (arguments, status, fragment) in cases {
            let result = try inspect(["rekey", bundle] + arguments)
            XCTAssertEqual(result.status, status, result.summary)
            XCTAssertEqual(result.errorLines.filter { !$0.hasPrefix("hint: ") }.count, 1, result.errorOutput)
            XCTAssertTrue(result.errorOutput.hasPrefix("encfs-inspect: error: "), result.errorOutput)
            XCTAssertTrue(result.errorOutput.contains(fragment), "\(arguments): \(result.errorOutput)")
            XCTAssertEqual(result.stdout, [])
        }
        assertUnchanged(before, try snapshot(scratch.path), "failed rekeys")
    }

    func testRekey_KeepsOwnerAndGroup() throws {
        guard geteuid() == 0 else { throw XCTSkip("needs root to give the bundle to another user") }
        let raw = try makeRawKey()
        let bundle = scratch.url("b.encfs")
        assertSuccess(try pack(source, bundle, ["--key-file", raw, "-q"]))
        // Owned by nobody:nogroup, readable by the group (as for a web server).
        guard chown(bundle, 65534, 65534) == 0 else { throw SubprocessError("chown: \(String(cString: strerror(errno)))") }
        chmod(bundle, 0o640)
        let host = try keygenIdentity("host.key")
        let result = try inspect(["rekey", bundle, "--key-file", raw, "--add-recipient", host.recipient])
        XCTAssertEqual(result.status, 0, result.summary)
        var st = stat()
        XCTAssertEqual(stat(bundle, &st), 0)
        XCTAssertEqual(st.st_uid, 65534, "owner changed")
        XCTAssertEqual(st.st_gid, 65534, "group changed")
        XCTAssertEqual(st.st_mode & 0o7777, 0o640)
        try assertOpens(bundle, ["--identity", host.key])

        // Removing a slot writes a re-encrypted file: it keeps them too.
        let rawSlot = try XCTUnwrap(try slots(bundle).first { $0.kind == "raw-key" })
        let removed = try inspect(["rekey", bundle, "--identity", host.key, "--remove", rawSlot.fingerprint])
        XCTAssertEqual(removed.status, 0, removed.summary)
        XCTAssertEqual(stat(bundle, &st), 0)
        XCTAssertEqual(st.st_uid, 65534, "owner changed by a removal")
        XCTAssertEqual(st.st_gid, 65534, "group changed by a removal")
        XCTAssertEqual(st.st_mode & 0o7777, 0o640)
        try assertOpens(bundle, ["--identity", host.key])
    }

    func testRekey_WhileMounted_MountKeepsServing() throws {
        let raw = try makeRawKey()
        let bundle = scratch.url("b.encfs")
        assertSuccess(try pack(source, bundle, ["--key-file", raw, "-q"]))
        let mounted = try mount(bundle, keyFile: raw)
        let host = try keygenIdentity("host.key")
        let result = try inspect(["rekey", bundle, "--key-file", raw, "--add-recipient", host.recipient])
        XCTAssertEqual(result.status, 0, result.summary)
        // The daemon reads the old file (replaced by rename, not rewritten in place).
        try assertSameTree(source, mounted.mountpoint)
        try assertOpens(bundle, ["--identity", host.key])
    }

    /// `encfs-rekey` is `encfs-inspect rekey` under its own name: on two
    /// copies of one bundle, the same arguments give the same exit code,
    /// stdout (`--json` and text), slots and bytes after the header when
    /// adding, and on one bundle the same refusals, word for word but for
    /// the tool's name.
    func testRekey_OwnCommandAndInspectSpelling_SameResult() throws {
        let raw = try makeRawKey()
        let host = try keygenIdentity("host.key")
        let original = scratch.url("original.encfs")
        assertSuccess(try pack(source, original, ["--key-file", raw, "--recipient", host.recipient, "-q"]))
        let viaInspect = try scratch.write("inspect.encfs", try contents(original))
        let viaRekey = try scratch.write("rekey.encfs", try contents(original))
        func both(_ arguments: [String]) throws -> (inspect: ProcessResult, rekey: ProcessResult) {
            (try inspect(["rekey", viaInspect] + arguments), try run(try Tools.rekey(), [viaRekey] + arguments))
        }

        // Adding: a raw key, as JSON; then another, as text.
        let added = try makeRawKey("added.key")
        let json = try both(["--key-file", raw, "--add-key-file", added, "--json"])
        for result in [json.inspect, json.rekey] { assertSuccess(result) }
        XCTAssertEqual(json.rekey.output, json.inspect.output)
        XCTAssertTrue(json.rekey.output.hasPrefix(#"{"added": 1, "removed": 0"#), json.rekey.output)
        XCTAssertEqual(json.rekey.stderr, json.inspect.stderr)
        let originalFingerprints = Set(try slots(original).map(\.fingerprint))
        let addedSlot = try XCTUnwrap(try slots(viaRekey).first { !originalFingerprints.contains($0.fingerprint) })
        let second = try makeRawKey("second.key")
        let text = try both(["--identity", host.key, "--add-key-file", second])
        for result in [text.inspect, text.rekey] { assertSuccess(result) }
        XCTAssertEqual(text.rekey.output, text.inspect.output)
        XCTAssertTrue(text.rekey.output.hasPrefix("rekeyed: 1 slots added, 0 removed, 4 now:"), text.rekey.output)
        XCTAssertEqual(try slots(viaRekey), try slots(viaInspect))
        XCTAssertTrue(try payload(viaRekey) == payload(original), "encfs-rekey changed the payload")
        XCTAssertTrue(try payload(viaInspect) == payload(original), "encfs-inspect rekey changed the payload")

        // Removing re-encrypts (new keys, so other bytes), with the same report.
        let removal = try both(["--key-file", raw, "--remove", addedSlot.fingerprint, "--add-recipient", host.recipient,
                                "--add-key-file", second, "--json"])
        for result in [removal.inspect, removal.rekey] { assertSuccess(result) }
        XCTAssertEqual(removal.rekey.output, removal.inspect.output)
        XCTAssertTrue(removal.rekey.output.contains(#""reencrypted": true"#), removal.rekey.output)
        XCTAssertEqual(try slots(viaRekey), try slots(viaInspect))
        try assertOpens(viaRekey, ["--identity", host.key])
        XCTAssertEqual(try inspect(["cat", viaRekey, "hello.txt", "--key-file", added]).status, 1, "the removed key still opens")

        // Refusals on one file: the same code and message; the file unchanged.
        let before = try contents(viaRekey)
        let refusals: [(arguments: [String], code: Int32)] = [
            ([], 2), (["--key-file", raw], 2), (["--key-file", raw, "--scrypt-log-n", "3", "--remove", "x"], 2),
            (["--key-file", added, "--add-key-file", raw], 1), (["--key-file", raw, "--remove", "0000000000000000"], 1),
        ]
        for (arguments, code) in refusals {
            let inspected = try inspect(["rekey", viaRekey] + arguments)
            let rekeyed = try run(try Tools.rekey(), [viaRekey] + arguments)
            XCTAssertEqual(inspected.status, code, inspected.summary)
            XCTAssertEqual(rekeyed.status, code, rekeyed.summary)
            XCTAssertEqual(rekeyed.stdout, inspected.stdout, "\(arguments)")
            let message = { (r: ProcessResult, tool: String) in r.errorLines.first.map { $0.replacingOccurrences(of: tool + ": ", with: "") } }
            XCTAssertEqual(message(rekeyed, "encfs-rekey"), message(inspected, "encfs-inspect"), "\(arguments)")
            XCTAssertNotNil(message(rekeyed, "encfs-rekey"), "\(arguments)")
            XCTAssertTrue(rekeyed.errorOutput.hasPrefix("encfs-rekey: error: "), rekeyed.errorOutput)
        }
        XCTAssertTrue(try contents(viaRekey) == before, "a refused rekey changed the file")
    }
}
