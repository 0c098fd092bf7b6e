@testable import EncFSCore
import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `encfs-inspect rekey --remove` revokes (security review finding 2): the
/// bundle is re-encrypted under a new content key and bundle id, so
///
/// - the removed secret no longer opens it;
/// - the old content key (which the removed holder can unwrap from any old
///   copy) authenticates neither its header nor its index, and opens none
///   of its chunks;
/// - putting the old slot, or the whole old header, back in front of the new
///   payload, even with a header MAC made under the old content key, opens
///   nothing;
/// - every kept slot is made again and opens it, and every file reads back
///   identical;
/// - a kept slot without its key is refused, naming it, and a failure
///   midway (a damaged chunk, a full disk) leaves the old file as it was
///   and nothing beside it;
/// - memory stays bounded for a 256 MiB file.
///
/// The binaries do the rekeying; the old content key is taken with the
/// library, as the removed holder would take it from an old copy.
final class RekeyRevocationTests: KeyTestCase {
    private var source = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        source = try scratch.makeDirectory("src")
        try check(Tools.python, ["-c", SourceTrees.mixed, source])
    }

    // MARK: - Helpers

    private func contents(_ path: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else { throw SubprocessError("cannot read \(path)") }
        return Array(data)
    }

    private func rawKey(_ path: String) throws -> KeyMaterial {
        .rawKey(try KeyFiles.readKeyFile(Array(path.utf8)))
    }

    /// Opens `bundle`; the mixed tree's absolute links are accepted.
    private func open(_ bundle: String, _ materials: [KeyMaterial]) throws -> BundleReader {
        try BundleReader.open(path: Array(bundle.utf8), materials: materials, options: OpenOptions(allowsExternalSymlinks: true))
    }

    /// Tries every chunk of every file of `bundle` under the file keys of
    /// `keys`, at the places `index` (an index of the same payload layout)
    /// gives.
    ///
    /// - Returns: how many chunks authenticate, and how many there are.
    private func openChunks(of bundle: String, index reader: BundleReader, keys: BundleKeys) throws -> (opened: Int, total: Int) {
        let (header, _) = try BundleReader.readHeader(path: Array(bundle.utf8))
        let source = try FileByteSource(path: Array(bundle.utf8))
        let layout = header.layout
        let codec = try ChunkCodec(bundleID: keys.bundleID)
        var sealed = [UInt8](repeating: 0, count: Int(layout.sealedChunkSize))
        var plain = [UInt8](repeating: 0, count: Int(layout.chunkSize))
        var counts = (opened: 0, total: 0)
        for position in 0..<reader.index.count {
            let entry = try reader.index.entry(at: position)
            guard entry.kind == .file else { continue }
            try entry.withFileID { fileID in
                let key = try keys.fileKey(fileID: fileID)
                for chunk in 0..<layout.chunkCount(forPlaintextSize: entry.fileSize) {
                    let count = Int(layout.sealedSize(ofChunk: chunk, plaintextSize: entry.fileSize))
                    let at = UInt64(header.headerLength) + entry.payloadOffset + layout.ciphertextOffset(ofChunk: chunk)
                    let opened = try sealed.withUnsafeMutableBytes { s in
                        let slice = UnsafeMutableRawBufferPointer(rebasing: s[0..<count])
                        guard try source.read(into: slice, atOffset: at) == count else { return false }
                        return try plain.withUnsafeMutableBytes { p in
                            try codec.open(key: key, fileID: fileID, chunk: chunk,
                                           last: layout.isLastChunk(chunk, plaintextSize: entry.fileSize),
                                           sealed: UnsafeRawBufferPointer(slice),
                                           into: UnsafeMutableRawBufferPointer(rebasing: p[0..<(count - Int(ChunkLayout.overhead))]))
                        }
                    }
                    counts.total += 1
                    if opened { counts.opened += 1 }
                }
            }
        }
        return counts
    }

    /// Asserts that `encfs-inspect cat BUNDLE one-chunk` with `arguments`
    /// fails with one error line containing `fragment`.
    private func assertCatFails(_ bundle: String, _ arguments: [String], _ fragment: String,
                                file: StaticString = #filePath, line: UInt = #line) throws {
        let result = try inspect(["cat", bundle, "one-chunk"] + arguments)
        XCTAssertEqual(result.status, 1, result.summary, file: file, line: line)
        XCTAssertEqual(result.stdout, [], file: file, line: line)
        XCTAssertEqual(result.errorLines.count, 1, result.errorOutput, file: file, line: line)
        XCTAssertTrue(result.errorOutput.contains(fragment), result.errorOutput, file: file, line: line)
    }

    private func assertCatReads(_ bundle: String, _ arguments: [String], file: StaticString = #filePath, line: UInt = #line) throws {
        let result = try inspect(["cat", bundle, "many-chunks"] + arguments)
        XCTAssertEqual(result.status, 0, result.summary, file: file, line: line)
        XCTAssertTrue(result.stdout == (try contents("\(source)/many-chunks")), "many-chunks differs", file: file, line: line)
    }

    /// A bundle with five slots (raw key to remove, raw key to keep,
    /// passphrase at N = 2^14, X25519 and RSA recipients), its removal
    /// already run: opened with the kept raw key, the others given back.
    private struct Revoked {
        let bundle: String
        let old: String
        let removed: String
        let kept: String
        let passphrase: String
        let host: Identity
        let rsa: Identity
        let removedFingerprint: String
        let rekeyOutput: String
    }

    private func packAndRemove() throws -> Revoked {
        let removed = try makeRawKey("removed.key")
        let kept = try makeRawKey("kept.key")
        let passphrase = try makePassphraseFile()
        let host = try keygenIdentity("host.key")
        let rsa = try opensslRSA("rsa.pem")
        let bundle = scratch.url("b.encfs")
        assertSuccess(try pack(source, bundle, ["--key-file", removed, "--key-file", kept, "--passphrase-file", passphrase,
                                                "--scrypt-log-n", "14", "--recipient", host.recipient, "--recipient", rsa.recipient, "-q"]))
        chmod(bundle, 0o640)
        let old = try scratch.write("old-copy.encfs", try contents(bundle))
        let fingerprint = try slots(bundle)[0].fingerprint
        let result = try inspect(["rekey", bundle, "--key-file", kept, "--remove", fingerprint, "--add-passphrase-file", passphrase,
                                  "--add-recipient", host.recipient, "--add-recipient", rsa.recipient])
        XCTAssertEqual(result.status, 0, result.summary)
        return Revoked(bundle: bundle, old: old, removed: removed, kept: kept, passphrase: passphrase, host: host, rsa: rsa,
                       removedFingerprint: fingerprint, rekeyOutput: result.output)
    }

    // MARK: - (a), (d), (e): the removed secret is out, the others in, the content intact

    func testRemove_RemovedSecretNoLongerOpens_KeptSlotsOpen_TreeIdentical_NewBundleID() throws {
        let r = try packAndRemove()
        XCTAssertTrue(r.rekeyOutput.hasPrefix("rekeyed: 0 slots added, 1 removed, 4 carried over, 4 now; "
                                              + "re-encrypted under a new content key and bundle id:"), r.rekeyOutput)
        let oldSlots = try slots(r.old)
        let newSlots = try slots(r.bundle)
        XCTAssertEqual(newSlots.map(\.kind), ["raw-key", "passphrase", "x25519", "rsa"], "\(newSlots)")
        XCTAssertEqual(newSlots[0], oldSlots[1], "the kept raw key's slot keeps its key id")
        XCTAssertNotEqual(newSlots[1].fingerprint, oldSlots[2].fingerprint, "a re-made passphrase slot has a new salt")
        XCTAssertEqual(newSlots[2], Slot(kind: "x25519", fingerprint: r.host.fingerprint))
        XCTAssertEqual(newSlots[3], Slot(kind: "rsa", fingerprint: r.rsa.fingerprint))
        let info = try inspect(["info", r.bundle])
        XCTAssertTrue(info.output.contains("scrypt N=2^14 r=8 p=1"), "the re-made passphrase slot keeps its cost: \(info.output)")

        // (a) The removed key opens neither the file nor a mount.
        try assertCatFails(r.bundle, ["--key-file", r.removed], "wrong key")
        let refusedAt = try scratch.makeDirectory("refused")
        addTeardownBlock { MountedBundle.unmount(mountpoint: refusedAt, foreground: nil) }
        let refused = try run(try Tools.mount(), [r.bundle, refusedAt, "--key-file", r.removed])
        XCTAssertEqual(refused.status, 1, refused.summary)
        XCTAssertTrue(refused.errorOutput.contains("wrong key"), refused.errorOutput)
        XCTAssertFalse(MountTable.isMounted(refusedAt))

        // (d) Every kept secret opens it; the tree reads back identical.
        // Symlinks compared as links: the tree has dangling and absolute ones
        // (served as stored only when asked).
        let mounted = try mount(r.bundle, keyArguments: ["--identity", r.host.key], options: ["--allow-external-symlinks"])
        let diff = try run("diff", ["-r", "--no-dereference", source, mounted.mountpoint])
        XCTAssertEqual(diff.status, 0, diff.output + diff.summary)
        unmount(mounted)
        for arguments in [["--key-file", r.kept], ["--passphrase-file", r.passphrase], ["--identity", r.rsa.key]] {
            try assertCatReads(r.bundle, arguments)
        }
        let verify = try inspect(["verify", r.bundle, "--passphrase-file", r.passphrase, "--allow-external-symlinks"])
        XCTAssertEqual(verify.status, 0, verify.summary)

        // (e) New bundle id; no 16-byte block of the old payload is left.
        let old = try contents(r.old)
        let new = try contents(r.bundle)
        XCTAssertNotEqual(new[16..<32], old[16..<32], "the bundle id did not change")
        let oldPayload = old[Int(try BundleSurgery.layout(of: r.old).headerLength)...]
        let newPayload = new[Int(try BundleSurgery.layout(of: r.bundle).headerLength)...]
        XCTAssertEqual(newPayload.count, oldPayload.count, "the payload layout changed")
        let oldBlocks = Set(stride(from: oldPayload.startIndex, to: oldPayload.endIndex - 15, by: 16).map { Array(old[$0..<($0 + 16)]) })
        let shared = stride(from: newPayload.startIndex, to: newPayload.endIndex - 15, by: 16).filter { oldBlocks.contains(Array(new[$0..<($0 + 16)])) }
        XCTAssertEqual(shared.count, 0, "16-byte blocks of the old payload are still in the new one")

        // The file keeps its mode; the old copy still opens with the
        // removed key (the documented limit: revocation covers the new file).
        var st = stat()
        XCTAssertEqual(stat(r.bundle, &st), 0)
        XCTAssertEqual(st.st_mode & 0o7777, 0o640)
        try assertCatReads(r.old, ["--key-file", r.removed])
    }

    // MARK: - (b) The old content key opens nothing of the new bundle

    func testRemove_OldContentKeyAuthenticatesNothing_DecryptsNoChunk() throws {
        let r = try packAndRemove()
        let oldReader = try open(r.old, [try rawKey(r.removed)])
        let newReader = try open(r.bundle, [try rawKey(r.kept)])
        let oldKey = oldReader.keys.contentKey
        let oldID = oldReader.header.bundleID
        let newID = newReader.header.bundleID
        XCTAssertNotEqual(newReader.keys.contentKey, oldKey, "the content key did not change")
        XCTAssertNotEqual(newID, oldID, "the bundle id did not change")

        // The header MAC.
        let (newHeader, _) = try BundleReader.readHeader(path: Array(r.bundle.utf8))
        XCTAssertThrowsError(try newHeader.authenticate(contentKey: oldKey)) { error in
            guard case BundleError.headerAuthenticationFailed = error else { return XCTFail("\(error)") }
        }
        XCTAssertThrowsError(try BundleReader.open(path: Array(r.bundle.utf8), contentKey: oldKey))

        // The index, under the old key with either bundle id in its
        // derivation and associated data.
        for id in [oldID, newID] {
            let keys = try BundleKeys(contentKey: oldKey, bundleID: id)
            let header = BundleHeader(bundleID: id, layout: newHeader.layout, slots: newHeader.slots,
                                      payloadLength: newHeader.payloadLength, indexOffset: newHeader.indexOffset,
                                      indexLength: newHeader.indexLength)
            let length = Int(newHeader.indexLength) - 16
            let start = UInt64(newHeader.headerLength) + newHeader.indexOffset
            let tag = try contents(r.bundle)[(Int(start) + length)...]
            XCTAssertThrowsError(try Array(tag).withUnsafeBytes { t in
                try IndexPages.sealed(source: try FileByteSource(path: Array(r.bundle.utf8)), start: start, length: length, tag: t,
                                      key: keys.indexKey, nonce: IndexBuilder.zeroNonce, aad: IndexBuilder.associatedData(header),
                                      cacheBytes: IndexPages.minimumCacheBytes)
            }, "the index opened under the old content key") { error in
                guard case BundleError.corruptIndex = error else { return XCTFail("\(error)") }
            }
        }

        // Every chunk, under file keys from the old content key with either
        // bundle id (file ids are the old index's, which the holder has).
        // The same check opens every chunk with the right keys: it would
        // see a chunk that still opened.
        XCTAssertEqual(try openChunks(of: r.old, index: oldReader, keys: oldReader.keys).opened,
                       try openChunks(of: r.old, index: oldReader, keys: oldReader.keys).total)
        let right = try openChunks(of: r.bundle, index: oldReader, keys: newReader.keys)
        XCTAssertGreaterThan(right.total, 100)
        XCTAssertEqual(right.opened, right.total, "the new keys do not open the new chunks at the old offsets")
        for id in [oldID, newID] {
            let attempt = try openChunks(of: r.bundle, index: oldReader, keys: try BundleKeys(contentKey: oldKey, bundleID: id))
            XCTAssertEqual(attempt.opened, 0, "chunks of the new bundle open under the old content key")
        }
    }

    // MARK: - (c) Header surgery

    /// The removed slot spliced back into the new header, the old header
    /// put in front of the new payload, and headers forged with the old
    /// content key (valid MAC, a slot for the removed key): none opens.
    func testRemove_OldSlotOrHeaderWrittenBack_DoesNotOpen() throws {
        let r = try packAndRemove()
        let old = try contents(r.old)
        let new = try contents(r.bundle)
        let (oldHeader, _) = try BundleReader.readHeader(path: Array(r.old.utf8))
        let (newHeader, _) = try BundleReader.readHeader(path: Array(r.bundle.utf8))
        let payload = Array(new[newHeader.headerLength...])
        let removedMaterial = try rawKey(r.removed)

        // 1. The old slot's bytes appended to the new slots (slot count and
        //    header length fixed up, the new MAC kept).
        let oldSlot = try XCTUnwrap(oldHeader.slots.first { $0.fingerprint == r.removedFingerprint })
        var spliced = Array(new[0..<(newHeader.headerLength - 32)])
        spliced += [oldSlot.kindCode, 0, UInt8(oldSlot.body.count & 0xFF), UInt8(oldSlot.body.count >> 8)] + oldSlot.body
        spliced += new[(newHeader.headerLength - 32)..<newHeader.headerLength]
        spliced[33] += 1
        let splicedLength = UInt32(spliced.count)
        for i in 0..<4 { spliced[12 + i] = UInt8(truncatingIfNeeded: splicedLength >> (8 * UInt32(i))) }
        // 2. The whole old header in front of the new payload.
        let oldInFront = Array(old[0..<oldHeader.headerLength]) + payload
        // 3, 4. A header forged by the removed holder: a slot for the
        //    removed key wrapping the old content key, MAC under the old
        //    content key, with the new and with the old bundle id.
        let oldKey = try open(r.old, [removedMaterial]).keys.contentKey
        guard case .rawKey(let removedKey) = removedMaterial else { return XCTFail("not a raw key") }
        var forged: [(String, [UInt8])] = []
        for (name, id) in [("forged-new-id", newHeader.bundleID), ("forged-old-id", oldHeader.bundleID)] {
            let slot = try KeySlot.rawKey(wrapping: oldKey, with: removedKey, bundleID: id)
            let header = BundleHeader(bundleID: id, layout: newHeader.layout, slots: [slot] + newHeader.slots,
                                      payloadLength: newHeader.payloadLength, indexOffset: newHeader.indexOffset,
                                      indexLength: newHeader.indexLength)
            forged.append((name, try header.serialized(keys: try BundleKeys(contentKey: oldKey, bundleID: id)) + payload))
        }

        for (name, bytes, expected) in [("spliced", spliced, "corrupted bundle header"), ("old-header", oldInFront, "corrupted index")]
            + forged.map({ ($0.0, $0.1, "corrupted index") }) {
            let path = try scratch.write("\(name).encfs", bytes)
            XCTAssertThrowsError(try open(path, [removedMaterial]), name) { error in
                guard let e = error as? BundleError else { return XCTFail("\(name): \(error)") }
                XCTAssertTrue(e.message.hasPrefix(expected), "\(name): \(e.message)")
            }
            try assertCatFails(path, ["--key-file", r.removed], expected)
        }
    }

    // MARK: - Kept slots need their keys

    func testRemove_KeptSlotsWithoutTheirKey_RefusedNamingThem_FileUnchanged() throws {
        let removed = try makeRawKey("removed.key")
        let kept = try makeRawKey("kept.key")
        let passphrase = try makePassphraseFile()
        let host = try keygenIdentity("host.key")
        let bundle = scratch.url("b.encfs")
        assertSuccess(try pack(source, bundle, ["--key-file", removed, "--key-file", kept, "--passphrase-file", passphrase,
                                                "--scrypt-log-n", "14", "--recipient", host.recipient, "-q"]))
        let slots = try slots(bundle)
        let typo = try makePassphraseFile("typo", "not the passphrase")
        let before = try snapshot(scratch.path)
        // Opened with the key being removed; of the others only a mistyped
        // passphrase is given back.
        let result = try inspect(["rekey", bundle, "--key-file", removed, "--remove", slots[0].fingerprint,
                                  "--add-passphrase-file", typo])
        XCTAssertEqual(result.status, 1, result.summary)
        XCTAssertEqual(result.errorLines.count, 2, result.errorOutput)
        XCTAssertEqual(result.errorLines.first, "encfs-inspect: error: no secret or public key given for kept key slots "
                       + "raw-key \(slots[1].fingerprint), passphrase \(slots[2].fingerprint), x25519 \(host.fingerprint): "
                       + "removing a slot re-encrypts under a new content key, which every kept slot must wrap again (\(bundle))")
        XCTAssertTrue(result.errorLines.last?.hasPrefix("hint: give each with --add-key-file, --add-passphrase-file or --add-recipient")
                      ?? false, result.errorOutput)
        XCTAssertEqual(result.stdout, [])
        assertUnchanged(before, try snapshot(scratch.path), "a refused rekey")

        // Adding the removed key back is refused too.
        let back = try inspect(["rekey", bundle, "--key-file", kept, "--remove", slots[0].fingerprint, "--add-key-file", removed])
        XCTAssertEqual(back.status, 1, back.summary)
        XCTAssertTrue(back.errorOutput.contains("opens the raw-key slot \(slots[0].fingerprint) being removed"), back.errorOutput)
        assertUnchanged(before, try snapshot(scratch.path), "a refused rekey")

        // Given everything (the kept key twice: opening and to add), it
        // goes through with one slot per holder.
        let done = try inspect(["rekey", bundle, "--key-file", kept, "--remove", slots[0].fingerprint, "--add-key-file", kept,
                                "--add-passphrase-file", passphrase, "--add-recipient", host.recipient])
        XCTAssertEqual(done.status, 0, done.summary)
        XCTAssertEqual(try self.slots(bundle).map(\.kind), ["raw-key", "passphrase", "x25519"])
        try assertCatReads(bundle, ["--identity", host.key])
        try assertCatFails(bundle, ["--key-file", removed], "wrong key")

        // Opened with the passphrase, which makes its own slot again.
        let again = try inspect(["rekey", bundle, "--passphrase-file", passphrase, "--remove", host.fingerprint, "--add-key-file", kept])
        XCTAssertEqual(again.status, 0, again.summary)
        XCTAssertEqual(try self.slots(bundle).map(\.kind), ["raw-key", "passphrase"])
        try assertCatReads(bundle, ["--passphrase-file", passphrase])
        try assertCatReads(bundle, ["--key-file", kept])
        try assertCatFails(bundle, ["--identity", host.key], "wrong key")
    }

    // MARK: - (f) Failure midway

    /// A damaged chunk in the last file: the rekey fails after most of the
    /// payload is written, naming the chunk; the old file is byte for byte
    /// as it was and nothing is left beside it.
    func testRemove_DamagedChunkMidway_FailsOldFileUntouched_NothingLeft() throws {
        let removed = try makeRawKey("removed.key")
        let kept = try makeRawKey("kept.key")
        let bundle = scratch.url("out/b.encfs")
        _ = try scratch.makeDirectory("out")
        assertSuccess(try pack(source, bundle, ["--key-file", removed, "--key-file", kept, "-q"]))
        // The last file in data order is the one whose chunks end last.
        let reader = try open(bundle, [try rawKey(kept)])
        var last: (path: String, entry: IndexEntry)?
        for position in 0..<reader.index.count {
            let entry = try reader.index.entry(at: position)
            if entry.kind == .file, entry.fileSize > 3 * 8192, entry.payloadOffset >= (last?.entry.payloadOffset ?? 0) {
                last = (String(decoding: try reader.index.path(of: entry), as: UTF8.self), entry)
            }
        }
        let victim = try XCTUnwrap(last)
        let at = try BundleSurgery.offset(ofChunk: 2, byte: 5, ofFile: victim.path, in: bundle, keyFile: kept)
        var bytes = try contents(bundle)
        bytes[Int(at)] ^= 0x40
        _ = try scratch.write("out/b.encfs", bytes)
        let before = try snapshot(scratch.path)

        let result = try inspect(["rekey", bundle, "--key-file", kept, "--remove", try slots(bundle)[0].fingerprint])
        XCTAssertEqual(result.status, 1, result.summary)
        XCTAssertEqual(result.errorLines, ["encfs-inspect: error: chunk 2 of entry \(victim.entry.position) failed authentication (\(bundle))",
                                           "hint: the bundle is damaged and was left as it was; encfs-inspect verify lists the damaged files"])
        XCTAssertEqual(result.stdout, [])
        assertUnchanged(before, try snapshot(scratch.path), "a rekey that failed midway")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch.url("out")), ["b.encfs"])
    }

    /// The disk fills while the new file is written: `No space left on
    /// device`, the old file untouched, and the space free again.
    func testRemove_DiskFullMidway_FailsOldFileUntouched_SpaceFreed() throws {
        guard getuid() == 0 else { throw XCTSkip("mounting a small tmpfs needs root") }
        let disk = try scratch.makeDirectory("small-disk")
        addTeardownBlock {
            if (try? Subprocess.run("umount", [disk]))?.status != 0 { _ = try? Subprocess.run("umount", ["-l", disk]) }
        }
        try check("mount", ["-t", "tmpfs", "-o", "size=16m,mode=0755", "tmpfs", disk])
        let big = try scratch.makeDirectory("big")
        try check(Tools.python, ["-c", "import os,sys; open(sys.argv[1],'wb').write(os.urandom(10 << 20))", "\(big)/data"])
        let removed = try makeRawKey("removed.key")
        let kept = try makeRawKey("kept.key")
        let bundle = "\(disk)/b.encfs"
        assertSuccess(try pack(big, bundle, ["--key-file", removed, "--key-file", kept, "-q"]))
        let before = try snapshot(disk)
        let freeBefore = try check("stat", ["-f", "-c", "%f", disk]).output

        let result = try inspect(["rekey", bundle, "--key-file", kept, "--remove", try slots(bundle)[0].fingerprint])
        XCTAssertEqual(result.status, 1, result.summary)
        XCTAssertEqual(result.errorLines.count, 1, result.errorOutput)
        XCTAssertTrue(result.errorOutput.hasPrefix("encfs-inspect: error: "), result.errorOutput)
        XCTAssertTrue(result.errorOutput.contains("No space left on device"), result.errorOutput)
        assertUnchanged(before, try snapshot(disk), "a rekey that ran out of space")
        XCTAssertEqual(try check("stat", ["-f", "-c", "%f", disk]).output, freeBefore, "the partial file still takes space")
        try assertReads(bundle, file: "data", keys: [removed, kept], expected: try contents("\(big)/data"))
    }

    /// `bundle` opens with each of `keys` and reads `file` whole.
    private func assertReads(_ bundle: String, file: String, keys: [String], expected: [UInt8], line: UInt = #line) throws {
        for key in keys {
            let result = try inspect(["cat", bundle, file, "--key-file", key])
            XCTAssertEqual(result.status, 0, result.summary, line: line)
            XCTAssertTrue(result.stdout == expected, "\(file) differs", line: line)
        }
    }

    // MARK: - (g) Bounded memory

    /// A 256 MiB file: the rekey's peak RSS (the only child of a Python
    /// wrapper, `RUSAGE_CHILDREN`) stays far below the file size, and the
    /// file reads back identical under the kept key.
    func testRemove_256MiBFile_PeakMemoryBounded() throws {
        let big = try scratch.makeDirectory("big")
        let size = 256 << 20
        try check(Tools.python, ["-c", """
            import os, sys
            with open(sys.argv[1], 'wb') as f:
                for _ in range(int(sys.argv[2]) >> 20): f.write(os.urandom(1 << 20))
            """, "\(big)/data", String(size)])
        let removed = try makeRawKey("removed.key")
        let kept = try makeRawKey("kept.key")
        let bundle = scratch.url("big.encfs")
        assertSuccess(try pack(big, bundle, ["--key-file", removed, "--key-file", kept, "-q"], timeout: 600))
        let wrapper = """
            import resource, subprocess, sys, time
            start = time.monotonic()
            r = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            sys.stderr.buffer.write(r.stderr)
            sys.stdout.buffer.write(r.stdout)
            print("peak-rss-kib %d seconds %.2f" % (resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, time.monotonic() - start))
            sys.exit(r.returncode)
            """
        let result = try python(wrapper, [try Tools.inspect(), "rekey", bundle, "--key-file", kept,
                                          "--remove", try slots(bundle)[0].fingerprint], timeout: 600)
        XCTAssertEqual(result.status, 0, result.summary)
        let fields = try XCTUnwrap(result.outputLines.last.map { String(decoding: $0, as: UTF8.self).split(separator: " ") })
        let peakKiB = try XCTUnwrap(fields.count == 4 ? Int(fields[1]) : nil, result.output)
        report("rekey --remove of a \(size >> 20) MiB file: peak RSS \(peakKiB / 1024) MiB (\(peakKiB) KiB), \(fields[3]) s")
        XCTAssertLessThan(peakKiB, 64 << 10, "peak RSS \(peakKiB) KiB for a \(size >> 20) MiB file")

        let digest = try sh(#""$1" cat "$2" data --key-file "$3" | sha256sum"#, [try Tools.inspect(), bundle, kept], timeout: 600)
        XCTAssertEqual(String(digest.output.prefix(64)), try sha256("\(big)/data"))
        let refused = try inspect(["info", bundle, "--key-file", removed])
        XCTAssertEqual(refused.status, 1, refused.summary)
    }
}
