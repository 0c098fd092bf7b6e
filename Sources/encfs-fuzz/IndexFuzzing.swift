import CryptCore
import EncFSCore

/// The `index` target: an index plaintext, as a key holder could seal it.
///
/// Input framing (so the fuzzer also varies what the index is checked
/// against):
/// ```
/// 0  1  chunk size log2 = 12 + byte % 9; format: byte / 9 % 3 = 0
///       version 1, 1 version 2 uncompressed (shared bodies), 2 version 2
///       with zstd (chunk tables)
/// 1  8  data length (u64 LE): bytes of chunk data before the index
/// 9  …  the index plaintext
/// ```
/// An index that validates is walked entry by entry (``walk(_:)``), and
/// cut into record pages as the paged writer would, each of which must
/// pass the checks a reader makes on a page it loads: the flat and the page
/// rules agree.
enum IndexFuzzing {
    static let framingSize = 9
    nonisolated(unsafe) static var decompressor: ChunkDecompressor?

    static func run(_ input: UnsafeRawBufferPointer) {
        guard input.count >= framingSize else { return }
        let layout = ChunkLayout(chunkSizeLog2: 12 + input[0] % 9)
        var dataLength: UInt64 = 0
        for i in 0..<8 { dataLength |= UInt64(input[1 + i]) << (8 * UInt64(i)) }
        let plaintext = SecureBytes(copying: UnsafeRawBufferPointer(rebasing: input[framingSize...]))
        let features = [BundleFeatures.version1,
                        .needed(compression: .none, level: 0, sharesBodies: true),
                        .needed(compression: .zstd, level: 3, sharesBodies: false)][Int(input[0] / 9 % 3)]
        guard let index = FuzzTarget.attempt("BundleIndex(plaintext:)", {
            try BundleIndex(plaintext: plaintext, layout: layout, dataLength: dataLength, features: features)
        }) else { return }
        walk(index)
        guard let decompressor = FuzzTarget.attempt("ChunkDecompressor()", { try decompressor ?? ChunkDecompressor() }) else { return }
        Self.decompressor = decompressor
        plaintext.withUnsafeBytes { flat in
            do {
                try RecordPage.checkPagedCopy(ofFlatIndex: flat, layout: layout, dataLength: dataLength, features: features,
                                              decompressor: decompressor)
            } catch {
                FuzzTarget.require(false, "a valid flat index cut into pages fails the page checks: \(error)")
            }
        }
    }

    /// Every accessor on every entry of a validated index, with the
    /// invariants lookups rely on: each entry is found by its own name in
    /// its parent and by its own path from the root, and each child lies in
    /// its parent's range; paths through each symlink are resolved too.
    static func walk(_ index: BundleIndex) {
        // A validated flat index whose bundle did not change never fails to
        // read. A paged index authenticates and checks each page at its
        // first use, so a damaged page may fail then, as a corrupt index
        // and nothing else.
        do {
            try walkEntries(index)
        } catch BundleError.corruptIndex where index.isPaged {
            return
        } catch {
            FuzzTarget.require(false, "reading a validated index failed: \(error)")
        }
    }

    private static func walkEntries(_ index: BundleIndex) throws {
        FuzzTarget.require(try index.count >= 1 && index.root.kind == .directory, "index without a root directory")
        var files = 0
        var total: UInt64 = 0
        for position in 0..<index.count {
            let entry = try index.entry(at: position)
            FuzzTarget.require(entry.position == position, "entry \(position) reports position \(entry.position)")
            FuzzTarget.require(try index.entry(inode: UInt64(position) + 1) == entry, "inode \(position + 1) is not entry \(position)")
            let name = try index.name(of: entry)
            if position != 0 {
                let parent = try index.entry(at: entry.parent)
                FuzzTarget.require(parent.kind == .directory && parent.children.contains(position),
                                   "entry \(position) is not among its parent's children")
                let found = try name.withUnsafeBytes { try index.lookup($0, in: parent) }
                FuzzTarget.require(found?.position == position, "lookup of entry \(position)'s name found \(String(describing: found?.position))")
            }
            let path = try index.path(of: entry)
            let resolved = FuzzTarget.attempt("resolve(path:)") { try index.resolve(path: path) }
            FuzzTarget.require(resolved?.position == position, "resolve(path(of: \(position))) found \(String(describing: resolved?.position))")
            switch entry.kind {
            case .directory:
                _ = index.subdirectoryCount(of: entry)
                for child in entry.children { _ = try index.entry(at: child) }
                // A name that sorts after every child, and one before all.
                _ = try [UInt8](repeating: 0xFF, count: 256).withUnsafeBytes { try index.lookup($0, in: entry) }
                _ = try [UInt8(1)].withUnsafeBytes { try index.lookup($0, in: entry) }
            case .file:
                files += 1
                total &+= entry.fileSize
                FuzzTarget.require(index.withFileID(of: entry) { $0.count } == 16, "file id of entry \(position) is not 16 bytes")
                // A validated chunk table gives every chunk a range inside
                // the body, in order.
                let stored = try index.storedSize(of: entry)
                FuzzTarget.require(entry.hasChunkTable || entry.isFragmentSlice
                                       || stored == index.layout.ciphertextSize(forPlaintextSize: entry.fileSize),
                                   "stored size of entry \(position) differs from its layout")
                // A fragment slice's descriptor, once checked, holds the
                // slice inside its fragment.
                if entry.isFragmentSlice {
                    let (body, offset) = try index.body(of: entry)
                    FuzzTarget.require(offset <= body.fileSize && entry.fileSize <= body.fileSize - offset,
                                       "fragment slice \(position) lies outside its fragment")
                }
            case .symlink:
                let target = try index.withSymlinkTarget(of: entry) { Array($0) }
                FuzzTarget.require(target.count == entry.targetLength, "symlink \(position) target length differs from its size")
                // Through the link: as the last component (followed) and in
                // the middle of a path. Whatever it resolves to when followed
                // is not a link (loops end with ELOOP after 40 hops).
                let followed = FuzzTarget.attempt("resolve(path:followingLast:)") { try index.resolve(path: path, followingLast: true) }
                FuzzTarget.require(followed == nil || followed?.kind != .symlink, "following symlink \(position) ended at a symlink")
                for suffix in ["/.", "/..", "/x"] {
                    FuzzTarget.attempt("resolve(path:) through a symlink") { _ = try index.resolve(path: path + Array(suffix.utf8)) }
                }
            }
        }
        FuzzTarget.require(files == index.fileCount && total == index.totalFileBytes, "file count or total size disagrees with the entries")
        _ = try index.entry(inode: 0)
        _ = try index.entry(inode: UInt64(index.count) + 1)
        _ = FuzzTarget.attempt("resolve(path:)") { try index.resolve(path: Array("../x/./y//z".utf8)) }
    }
}
