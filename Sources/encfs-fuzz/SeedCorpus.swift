import CryptCore
import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// Writes a seed corpus for every target, made from real bundles packed
/// with ``FuzzSecrets``: `encfs-fuzz seed DIR` fills `DIR/<target>/`.
///
/// Small on purpose (4 KiB chunks, files a few chunks long) so the
/// committed corpus stays well under 1 MiB and each input runs fast.
enum SeedCorpus {
    /// A source tree: relative path → file contents, or a symlink target
    /// when the path ends in `@` (the `@` is dropped), or a directory when
    /// the contents are nil.
    typealias Tree = [(path: String, contents: [UInt8]?)]

    static let trees: [(name: String, tree: Tree)] = [
        ("empty", []),
        ("one-byte", [("a", [0x61])]),
        ("mixed", [
            ("b4095", pattern(4095, 1)), ("c4096", pattern(4096, 2)), ("d4097", pattern(4097, 3)),
            ("e8199", pattern(2 * 4096 + 7, 4)), ("empty", []),
            ("d", nil), ("d/a", Array("a\n".utf8)), ("d/bb", Array("bb\n".utf8)), ("d/link@", Array("../empty".utf8)),
            ("d/sub", nil), ("d/sub2", nil), ("d/sub2/deep", Array("deep\n".utf8)),
            ("name with spaces", [0]), ("\u{00E9}t\u{00E9}", [1, 2]),
        ]),
        // Symlinks that resolve(path:followingLast:) must follow or refuse:
        // a chain, a loop, an absolute target, one up and out of the root.
        ("links", [
            ("d", nil), ("d/f", Array("f\n".utf8)), ("d/to-f@", Array("f".utf8)), ("chain@", Array("d/to-f".utf8)),
            ("loop-a@", Array("loop-b".utf8)), ("loop-b@", Array("loop-a".utf8)), ("absolute@", Array("/etc/passwd".utf8)),
            ("d/up@", Array("..".utf8)), ("d/out@", Array("../../../d".utf8)),
        ]),
    ]

    /// Text that compresses, two files of it alike (deduplicated) and one
    /// file of a pattern that does not shrink much per chunk.
    static let compressibleTree: Tree = [
        ("a.js", text(3 * 4096 + 50)), ("copy", nil), ("copy/a.js", text(3 * 4096 + 50)),
        ("noise", pattern(4096 + 3, 9)), ("small.txt", Array("small\n".utf8)),
    ]

    /// `count` bytes of words.
    private static func text(_ count: Int) -> [UInt8] {
        let words = ["chunk ", "table ", "frame ", "zstd ", "bundle\n"].map { Array($0.utf8) }
        var out: [UInt8] = []
        var i = 0
        while out.count < count {
            out += words[(i * 7 + i / 3) % words.count]
            i += 1
        }
        return Array(out[0..<count])
    }

    /// The key sets headers are made with, by name.
    static let slotSets: [(name: String, keys: [KeyMaterial], recipients: [PublicKey])] = [
        ("raw", [.rawKey(FuzzSecrets.rawKey)], []),
        ("passphrase", [.passphrase(FuzzSecrets.passphrase)], []),
        ("raw-passphrase", [.rawKey(FuzzSecrets.rawKey), .passphrase(FuzzSecrets.passphrase)], []),
        ("x25519", [], [FuzzSecrets.x25519Identity.publicKey]),
        ("rsa", [], [FuzzSecrets.rsaIdentity.publicKey]),
        ("all", [.passphrase(FuzzSecrets.passphrase), .rawKey(FuzzSecrets.rawKey)],
         [FuzzSecrets.rsaIdentity.publicKey, FuzzSecrets.x25519Identity.publicKey]),
    ]

    /// Writes the corpus under `directory`, one step per kind of seed.
    ///
    /// - Throws: `BundleError` or `CryptError` when packing or reading fails.
    static func write(to directory: String) throws {
        let scratch = try makeTemporaryDirectory()
        defer { removeTree(scratch) }
        try makeDirectory(directory)
        for target in FuzzTarget.allCases { try makeDirectory("\(directory)/\(target.rawValue)") }
        try writeServeRequestSeeds(to: "\(directory)/serve-request")
        try writeTreeSeeds(to: directory, scratch: scratch)
        try writeCompressedSeeds(to: directory, scratch: scratch)
        try writeChunkFrameSeeds(to: directory)
        try writeHeaderSeeds(to: directory, scratch: scratch)
        try writePEMSeeds(to: directory)
    }

    /// bundle and index seeds of ``trees``, each packed under `scratch`
    /// (where the header seeds find their sources after).
    private static func writeTreeSeeds(to directory: String, scratch: String) throws {
        for (name, tree) in trees {
            let source = "\(scratch)/\(name)"
            try makeTree(tree, at: source)
            // bundle: whole bundles, raw key only (what the target opens with).
            let bundle = try pack(source, keys: [.rawKey(FuzzSecrets.rawKey)], recipients: [], scratch: scratch)
            try writeFile("\(directory)/bundle/\(name).bundle", bundle)
            // index: the plaintext behind each bundle's sealed index.
            try writeFile("\(directory)/index/\(name).index", try indexInput(of: bundle, scratch: scratch))
        }
    }

    /// bundle, index and index-page seeds of format version 2.
    private static func writeCompressedSeeds(to directory: String, scratch: String) throws {
        // Format version 2: compressed text (chunk tables, frames and raw
        // chunks), and a duplicate (a shared body); the index seeds say so
        // in their framing.
        let compressible = "\(scratch)/compressible"
        try makeTree(compressibleTree, at: compressible)
        for (name, compression) in [("v2-zstd", CompressionMethod.zstd), ("v2-shared", .none)] {
            let bundle = try pack(compressible, keys: [.rawKey(FuzzSecrets.rawKey)], recipients: [], compression: compression,
                                  indexLayout: .flat, scratch: scratch)
            try writeFile("\(directory)/bundle/\(name).bundle", bundle)
            let index = try indexInput(of: bundle, scratch: scratch)
            try writeFile("\(directory)/index/\(name).index", index)
            // The same bundle with a paged index, and its record pages
            // (index-page framing: IndexPageFuzzing).
            let paged = try pack(compressible, keys: [.rawKey(FuzzSecrets.rawKey)], recipients: [], compression: compression,
                                 indexLayout: .paged, scratch: scratch)
            try writeFile("\(directory)/bundle/\(name)-paged.bundle", paged)
            let flags: UInt8 = compression == .zstd ? 1 : 0
            let pages = try RecordPage.storedRecordPages(ofFlatIndex: Array(index[9...]), chunkSizeLog2: 12)
            for (k, page) in pages.enumerated() {
                let framed = page.stored.count < page.length
                    ? [flags | 2, UInt8(truncatingIfNeeded: page.length - 1), UInt8(truncatingIfNeeded: (page.length - 1) >> 8)] + page.stored
                    : [flags] + page.stored
                try writeFile("\(directory)/index-page/\(name)-\(k + 1).page", framed)
                if page.stored.count < page.length {
                    // The same page inflated: the plain framing.
                    var plain = [UInt8](repeating: 0, count: page.length)
                    let inflated = try page.stored.withUnsafeBytes { s in
                        try plain.withUnsafeMutableBytes { try ChunkDecompressor().decompress(s, into: $0) }
                    }
                    if inflated { try writeFile("\(directory)/index-page/\(name)-\(k + 1)-plain.page", [flags] + plain) }
                    // And as a page of a bundle with fragments, whose file
                    // records the fuzzer may turn into slices.
                    if inflated, compression == .zstd {
                        try writeFile("\(directory)/index-page/\(name)-\(k + 1)-fragments.page", [flags | 4] + plain)
                    }
                }
            }
        }
    }

    /// chunk-frame seeds.
    private static func writeChunkFrameSeeds(to directory: String) throws {
        // chunk-frame: frames the compressor makes of a full and a short
        // chunk, and a bomb (a frame of 64 KiB of zeros for a 4 KiB chunk).
        let compressor = try ChunkCompressor(level: 3)
        for (name, framing, plaintext) in [("text-4k", UInt8(0), text(4096)), ("text-4k-short", UInt8(9 * 28), text(4096 - 28)),
                                           ("text-64k", UInt8(4), text(65536)), ("bomb", UInt8(0), [UInt8](repeating: 0, count: 65536))] {
            var frame = [UInt8](repeating: 0, count: plaintext.count)
            let n = plaintext.withUnsafeBytes { p in frame.withUnsafeMutableBytes { compressor.compress(p, into: $0) } } ?? 0
            try writeFile("\(directory)/chunk-frame/\(name).frame", [framing] + frame[0..<n])
        }
    }

    /// A signed bundle seed and the header seeds: every slot set, signed
    /// or not, and the crafted ones (``craftedHeaders(from:)``).
    private static func writeHeaderSeeds(to directory: String, scratch: String) throws {
        // A signed bundle, which the bundle target also opens under a signature policy.
        let signed = try pack("\(scratch)/mixed", keys: [.rawKey(FuzzSecrets.rawKey)], recipients: [], signedBy: FuzzSecrets.signingKey,
                              scratch: scratch)
        try writeFile("\(directory)/bundle/signed-mixed.bundle", signed)
        let source = "\(scratch)/one-byte"
        var headers: [String: [UInt8]] = [:]
        for (name, keys, recipients) in slotSets {
            for signer in [nil, FuzzSecrets.signingKey] {
                let bundle = try pack(source, keys: keys, recipients: recipients, signedBy: signer, scratch: scratch)
                let headerLength = Int(bundle[12]) | Int(bundle[13]) << 8 | Int(bundle[14]) << 16 | Int(bundle[15]) << 24
                headers[signer == nil ? name : "\(name)-signed"] = Array(bundle[0..<headerLength])
            }
        }
        for (name, header) in headers.merging(craftedHeaders(from: headers), uniquingKeysWith: { a, _ in a }) {
            try writeFile("\(directory)/header/\(name).header", header)
        }
    }

    /// pem seeds.
    private static func writePEMSeeds(to directory: String) throws {
        // pem: the fixed identities and their public halves, as CryptCore
        // writes them, and one input over PEMArmor's 64 KiB limit.
        for (name, key) in [("x25519", FuzzSecrets.x25519Identity), ("rsa", FuzzSecrets.rsaIdentity)] {
            try writeFile("\(directory)/pem/\(name)-private.pem", try key.pemPKCS8().withUnsafeBytes { Array($0) })
            try writeFile("\(directory)/pem/\(name)-public.pem", try key.publicKey.pem())
        }
        let oversized = Array("-----BEGIN PUBLIC KEY-----\n".utf8) + [UInt8](repeating: UInt8(ascii: "A"), count: 1 << 16)
            + Array("\n-----END PUBLIC KEY-----\n".utf8)
        try writeFile("\(directory)/pem/oversized.pem", oversized)
    }

    /// Headers no packer writes, for the branches random mutation rarely
    /// reaches (their MACs no longer match, which the parser cannot see):
    /// a low-order X25519 ephemeral key in the slot of the fixed identity,
    /// scrypt parameters refused for their work (p = 2^20) and for N ≥ 2^(16·r),
    /// and a slot of a kind this build does not know, which it must skip.
    /// Slot 1 starts at byte 64; its body at 68 (docs/FORMAT.md).
    private static func craftedHeaders(from headers: [String: [UInt8]]) -> [String: [UInt8]] {
        var crafted: [String: [UInt8]] = [:]
        if var x25519 = headers["x25519"] {
            for i in 76..<108 { x25519[i] = 0 } // the ephemeral key: all zero is a low-order point
            crafted["x25519-low-order-ephemeral"] = x25519
        }
        if var passphrase = headers["passphrase"] {
            passphrase[78] = 0x10 // p = 2^20 (u32 LE at body + 8)
            crafted["passphrase-huge-p"] = passphrase
        }
        if var passphrase = headers["passphrase"] {
            passphrase[68] = 16 // log2 N = 16 with r = 1 (u32 LE at body + 4)
            passphrase[72] = 1
            crafted["passphrase-n-too-large-for-r"] = passphrase
        }
        if var raw = headers["raw"] {
            let unknown: [UInt8] = [9, 0, 3, 0, 0xAA, 0xBB, 0xCC] // kind 9, 3-byte body
            raw.insert(contentsOf: unknown, at: raw.count - 32)
            raw[33] += 1 // slot count
            let length = UInt32(raw.count)
            for i in 0..<4 { raw[12 + i] = UInt8(truncatingIfNeeded: length >> (8 * UInt32(i))) }
            crafted["raw-and-unknown-kind"] = raw
        }
        return crafted
    }

    /// `count` bytes of a repeating pattern that differs by `seed`.
    private static func pattern(_ count: Int, _ seed: UInt8) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed) &* 7) }
    }

    /// - Parameter indexLayout: `.automatic` pages version 2 bundles; the
    ///   `index` target's seeds need the flat index (one message).
    private static func pack(_ source: String, keys: [KeyMaterial], recipients: [PublicKey], signedBy signer: SigningKey? = nil,
                             compression: CompressionMethod = .none, indexLayout: IndexLayout = .automatic,
                             scratch: String) throws -> [UInt8] {
        var options = PackOptions()
        options.compression = compression
        options.indexLayout = indexLayout
        options.signingKey = signer
        options.chunkSizeLog2 = 12
        options.keys = keys
        options.recipients = recipients
        options.scrypt = FuzzSecrets.cheapScrypt
        let destination = "\(scratch)/out.bundle"
        _ = try BundleWriter.pack(source: Array(source.utf8), destination: Array(destination.utf8), options: options) { _, _ in }
        defer { unlink(destination) }
        return try readFile(destination)
    }

    /// The `index` target's framing (docs in ``IndexFuzzing``) around the
    /// decrypted index of `bundle`.
    private static func indexInput(of bundle: [UInt8], scratch: String) throws -> [UInt8] {
        let path = "\(scratch)/index.bundle"
        try writeFile(path, bundle)
        defer { unlink(path) }
        // The links tree holds links that lead outside: its index is a seed too.
        var options = OpenOptions()
        options.allowsExternalSymlinks = true
        let reader = try BundleReader.open(path: Array(path.utf8), materials: [.rawKey(FuzzSecrets.rawKey)], options: options)
        let header = reader.header
        var aad = header.bundleID
        aad.append(header.layout.chunkSizeLog2)
        aad += littleEndian(header.payloadLength) + littleEndian(header.indexOffset)
        let features = header.features
        if features.formatVersion != BundleFormat.version {
            aad += [UInt8(truncatingIfNeeded: features.formatVersion), UInt8(features.formatVersion >> 8), features.compression.rawValue]
        }
        let start = header.headerLength + Int(header.indexOffset)
        let plaintext = try bundle[start...].withUnsafeBytes {
            try AESGCM().open(key: reader.keys.indexKey, nonce: [UInt8](repeating: 0, count: 12), aad: aad, sealed: $0)
        }
        // The framing's format selector (IndexFuzzing): 0 version 1, 1
        // version 2 uncompressed, 2 version 2 with zstd.
        let selector: UInt8 = features.formatVersion == BundleFormat.version ? 0 : (features.isCompressed ? 2 : 1)
        return [header.layout.chunkSizeLog2 - 12 + 9 * selector] + littleEndian(header.indexOffset)
            + plaintext.withUnsafeBytes { Array($0) }
    }

    private static func littleEndian(_ value: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
    }

    // MARK: - Files

    private static func makeTree(_ tree: Tree, at root: String) throws {
        try makeDirectory(root)
        for (path, contents) in tree {
            let full = "\(root)/\(path)"
            switch contents {
            case nil: try makeDirectory(full)
            case let bytes? where path.hasSuffix("@"):
                guard symlink(String(decoding: bytes, as: UTF8.self), String(full.dropLast())) == 0 else {
                    throw BundleError.io(errno: errno, operation: "symlink", path: Array(full.utf8))
                }
            case let bytes?: try writeFile(full, bytes)
            }
        }
    }

    private static func makeDirectory(_ path: String) throws {
        guard mkdir(path, 0o755) == 0 || errno == EEXIST else {
            throw BundleError.io(errno: errno, operation: "create directory", path: Array(path.utf8))
        }
    }

    /// serve-request seeds (ServeRequestFuzzing's framing): flags, an
    /// 8-byte size of 300,000, a request target, then a `Range` value.
    private static func writeServeRequestSeeds(to directory: String) throws {
        let size: [UInt8] = [0, 0, 0, 0, 0, 0x04, 0x93, 0xE0]
        let token = String(decoding: ServeRequestFuzzing.token, as: UTF8.self)
        let seeds: [(String, UInt8, String, String?)] = [
            ("token-path", 0, "/\(token)/css/site.css", "bytes=0-99"),
            ("token-root", 0, "/\(token)", nil),
            ("no-token", 1, "/a%20b/caf%E9.txt", "bytes=-100"),
            ("bearer", 2, "/index.html", "bytes=10-19, 15-29"),
            ("escapes", 1, "/%2e%2e/%00/%zz", "bytes=300000-"),
            ("several", 1, "/x", "bytes=0-0,2-2,4-4"),
            ("date", 1, "Sun, 06 Nov 1994 08:49:37 GMT", "items=1-2"),
        ]
        for (name, flags, target, range) in seeds {
            var bytes = [flags] + size + Array(target.utf8)
            if let range { bytes += [0x0A] + Array(range.utf8) }
            try writeFile("\(directory)/\(name).request", bytes)
        }
    }

    private static func writeFile(_ path: String, _ bytes: [UInt8]) throws {
        let file = try FileDescriptor.open(Array(path.utf8), flags: O_WRONLY | O_CREAT | O_TRUNC, mode: 0o644,
                                           operation: "create file")
        try bytes.withUnsafeBytes { try file.writeAll($0) }
    }

    static func readFile(_ path: String) throws -> [UInt8] {
        let file = try FileDescriptor.open(Array(path.utf8), flags: O_RDONLY)
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = try buffer.withUnsafeMutableBytes { try file.read(into: $0) }
            out += buffer[0..<n]
            if n < buffer.count { return out }
        }
    }

    private static func makeTemporaryDirectory() throws -> String {
        var template = Array("/tmp/encfs-fuzz-seed.XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress.flatMap { mkdtemp($0) }.map { String(cString: $0) }
        }
        guard let made else { throw BundleError.io(errno: errno, operation: "mkdtemp", path: []) }
        return made
    }

    /// Removes the scratch tree (ours, small, no mounts inside).
    private static func removeTree(_ path: String) {
        var st = stat()
        guard lstat(path, &st) == 0 else { return }
        if st.st_mode & S_IFMT == S_IFDIR {
            for name in FuzzReplay.names(in: path) { removeTree("\(path)/\(name)") }
            rmdir(path)
        } else {
            unlink(path)
        }
    }

}
