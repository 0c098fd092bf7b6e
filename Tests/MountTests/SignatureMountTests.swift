import CryptCore
@testable import EncFSCore
import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Security review finding 1: a bundle's origin. Anyone who has the host's
/// public key (a "recipient", safe to commit) can pack a bundle the host's
/// identity opens. With `--verify-key`, `encfs-mount` (command and daemon)
/// and `encfs-inspect` refuse, in one line, any bundle not signed by the
/// CI's key; what is refused is never mounted and no byte of it is shown.
final class SignatureMountTests: KeyTestCase {
    private var source = ""
    private var host: Identity!
    /// The CI's signing key (encfs-keygen --sign) and its `.pub`.
    private var ci = (key: "", pub: "", fingerprint: "")

    override func setUpWithError() throws {
        try super.setUpWithError()
        source = try scratch.makeDirectory("src")
        try scratch.write("src/hello.txt", Array("hello, signed world\n".utf8))
        try scratch.makeDirectory("src/sub")
        try scratch.write("src/sub/data.bin", (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 >> 8) })
        host = try keygenIdentity("host.key")
        ci = try signingKey("ci.sign")
    }

    // MARK: - Helpers

    /// `encfs-keygen --sign -o NAME`: the key, its `.pub`, and the printed
    /// fingerprint (checked against one computed with openssl).
    private func signingKey(_ name: String) throws -> (key: String, pub: String, fingerprint: String) {
        let key = scratch.url(name)
        let result = try check(try Tools.keygen(), ["--sign", "-o", key])
        try registerSecretFile(key)
        let prefix = "# verifying key fingerprint: "
        let printed = result.output.split(separator: "\n").filter { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
        XCTAssertEqual(printed.count, 1, result.output)
        XCTAssertEqual(printed.first, try signerFingerprint(ofPublicKey: key + ".pub"))
        return (key, key + ".pub", printed.first ?? "")
    }

    /// SHA-256 of the raw Ed25519 public key (the last 32 bytes of its DER
    /// SubjectPublicKeyInfo), first 8 bytes as hex, computed with openssl.
    private func signerFingerprint(ofPublicKey path: String) throws -> String {
        let result = try sh(#"openssl pkey -pubin -in "$1" -outform DER | tail -c 32 | sha256sum"#, [path])
        guard result.status == 0 else { throw SubprocessError(result.summary) }
        return String(result.output.prefix(16))
    }

    /// Packs the tree to the host's recipient, signed with `signKey` if given.
    private func packForHost(_ name: String, signKey: String?) throws -> String {
        let bundle = scratch.url(name)
        check(try pack(source, bundle, ["--recipient", host.recipient, "-q"] + (signKey.map { ["--sign-key", $0] } ?? [])))
        return bundle
    }

    private func check(_ result: ProcessResult, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(result.status, 0, result.summary, file: file, line: line)
    }

    /// `encfs-mount` that must fail: exit 1, exactly `message` as the error
    /// line (a hint line may follow), nothing mounted, nothing on stdout.
    private func assertMountRefused(_ bundle: String, _ arguments: [String], _ message: String,
                                    file: StaticString = #filePath, line: UInt = #line) throws {
        for foreground in [false, true] {
            let mountpoint = try scratch.makeDirectory(uniqueName("refused"))
            addTeardownBlock { _ = MountedBundle.unmount(mountpoint: mountpoint, foreground: nil) }
            let result = try run(try Tools.mount(), [bundle, mountpoint, "--identity", host.key] + arguments + (foreground ? ["-f"] : []),
                                 timeout: 30)
            let what = foreground ? "foreground" : "daemon"
            XCTAssertEqual(result.status, 1, "\(what): \(result.summary)", file: file, line: line)
            XCTAssertEqual(result.errorLines.first, "encfs-mount: error: \(message) (\(bundle))", "\(what)", file: file, line: line)
            XCTAssertLessThanOrEqual(result.errorLines.count, 2, "\(what): \(result.errorOutput)", file: file, line: line)
            XCTAssertTrue(result.errorLines.dropFirst().allSatisfy { $0.hasPrefix("hint: ") }, result.errorOutput, file: file, line: line)
            XCTAssertEqual(result.stdout, [], file: file, line: line)
            XCTAssertFalse(MountTable.isMounted(mountpoint), "\(what): mounted", file: file, line: line)
        }
    }

    /// `encfs-inspect ARGUMENTS` that must fail with exactly `message`.
    private func assertInspectRefused(_ arguments: [String], _ message: String, bundle: String,
                                      file: StaticString = #filePath, line: UInt = #line) throws {
        let result = try inspect(arguments)
        XCTAssertEqual(result.status, 1, result.summary, file: file, line: line)
        XCTAssertEqual(result.errorLines.first, "encfs-inspect: error: \(message) (\(bundle))", file: file, line: line)
        XCTAssertEqual(result.stdout, [], "nothing of the bundle is shown", file: file, line: line)
    }

    // MARK: - Mount

    func testMount_SignedByVerifyKey_MountsAndReads() throws {
        let bundle = try packForHost("app.bundle", signKey: ci.key)
        let stranger = try signingKey("stranger.sign")
        for foreground in [false, true] {
            // Repeatable: any one of the keys will do.
            let mounted = try mount(bundle, keyArguments: ["--identity", host.key, "--verify-key", stranger.pub, "--verify-key", ci.pub],
                                    foreground: foreground)
            try assertSameTree(source, mounted.mountpoint)
            unmount(mounted)
        }
    }

    func testMount_ForgedWithHostPublicKey_Refused() throws {
        let forged = try packForHost("forged.bundle", signKey: nil)
        // Without --verify-key it mounts: the weakness this option closes.
        let mounted = try mount(forged, keyArguments: ["--identity", host.key])
        unmount(mounted)
        try assertMountRefused(forged, ["--verify-key", ci.pub], "bundle is not signed")
    }

    /// Signed by someone else's key, made with the openssl command line
    /// (openssl keys work as signing keys too).
    func testMount_SignedByAnotherKey_RefusedNamingTheSigner() throws {
        let stranger = scratch.url("stranger.pem")
        _ = try check("openssl", ["genpkey", "-algorithm", "ed25519", "-out", stranger])
        try registerSecretFile(stranger)
        let forged = try packForHost("forged.bundle", signKey: stranger)
        _ = try check("openssl", ["pkey", "-in", stranger, "-pubout", "-out", stranger + ".pub"])
        let fingerprint = try signerFingerprint(ofPublicKey: stranger + ".pub")
        try assertMountRefused(forged, ["--verify-key", ci.pub],
                               "bundle is signed by a key not given with --verify-key (signer \(fingerprint))")
    }

    /// A holder of the content key re-seals the index (valid GCM tag,
    /// header and MAC untouched): only the signature over the index's hash
    /// notices, and only the daemon reads the index, so this proves the
    /// daemon checks the signature itself.
    func testMount_IndexResealedByKeyHolder_DaemonRefuses() throws {
        let bundle = try packForHost("app.bundle", signKey: ci.key)
        let identity = try KeyFiles.readIdentityFile(Array(host.key.utf8))
        let reader = try BundleReader.open(path: Array(bundle.utf8), materials: [.identity(identity)])
        let header = reader.header
        let start = header.headerLength + Int(header.indexOffset)
        var file = try Array(Data(contentsOf: URL(fileURLWithPath: bundle)))
        let gcm = try AESGCM()
        var plaintext = try file[start..<(start + Int(header.indexLength))].withUnsafeBytes {
            try gcm.open(key: reader.keys.indexKey, nonce: IndexBuilder.zeroNonce, aad: IndexBuilder.associatedData(header), sealed: $0)
        }.withUnsafeBytes { Array($0) }
        plaintext[BundleIndex.headerSize + 16] ^= 0x01 // the root's mtime
        let resealed = try gcm.seal(key: reader.keys.indexKey, nonce: IndexBuilder.zeroNonce, aad: IndexBuilder.associatedData(header),
                                    plaintext: SecureBytes(copying: plaintext))
        file.replaceSubrange(start..<(start + resealed.count), with: resealed)
        try Data(file).write(to: URL(fileURLWithPath: bundle))

        let plain = try mount(bundle, keyArguments: ["--identity", host.key])
        unmount(plain)
        try assertMountRefused(bundle, ["--verify-key", ci.pub],
                               "bundle signature does not verify: the header or the index is not what was signed")
    }

    /// A byte flipped in the sealed index of a signed bundle: refused with
    /// the index error (GCM comes first), nothing mounted.
    func testMount_FlippedIndexByte_Refused() throws {
        let bundle = try packForHost("app.bundle", signKey: ci.key)
        let (header, _) = try BundleReader.readHeader(path: Array(bundle.utf8))
        var file = try Array(Data(contentsOf: URL(fileURLWithPath: bundle)))
        file[header.headerLength + Int(header.indexOffset) + 40] ^= 0x01
        try Data(file).write(to: URL(fileURLWithPath: bundle))
        try assertMountRefused(bundle, ["--verify-key", ci.pub], "corrupted index: index failed authentication")
    }

    /// The signature slot of the genuine bundle spliced into a forged one
    /// whose header the forger makes again (the forger holds its content
    /// key): refused by the parent already (key commitment).
    func testMount_TransplantedSignature_Refused() throws {
        let genuine = try packForHost("genuine.bundle", signKey: ci.key)
        let forged = try packForHost("forged.bundle", signKey: nil)
        let signatureSlot = try XCTUnwrap(try BundleReader.readHeader(path: Array(genuine.utf8)).header.signatureSlot)
        let identity = try KeyFiles.readIdentityFile(Array(host.key.utf8))
        let reader = try BundleReader.open(path: Array(forged.utf8), materials: [.identity(identity)])
        let old = try Array(Data(contentsOf: URL(fileURLWithPath: forged)))
        let newHeader = try reader.header.replacingSignature(with: signatureSlot).serialized(keys: reader.keys)
        try Data(newHeader + old[reader.header.headerLength...]).write(to: URL(fileURLWithPath: forged))
        try assertMountRefused(forged, ["--verify-key", ci.pub], "bundle signature does not verify: the content key is not the one signed")
    }

    func testMount_VerifyKeyThatIsNotAnEd25519Key_Refused() throws {
        let bundle = try packForHost("app.bundle", signKey: ci.key)
        let mountpoint = try scratch.makeDirectory("mnt")
        let result = try run(try Tools.mount(), [bundle, mountpoint, "--identity", host.key, "--verify-key", host.recipient])
        XCTAssertEqual(result.status, 1, result.summary)
        XCTAssertEqual(result.errorLines, ["encfs-mount: error: unusable verifying key file: invalid key: expected an Ed25519 key, not X25519 (\(host.recipient))"])
        XCTAssertFalse(MountTable.isMounted(mountpoint))
    }

    // MARK: - Bundle id

    func testExpectBundleID_MatchMountsMismatchRefused() throws {
        let bundle = try packForHost("app.bundle", signKey: nil)
        let other = try packForHost("other.bundle", signKey: nil)
        let id = try XCTUnwrap(info(bundle)["bundle_id"] as? String)
        let otherID = try XCTUnwrap(info(other)["bundle_id"] as? String)
        XCTAssertNotNil(id.wholeMatch(of: /[0-9a-f]{32}/), id)
        XCTAssertTrue(try inspect(["info", bundle]).output.contains("bundle id:      \(id)\n"))

        let mounted = try mount(bundle, keyArguments: ["--identity", host.key, "--expect-bundle-id", id.uppercased()])
        try assertSameTree(source, mounted.mountpoint)
        unmount(mounted)
        try assertMountRefused(other, ["--expect-bundle-id", id], "bundle id is \(otherID), not the expected \(id)")
        try assertInspectRefused(["ls", other, "--identity", host.key, "--expect-bundle-id", id],
                                 "bundle id is \(otherID), not the expected \(id)", bundle: other)
        let bad = try run(try Tools.mount(), [bundle, scratch.url("mnt"), "--identity", host.key, "--expect-bundle-id", "12"])
        XCTAssertEqual(bad.status, 2, bad.summary)
        XCTAssertEqual(bad.errorLines.first, "encfs-mount: error: --expect-bundle-id must be 32 hex digits (encfs-inspect info shows the id)")
    }

    // MARK: - encfs-inspect

    func testInspect_VerifyKey_RefusesForgedAcceptsSigned() throws {
        let good = try packForHost("app.bundle", signKey: ci.key)
        let forged = try packForHost("forged.bundle", signKey: nil)
        let key = ["--identity", host.key, "--verify-key", ci.pub]
        for arguments in [["info", forged, "--verify-key", ci.pub], ["info", forged] + key, ["ls", forged] + key,
                          ["cat", forged, "hello.txt"] + key, ["verify", forged] + key] {
            try assertInspectRefused(arguments, "bundle is not signed", bundle: forged)
        }
        XCTAssertEqual(try inspect(["cat", good, "hello.txt"] + key).output, "hello, signed world\n")
        XCTAssertEqual(try inspect(["ls", good] + key).output, "hello.txt\nsub\n")
        let verify = try inspect(["verify", good] + key)
        XCTAssertEqual(verify.status, 0, verify.summary)
        XCTAssertEqual(verify.output, "verified 2 files, 26 chunks: intact\nsignature: every chunk is as signed by \(ci.fingerprint)\n")
    }

    func testInspectInfo_ShowsSignerAndChecksWithoutKey() throws {
        let good = try packForHost("app.bundle", signKey: ci.key)
        let unsigned = try packForHost("plain.bundle", signKey: nil)
        XCTAssertTrue(try inspect(["info", unsigned]).output.contains("signature:      none\n"))
        XCTAssertTrue(try inspect(["info", good]).output
            .contains("signature:      ed25519, signer \(ci.fingerprint) (not checked: give --verify-key)\n"))
        XCTAssertTrue(try inspect(["info", good, "--verify-key", ci.pub]).output
            .contains("signature:      ed25519, signer \(ci.fingerprint), verified over the header and index (give a key to check the content key too)\n"))
        XCTAssertTrue(try inspect(["info", good, "--verify-key", ci.pub, "--identity", host.key]).output
            .contains("signature:      ed25519, signer \(ci.fingerprint), verified\n"))
        let json = try info(good, ["--verify-key", ci.pub])
        let signature = try XCTUnwrap(json["signature"] as? [String: Any])
        XCTAssertEqual(signature["signer"] as? String, ci.fingerprint)
        XCTAssertEqual(signature["checked"] as? String, "header-and-index")
        XCTAssertTrue(try info(unsigned)["signature"] is NSNull)
        XCTAssertEqual((try info(good)["slots"] as? [Any])?.count, 1, "the signature is not listed as a key slot")

        // Without a key, info still hashes the sealed index: a flipped index
        // byte fails the signature (GCM needs the key).
        let (header, _) = try BundleReader.readHeader(path: Array(good.utf8))
        var file = try Array(Data(contentsOf: URL(fileURLWithPath: good)))
        file[header.headerLength + Int(header.indexOffset) + 3] ^= 0x01
        try Data(file).write(to: URL(fileURLWithPath: good))
        try assertInspectRefused(["info", good, "--verify-key", ci.pub],
                                 "bundle signature does not verify: the header or the index is not what was signed", bundle: good)
    }

    /// A holder of a slot re-seals a chunk with the right file key: the
    /// mount accepts it (chunks are authenticated under the content key,
    /// which the holder knows: the documented limit), `verify --verify-key`
    /// reports it.
    func testResealedChunk_MountServesIt_VerifyReportsIt() throws {
        let bundle = try packForHost("app.bundle", signKey: ci.key)
        let identity = try KeyFiles.readIdentityFile(Array(host.key.utf8))
        let reader = try BundleReader.open(path: Array(bundle.utf8), materials: [.identity(identity)])
        let entry = try reader.index.resolve(path: Array("sub/data.bin".utf8))
        let layout = reader.header.layout
        let evil = [UInt8](repeating: 0x45, count: Int(layout.chunkSize))
        var sealed = [UInt8](repeating: 0, count: evil.count + 16)
        let codec = try ChunkCodec(bundleID: reader.header.bundleID)
        try entry.withFileID { fileID in
            try evil.withUnsafeBytes { plain in
                try sealed.withUnsafeMutableBytes { out in
                    try codec.seal(key: reader.fileKey(for: entry), fileID: fileID, chunk: 2, last: false, plaintext: plain, into: out)
                }
            }
        }
        var file = try Array(Data(contentsOf: URL(fileURLWithPath: bundle)))
        let at = reader.header.headerLength + Int(entry.payloadOffset + layout.ciphertextOffset(ofChunk: 2))
        file.replaceSubrange(at..<(at + sealed.count), with: sealed)
        try Data(file).write(to: URL(fileURLWithPath: bundle))

        let mounted = try mount(bundle, keyArguments: ["--identity", host.key, "--verify-key", ci.pub])
        let served = try Array(Data(contentsOf: URL(fileURLWithPath: mounted.mountpoint + "/sub/data.bin")))
        XCTAssertEqual(Array(served[(2 * evil.count)..<(3 * evil.count)]), evil, "the mount serves the re-sealed chunk")
        unmount(mounted)

        let verify = try inspect(["verify", bundle, "--identity", host.key, "--verify-key", ci.pub])
        XCTAssertEqual(verify.status, 1, verify.summary)
        XCTAssertEqual(verify.output, "verified 2 files, 26 chunks: intact\nsignature: the chunks are not the ones signed by \(ci.fingerprint)\n")
        XCTAssertEqual(verify.errorLines, ["encfs-inspect: error: chunk contents differ from what the signature covers "
                                           + "(re-sealed by a holder of the content key, or damaged) (\(bundle))"])
    }

    // MARK: - rekey

    func testRekey_AddKeepsRemoveDropsWithWarningSignKeyResigns() throws {
        let bundle = try packForHost("app.bundle", signKey: ci.key)
        let raw = try makeRawKey()
        let added = try inspect(["rekey", bundle, "--identity", host.key, "--add-key-file", raw])
        XCTAssertEqual(added.status, 0, added.summary)
        XCTAssertTrue(added.output.contains("signature kept"), added.output)
        XCTAssertEqual(try inspect(["verify", bundle, "--key-file", raw, "--verify-key", ci.pub]).status, 0)

        let hostSlot = try XCTUnwrap(try slots(bundle).first { $0.kind == "x25519" })
        let removed = try inspect(["rekey", bundle, "--key-file", raw, "--remove", hostSlot.fingerprint])
        XCTAssertEqual(removed.status, 0, removed.summary)
        XCTAssertEqual(removed.errorLines.first, "encfs-inspect: warning: the bundle signature was dropped: removing a slot "
                       + "re-encrypts under a new content key and bundle id, which it does not cover (\(bundle))")
        try assertInspectRefused(["ls", bundle, "--key-file", raw, "--verify-key", ci.pub], "bundle is not signed", bundle: bundle)

        let resigned = try inspect(["rekey", bundle, "--key-file", raw, "--add-recipient", host.recipient, "--sign-key", ci.key])
        XCTAssertEqual(resigned.status, 0, resigned.summary)
        XCTAssertTrue(resigned.output.contains("signed by \(ci.fingerprint)"), resigned.output)
        let mounted = try mount(bundle, keyArguments: ["--identity", host.key, "--verify-key", ci.pub])
        try assertSameTree(source, mounted.mountpoint)
        unmount(mounted)

        // --remove with --sign-key signs the re-encrypted result at once.
        let rawSlot = try XCTUnwrap(try slots(bundle).first { $0.kind == "raw-key" })
        let both = try inspect(["rekey", bundle, "--identity", host.key, "--remove", rawSlot.fingerprint, "--sign-key", ci.key])
        XCTAssertEqual(both.status, 0, both.summary)
        XCTAssertFalse(both.errorOutput.contains("warning"), both.errorOutput)
        XCTAssertEqual(try inspect(["verify", bundle, "--identity", host.key, "--verify-key", ci.pub]).status, 0)
    }

    // MARK: - encfs-keygen --sign

    func testKeygenSign_WritesBothFilesWithModesOpenSSLReadsThem() throws {
        var st = stat()
        XCTAssertEqual(stat(ci.key, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600)
        XCTAssertEqual(stat(ci.pub, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o644)
        let text = try check("openssl", ["pkey", "-in", ci.key, "-noout", "-text"]).output
        XCTAssertTrue(text.hasPrefix("ED25519 Private-Key:"), text)
        let pubText = try check("openssl", ["pkey", "-pubin", "-in", ci.pub, "-noout", "-text"]).output
        XCTAssertTrue(pubText.hasPrefix("ED25519 Public-Key:"), pubText)
        // The .pub is the private key's public half, byte for byte as openssl writes it.
        XCTAssertEqual(try check("openssl", ["pkey", "-in", ci.key, "-pubout"]).stdout,
                       Array(try Data(contentsOf: URL(fileURLWithPath: ci.pub))))
        // A signature made with openssl from the key verifies with the .pub.
        let message = try scratch.write("message", Array("encfs".utf8))
        let signature = scratch.url("message.sig")
        _ = try check("openssl", ["pkeyutl", "-sign", "-rawin", "-inkey", ci.key, "-in", message, "-out", signature])
        _ = try check("openssl", ["pkeyutl", "-verify", "-rawin", "-pubin", "-inkey", ci.pub, "-in", message, "-sigfile", signature])

        // Not over existing files without --force.
        let again = try keygen(["--sign", "-o", ci.key])
        XCTAssertEqual(again.status, 1, again.summary)
        XCTAssertEqual(again.errorLines, ["encfs-keygen: error: refusing to overwrite an existing file (use --force) (\(ci.key))"])
        XCTAssertEqual(try keygen(["--sign", "--symmetric"]).status, 2)
    }

    /// Without -o, as for identities: the private key on stdout (usable as
    /// it is), the verifying key and its fingerprint on stderr.
    func testKeygenSign_ToStdout() throws {
        let result = try keygen(["--sign"])
        XCTAssertEqual(result.status, 0, result.summary)
        XCTAssertTrue(result.output.hasPrefix("-----BEGIN PRIVATE KEY-----\n"), result.output)
        for line in result.output.split(separator: "\n") where !line.hasPrefix("-----") { registerSecret(String(line), "stdout key") }
        XCTAssertTrue(result.errorLines.first?.hasPrefix("encfs-keygen: verifying key (fingerprint ") ?? false, result.errorOutput)
        XCTAssertTrue(result.errorOutput.contains("-----BEGIN PUBLIC KEY-----"), result.errorOutput)
        let key = try scratch.write("stdout.sign", result.stdout, mode: 0o600)
        let bundle = try packForHost("app.bundle", signKey: key)
        XCTAssertNotNil(try info(bundle)["signature"] as? [String: Any])
    }
}
