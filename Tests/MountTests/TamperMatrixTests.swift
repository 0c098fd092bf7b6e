import EncFSCore
import Foundation
import XCTest
import SharedTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The tamper matrix: one real bundle — 4 KiB chunks; files of six chunks
/// (the last partial), two full chunks, two chunks of which the second holds
/// one byte, 100 bytes, one byte and none; symlinks; nested and empty
/// directories — with a raw-key, a passphrase (scrypt N = 2^14) and an
/// X25519 recipient slot, damaged in several hundred ways: one byte flipped
/// in every region (each fixed header field, each slot field, the header
/// MAC, every chunk body and tag, the index, the last byte), cut at many
/// lengths, and extended.
///
/// Oracle, for every variant and every secret tried: damage outside a chunk
/// makes the open fail with a `BundleError`; damage inside chunk k of a
/// file opens, lists exactly the original tree, and fails exactly chunk k
/// of that file with `corruptChunk` while every other read returns exactly
/// the original bytes. Never other bytes, never another error.
///
/// The whole matrix runs through the EncFS library (`BundleReader`, the
/// code the mount daemon serves from); a stratified subset of 20 runs
/// through real `encfs-mount` mounts read with `cat`.
final class TamperMatrixTests: ToolTestCase {
    /// Replay a run with `ENCFS_TAMPER_SEED=N`.
    static let seed: UInt64 = ProcessInfo.processInfo.environment["ENCFS_TAMPER_SEED"].flatMap { UInt64($0) } ?? 0x7A3D_2024

    static let chunkSize = 4096
    /// Regular files and their sizes (content is seeded random bytes).
    static let files: [(String, Int)] = [
        ("big", 5 * chunkSize + 1000), ("exact", 2 * chunkSize), ("small", 100), ("one", 1), ("empty", 0),
        ("d/nested/leaf", chunkSize + 1),
    ]
    static let symlinks: [(String, String)] = [("link", "big"), ("d/nested/up", "../../small")]

    private var bundle = ""
    private var keyFile = ""
    private var passphraseFile = ""
    private var identityFile = ""
    private var pristine: [UInt8] = []
    private var contents: [String: [UInt8]] = [:]
    private var map: BundleRegions?

    override func setUpWithError() throws {
        try super.setUpWithError()
        let source = try scratch.makeDirectory("src")
        try scratch.makeDirectory("src/d/nested")
        try scratch.makeDirectory("src/d/empty-dir")
        var generator = SeededGenerator(seed: Self.seed)
        for (path, size) in Self.files {
            let bytes = generator.bytes(size)
            contents[path] = bytes
            try scratch.write("src/\(path)", bytes)
        }
        for (path, target) in Self.symlinks {
            try FileManager.default.createSymbolicLink(atPath: scratch.url("src/\(path)"), withDestinationPath: target)
        }
        keyFile = try makeKeyFile()
        passphraseFile = try scratch.write("passphrase", Array("tamper matrix passphrase\n".utf8), mode: 0o600)
        identityFile = scratch.url("identity")
        try check(try Tools.keygen(), ["-o", identityFile])
        bundle = scratch.url("pristine.encfs")
        let result = try pack(source, bundle, ["--key-file", keyFile, "--passphrase-file", passphraseFile,
                                               "--recipient", identityFile + ".pub", "--scrypt-log-n", "14",
                                               "--chunk-size", "4K", "--quiet"])
        guard result.status == 0 else { throw SubprocessError(result.summary) }
        pristine = try check("cat", [bundle]).stdout
        map = try BundleRegions(bundle: bundle, materials: [try keyMaterial()])
    }

    // MARK: - Secrets

    private func keyMaterial() throws -> KeyMaterial { .rawKey(try KeyFiles.readKeyFile(Array(keyFile.utf8))) }
    private func passphraseMaterial() throws -> KeyMaterial {
        .passphrase(try KeyFiles.readPassphraseFile(Array(passphraseFile.utf8)))
    }
    private func identityMaterial() throws -> KeyMaterial { .identity(try KeyFiles.readIdentityFile(Array(identityFile.utf8))) }

    // MARK: - Reading through the library

    /// Every entry as one line: path, kind, mode, size, mtime, symlink target.
    private func listing(_ reader: BundleReader) throws -> [String] {
        let index = reader.index
        return try (0..<index.count).map { position in
            let entry = try index.entry(at: position)
            var line = "\(String(decoding: try index.path(of: entry), as: UTF8.self)) \(entry.kind) \(String(entry.mode, radix: 8)) "
            let size = entry.kind == .directory ? UInt64(entry.children.count)
                : entry.kind == .symlink ? UInt64(entry.targetLength) : entry.fileSize
            line += "\(size) \(entry.mtimeSeconds).\(entry.mtimeNanoseconds)"
            if entry.kind == .symlink {
                line += try " -> " + index.withSymlinkTarget(of: entry) { String(decoding: $0, as: UTF8.self) }
            }
            return line
        }
    }

    /// Reads every file of `reader` chunk by chunk, whole, and across a
    /// chunk boundary at an odd offset, checking every byte returned.
    ///
    /// - Returns: the chunks that failed, as `path#chunk`, and a list of
    ///   violations (wrong bytes, another error, a failure outside the
    ///   range read).
    private func readEverything(_ reader: BundleReader) -> (failed: Set<String>, violations: [String]) {
        var failed = Set<String>()
        var violations: [String] = []
        let cs = UInt64(Self.chunkSize)
        for (path, want) in contents {
            guard let entry = try? reader.index.resolve(path: Array(path.utf8)), entry.kind == .file else {
                violations.append("\(path): missing from the index")
                continue
            }
            guard entry.fileSize == UInt64(want.count) else {
                violations.append("\(path): size \(entry.fileSize), want \(want.count)")
                continue
            }
            guard let key = try? reader.fileKey(for: entry) else {
                violations.append("\(path): no file key")
                continue
            }
            let size = UInt64(want.count)
            var reads: [(offset: UInt64, count: UInt64)] = stride(from: UInt64(0), to: size, by: Int(cs)).map { ($0, min(cs, size - $0)) }
            reads.append((0, size + 10))
            if size > cs / 2 { reads.append((cs / 2 + 3, 2 * cs)) }
            reads.append((size, 10))
            for read in reads {
                var buffer = [UInt8](repeating: 0xEE, count: Int(read.count))
                do {
                    let n = try buffer.withUnsafeMutableBytes { try reader.read(entry, key: key, fromOffset: read.offset, into: $0) }
                    let expected = read.offset >= size ? [] : Array(want[Int(read.offset)..<Int(min(size, read.offset + read.count))])
                    if n != expected.count || Array(buffer[0..<n]) != expected {
                        violations.append("\(path): read(\(read.count) at \(read.offset)) returned \(n) bytes that differ from the original")
                    }
                } catch BundleError.corruptChunk(let position, let chunk) {
                    let first = read.offset / cs
                    let last = (min(size, read.offset + read.count) - 1) / cs
                    if position != entry.position || chunk < first || chunk > last {
                        violations.append("\(path): read(\(read.count) at \(read.offset)) blamed entry \(position) chunk \(chunk)")
                    }
                    failed.insert("\(path)#\(chunk)")
                } catch {
                    violations.append("\(path): read(\(read.count) at \(read.offset)) threw \(error)")
                }
            }
        }
        return (failed, violations)
    }

    /// Whether `error` is a clear refusal: a `BundleError` with a message.
    private func isClearRefusal(_ error: Error) -> Bool {
        guard let error = error as? BundleError else { return false }
        if case .io = error { return false }
        return !error.message.isEmpty
    }

    // MARK: - The matrix through the library

    func testTamperMatrix_EveryVariantIsRefusedOrReadsOriginalBytesOrCorruptChunk() throws {
        let map = try XCTUnwrap(map)
        let pristineReader = try BundleReader.open(path: Array(bundle.utf8), materials: [try keyMaterial()])
        let baseline = try listing(pristineReader)
        // The pristine bundle reads back exactly the source.
        let clean = readEverything(pristineReader)
        XCTAssertEqual(clean.failed, [])
        XCTAssertEqual(clean.violations, [])
        XCTAssertEqual(Set(pristineReader.header.slots.map(\.kindName)), ["raw-key", "passphrase", "x25519"])

        let variants = TamperVariant.matrix(for: map, seed: Self.seed)
        let secrets: [(String, KeyMaterial)] = [("raw key", try keyMaterial()), ("identity", try identityMaterial())]
        let passphrase = try passphraseMaterial()
        let path = scratch.url("variant.encfs")
        var outcomes: [String: Int] = [:]
        var opens = 0
        var chunkReads = 0
        // Opens and reads run in this process: a hang would never end the test.
        let watchdog = Watchdog(limit: 120)
        defer { watchdog.stop() }
        for variant in variants {
            watchdog.tick(variant.name)
            try scratch.write("variant.encfs", variant.apply(to: pristine))
            var tried = secrets
            // One scrypt run costs ~50 ms: the passphrase is tried on its own
            // slot and on the MAC (the other header bytes are tried with the
            // raw key and the identity, which reach the same checks).
            if ["passphrase slot", "header MAC"].contains(variant.category) {
                tried.append(("passphrase", passphrase))
            }
            for (secretName, material) in tried {
                opens += 1
                let reader: BundleReader
                do {
                    reader = try BundleReader.open(path: Array(path.utf8), materials: [material])
                } catch {
                    XCTAssertTrue(isClearRefusal(error), "\(variant.name), \(secretName): unclear error \(error)")
                    XCTAssertTrue(variant.refusesOpen, "\(variant.name), \(secretName): chunk damage refused the open: \(error)")
                    outcomes["refused: \(Self.caseName(error))", default: 0] += 1
                    continue
                }
                XCTAssertFalse(variant.refusesOpen, "\(variant.name), \(secretName): opened")
                XCTAssertEqual(try listing(reader), baseline, "\(variant.name), \(secretName): the tree changed")
                let result = readEverything(reader)
                chunkReads += 1
                XCTAssertEqual(result.violations, [], "\(variant.name), \(secretName)")
                switch variant.part {
                case .chunkBody(let file, let chunk)?, .chunkTag(let file, let chunk)?:
                    XCTAssertEqual(result.failed, ["\(file)#\(chunk)"], "\(variant.name), \(secretName): wrong chunks failed")
                default:
                    XCTAssertEqual(result.failed, [], "\(variant.name), \(secretName)")
                }
                outcomes["opened, one chunk EIO", default: 0] += 1
            }
        }
        let flips = variants.filter { if case .flip = $0.change { true } else { false } }.count
        let cuts = variants.filter { if case .truncate = $0.change { true } else { false } }.count
        let byCategory = Dictionary(grouping: variants, by: \.category).mapValues(\.count)
        report("seed \(Self.seed): \(variants.count) variants (\(flips) byte flips, \(cuts) truncations, "
               + "\(variants.count - flips - cuts) extensions) of a \(map.size)-byte bundle in \(map.regions.count) regions, "
               + "\(opens) opens")
        report("by region: " + byCategory.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        report("outcomes: " + outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        XCTAssertGreaterThan(variants.count, 500)
        XCTAssertGreaterThan(chunkReads, 50, "too few variants reached the chunk check")
    }

    private static func caseName(_ error: Error) -> String {
        guard let error = error as? BundleError else { return "\(type(of: error))" }
        let text = "\(error)"
        return String(text.prefix { $0 != "(" })
    }

    // MARK: - A subset through real mounts

    func testTamperMatrix_MountedSubset_RefusedOrReadsOriginalBytesOrEIO() throws {
        let map = try XCTUnwrap(map)
        let all = TamperVariant.matrix(for: map, seed: Self.seed)
        // Two per category, picked with the seed: 20 variants.
        var generator = SeededGenerator(seed: Self.seed ^ 0xA5A5)
        var picked: [TamperVariant] = []
        for category in Set(all.map(\.category)).sorted() {
            picked += all.filter { $0.category == category }.shuffled(using: &generator).prefix(2)
        }
        XCTAssertEqual(picked.count, 20)
        var refused = 0
        var mounted = 0
        for (number, variant) in picked.enumerated() {
            let path = try scratch.write("mounted-\(number).encfs", variant.apply(to: pristine))
            var secret = ["--key-file", keyFile]
            if variant.category == "passphrase slot" { secret = ["--passphrase-file", passphraseFile] }
            if variant.category == "x25519 slot" { secret = ["--identity", identityFile] }
            if variant.refusesOpen {
                let mnt = try scratch.makeDirectory("mnt-\(number)")
                addTeardownBlock { MountedBundle.unmount(mountpoint: mnt, foreground: nil) }
                let result = try run(try Tools.mount(), [path, mnt] + secret, timeout: 60)
                XCTAssertEqual(result.status, 1, "\(variant.name): \(result.summary)")
                XCTAssertEqual(result.errorLines.count, 1, "\(variant.name): \(result.errorOutput)")
                XCTAssertTrue(result.errorOutput.hasPrefix("encfs-mount: error: "), "\(variant.name): \(result.errorOutput)")
                XCTAssertFalse(MountTable.isMounted(mnt), "\(variant.name) mounted")
                refused += 1
                continue
            }
            let damaged: (path: String, chunk: UInt64)
            switch variant.part {
            case .chunkBody(let file, let chunk)?, .chunkTag(let file, let chunk)?: damaged = (file, chunk)
            default: preconditionFailure("internal error: only chunk damage lets a bundle open")
            }
            let mount = try self.mount(path, keyArguments: secret)
            try checkMountedReads(mount, damaged: damaged.path, chunk: damaged.chunk, variant: variant)
            unmount(mount)
            mounted += 1
        }
        report("mounted subset: \(picked.count) variants, \(refused) refused by encfs-mount, \(mounted) mounted and read")
    }

    /// Reads every file and symlink of a mounted variant: the damaged file
    /// fails with EIO after a correct prefix, everything else is exact.
    private func checkMountedReads(_ mount: MountedBundle, damaged: String, chunk: UInt64, variant: TamperVariant,
                                   file: StaticString = #filePath, line: UInt = #line) throws {
        for (path, want) in contents.sorted(by: { $0.key < $1.key }) {
            let cat = try run("cat", [mount.path(path)])
            if path == damaged {
                XCTAssertEqual(cat.status, 1, "\(variant.name): \(path) read whole", file: file, line: line)
                XCTAssertTrue(cat.errorOutput.contains("Input/output error"), "\(variant.name): \(cat.errorOutput)", file: file, line: line)
                XCTAssertLessThanOrEqual(cat.stdout.count, Int(chunk) * Self.chunkSize, "\(variant.name)", file: file, line: line)
            } else {
                XCTAssertEqual(cat.status, 0, "\(variant.name): \(cat.summary)", file: file, line: line)
            }
            XCTAssertEqual(cat.stdout, Array(want.prefix(cat.stdout.count)), "\(variant.name): \(path) returned other bytes", file: file, line: line)
            if cat.status == 0 { XCTAssertEqual(cat.stdout.count, want.count, "\(variant.name): \(path)", file: file, line: line) }
        }
        for (path, target) in Self.symlinks {
            XCTAssertEqual(try check("readlink", [mount.path(path)]).output, target + "\n", file: file, line: line)
        }
        let listing = try check("find", [mount.mountpoint, "-mindepth", "1", "-printf", "%P %y\n"]).output
        let source = try check("find", [scratch.url("src"), "-mindepth", "1", "-printf", "%P %y\n"]).output
        XCTAssertEqual(listing.split(separator: "\n").sorted(), source.split(separator: "\n").sorted(), file: file, line: line)
        let errors = mount.logLines().filter { !$0.contains(" info: ") }
        XCTAssertEqual(errors.count, 1, "\(variant.name): \(mount.logLines())", file: file, line: line)
        XCTAssertTrue(errors.first?.contains("chunk \(chunk) ") ?? false, "\(errors)", file: file, line: line)
        // Inode and chunk, never the name (see --log-names).
        let inode = try check("stat", ["-c", "%i", mount.path(damaged)]).output.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertTrue(errors.first?.contains("chunk \(chunk) of inode \(inode) ") ?? false, "\(errors)", file: file, line: line)
    }
}
