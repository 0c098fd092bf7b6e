import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// What a pack run settles before it writes a byte: the checked options,
/// the source tree, the keys and key slots, and so the header's length.
///
/// Everything that can refuse a pack for its input (no key, a bad chunk
/// size or zstd level, an unreadable source, an external symlink when
/// refused, too much scrypt work, too many slots) is decided here, before
/// the destination is touched.
struct PackPlan {
    /// The source directory (path bytes), for messages.
    let source: [UInt8]
    /// The bundle path (path bytes), for messages.
    let destination: [UInt8]
    let options: PackOptions
    /// The source directory, open: every source file is opened under it.
    let root: FileDescriptor
    /// The entries in index order; files get their final size, mode and
    /// time as they are packed.
    var tree: SourceTree
    /// Symlinks stored with a warning (leading outside the bundle).
    let externalSymlinks: Int
    let layout: ChunkLayout
    /// The units fragments are filled to: ``layout`` itself, or larger
    /// units (``PackOptions/fragmentUnitLog2``).
    let fragmentLayout: ChunkLayout
    let bundleID: [UInt8]
    /// Keys derived from the new content key.
    let keys: BundleKeys
    /// One per secret and recipient, and the signature's placeholder.
    let slots: [KeySlot]
    /// The header's length with these slots: where the chunk data begins.
    let headerLength: Int

    /// Checks `options`, reads the source tree and makes the keys and slots.
    ///
    /// - Parameter warn: as for ``BundleWriter/pack(source:destination:options:warn:)``.
    /// - Throws: `BundleError` naming what failed and where.
    init(source: [UInt8], destination: [UInt8], options: PackOptions, warn: (String, [UInt8]) -> Void) throws {
        guard !options.keys.isEmpty || !options.recipients.isEmpty else { throw BundleError.noKeyGiven }
        guard BundleFormat.chunkSizeLog2Range.contains(options.chunkSizeLog2) else {
            throw BundleError.invalidChunkSize(log2: Int(options.chunkSizeLog2))
        }
        let unitLog2 = options.fragmentUnitLog2 ?? FragmentPacker.defaultUnitLog2(chunkSizeLog2: options.chunkSizeLog2)
        guard unitLog2 <= BundleFormat.chunkSizeLog2Range.upperBound else { throw BundleError.invalidChunkSize(log2: Int(unitLog2)) }
        guard options.compression == .none || CompressionMethod.zstdLevels.contains(options.compressionLevel) else {
            throw BundleError.invalidCompressionLevel(options.compressionLevel)
        }
        // Said first, so it is seen even when packing fails later.
        let scryptMemory = KeySlot.scryptMemory(of: options.scrypt)
        if options.keys.contains(where: { if case .passphrase = $0 { true } else { false } }),
           scryptMemory > OpenOptions.defaultScryptMemoryLimit {
            warn("passphrase slots need \(BundleError.sizeText(scryptMemory)) of scrypt memory, more than readers allow by default "
                 + "(\(BundleError.sizeText(OpenOptions.defaultScryptMemoryLimit))): opening with the passphrase needs a higher limit",
                 destination)
        }
        do { root = try FileDescriptor.open(source, flags: O_RDONLY | O_DIRECTORY, operation: "open source directory") } catch {
            throw BundleError.sourceUnreadable(errno: error.errno, path: source)
        }
        tree = try SourceTree(root: source, rootDirectory: root, excludes: options.excludes, warn: warn)
        externalSymlinks = try Self.checkSymlinks(of: tree, source: source, refusing: options.refusesExternalSymlinks, warn: warn)

        layout = ChunkLayout(chunkSizeLog2: options.chunkSizeLog2)
        fragmentLayout = ChunkLayout(chunkSizeLog2: max(unitLog2, options.chunkSizeLog2))
        bundleID = try randomBytes(BundleFormat.idSize)
        let contentKey: SymmetricKey
        do { contentKey = try SymmetricKey.random() } catch { throw BundleError.crypto("random generator failed") }
        keys = try BundleKeys(contentKey: contentKey, bundleID: bundleID)
        slots = try Self.makeSlots(options: options, wrapping: contentKey, bundleID: bundleID)
        headerLength = BundleHeader(bundleID: bundleID, layout: layout, slots: slots, payloadLength: 0,
                                    indexOffset: 0, indexLength: 0).headerLength
        self.source = source
        self.destination = destination
        self.options = options
    }

    /// One slot per secret and per recipient, and the signature's
    /// placeholder when signing.
    ///
    /// - Throws: `BundleError.limitExceeded` for more passphrase work or
    ///   slots than readers take (checked before any scrypt run), `.crypto`.
    private static func makeSlots(options: PackOptions, wrapping contentKey: SymmetricKey,
                                  bundleID: [UInt8]) throws -> [KeySlot] {
        // Before any scrypt run: readers refuse more passphrase work than this.
        try KeySlot.checkTotalScryptWork(options.keys.compactMap {
            if case .passphrase = $0 { KeySlot.work(of: options.scrypt) } else { nil }
        })
        var slots = try options.keys.map {
            try KeySlot.make(for: $0, wrapping: contentKey, bundleID: bundleID, scrypt: options.scrypt)
        }
        slots += try options.recipients.map { try KeySlot.recipient(wrapping: contentKey, to: $0, bundleID: bundleID) }
        // The signature takes one of the header's slots; it is made last,
        // so a placeholder of its size holds the header's length until then.
        if options.signingKey != nil { slots.append(BundleSignature.placeholderSlot) }
        guard slots.count <= BundleFormat.maximumSlots else {
            throw BundleError.limitExceeded("more than \(BundleFormat.maximumSlots) key slots\(options.signingKey != nil ? " with the signature" : "")")
        }
        return slots
    }

    /// Warns about (or refuses) every symlink that leads outside the bundle:
    /// a mount would serve it as stored, reading the host's files.
    ///
    /// - Returns: how many were warned about.
    /// - Throws: `BundleError.externalSymlink` for the first one when `refusing`.
    private static func checkSymlinks(of tree: SourceTree, source: [UInt8], refusing: Bool,
                                      warn: (String, [UInt8]) -> Void) throws -> Int {
        var count = 0
        for position in tree.nodes.indices where tree.nodes[position].kind == .symlink {
            guard try SymlinkContainment.isExternal(position, in: tree) else { continue }
            let refusal = BundleError.externalSymlink(path: SourceTree.join(source, tree.nodes[position].relativePath),
                                                      target: tree.nodes[position].symlinkTarget)
            if refusing { throw refusal }
            warn(refusal.message, refusal.path ?? source)
            count += 1
        }
        return count
    }
}
