/// What a bundle's header says about its format: the version and, from
/// version 2 on, how chunks are compressed.
///
/// Header bytes 34 … 39 (reserved and zero in version 1):
/// ```
/// 34  1  compression method (0 none, 1 zstd)
/// 35  1  compression level the packer used (shown by tools; 0 for none)
/// 36  4  paged index: sealed length of its page 0 (0: the index is one
///        sealed message, as in version 1)
/// ```
/// Header flags (bytes 10 … 11), 0 in every bundle but one with fragments:
/// ```
/// bit 0      small files packed into shared fragments (version 2,
///            compressed, paged index only; docs/FORMAT.md, "Fragments")
/// bits 8…15  the fragment unit's log2 u (0: a fragment is cut into
///            chunks of the chunk size): fragments are cut into units of
///            2^u bytes, each compressed and sealed as one chunk; only with
///            bit 0, and chunk size log2 < u ≤ 20 (``BundleHeader`` checks)
/// ```
/// A reader built before fragments refuses any flag, so it never misreads
/// a fragment slice as a body of its own; one built before fragment units
/// refuses bits 8…15, so it never cuts a fragment at the chunk size.
///
/// A version 2 bundle may also hold files that share one body
/// (deduplication), which version 1 readers would refuse as overlapping:
/// the version is what keeps them from trying.
package struct BundleFeatures: Sendable, Equatable {
    /// The format version written in the header.
    package let formatVersion: UInt16
    /// How chunks are compressed.
    package let compression: CompressionMethod
    /// The level the packer compressed with (0 when not compressed).
    package let compressionLevel: UInt8
    /// With a paged index (docs/FORMAT.md, "The paged index"): the sealed
    /// length of its page 0, which starts the index region; 0 for an
    /// index sealed as one message.
    package let pagedIndexHeadLength: UInt32
    /// Whether small files may lie in shared fragments (header flag bit 0).
    package let hasFragments: Bool
    /// log2 of the unit fragments are cut into (header flag bits 8…15);
    /// 0: the chunk size, as in bundles written before fragment units.
    package let fragmentUnitLog2: UInt8

    /// Header flag bit 0: ``hasFragments``.
    static let fragmentsFlag: UInt16 = 1
    /// Header flag bits 8…15: ``fragmentUnitLog2``.
    static let fragmentUnitShift: UInt16 = 8
    static let fragmentUnitMask: UInt16 = 0xFF00

    /// A version 1 bundle: nothing compressed, no shared bodies.
    package static let version1 = BundleFeatures(formatVersion: BundleFormat.version, compression: .none, compressionLevel: 0)

    /// The features of a bundle with the given compression and (when
    /// `sharesBodies`) deduplicated files: version 1 when it uses neither.
    package static func needed(compression: CompressionMethod, level: Int, sharesBodies: Bool) -> BundleFeatures {
        guard compression != .none || sharesBodies else { return .version1 }
        return BundleFeatures(formatVersion: BundleFormat.version2, compression: compression,
                              compressionLevel: compression == .none ? 0 : UInt8(clamping: level))
    }

    /// Whether chunks carry the compression method in their associated
    /// data and compressed files have chunk tables.
    package var isCompressed: Bool { compression != .none }

    /// Whether the index is paged.
    package var hasPagedIndex: Bool { pagedIndexHeadLength != 0 }

    /// These features with a paged index whose page 0 seals to
    /// `headLength` bytes: always version 2 (a version 1 reader could not
    /// read the index).
    func withPagedIndex(headLength: UInt32) -> BundleFeatures {
        BundleFeatures(formatVersion: BundleFormat.version2, compression: compression, compressionLevel: compressionLevel,
                       pagedIndexHeadLength: headLength, hasFragments: hasFragments, fragmentUnitLog2: fragmentUnitLog2)
    }

    /// These features with fragments: version 2, compressed, and (set by
    /// the paged index writer) a paged index.
    ///
    /// - Parameter unitLog2: the fragment unit's log2, 0 for the chunk size.
    /// - Precondition: chunks are compressed.
    func withFragments(unitLog2: UInt8 = 0) -> BundleFeatures {
        precondition(isCompressed, "internal error: fragments in an uncompressed bundle")
        return BundleFeatures(formatVersion: BundleFormat.version2, compression: compression, compressionLevel: compressionLevel,
                              pagedIndexHeadLength: pagedIndexHeadLength, hasFragments: true, fragmentUnitLog2: unitLog2)
    }

    /// Header bytes 10 … 11.
    var headerFlags: UInt16 {
        hasFragments ? Self.fragmentsFlag | UInt16(fragmentUnitLog2) << Self.fragmentUnitShift : 0
    }

    /// The layout fragments are cut into in a bundle whose files use
    /// `layout`: units of 2^``fragmentUnitLog2`` bytes, or `layout` itself.
    package func fragmentLayout(files layout: ChunkLayout) -> ChunkLayout {
        fragmentUnitLog2 == 0 ? layout : ChunkLayout(chunkSizeLog2: fragmentUnitLog2)
    }

    /// Whether files may share a body.
    package var allowsSharedBodies: Bool { formatVersion >= BundleFormat.version2 }

    init(formatVersion: UInt16, compression: CompressionMethod, compressionLevel: UInt8, pagedIndexHeadLength: UInt32 = 0,
         hasFragments: Bool = false, fragmentUnitLog2: UInt8 = 0) {
        self.formatVersion = formatVersion
        self.compression = compression
        self.compressionLevel = compressionLevel
        self.pagedIndexHeadLength = pagedIndexHeadLength
        self.hasFragments = hasFragments
        self.fragmentUnitLog2 = fragmentUnitLog2
    }

    /// Parses the header flags (bytes 10 … 11) and bytes 34 … 39 of a
    /// header of `version`.
    ///
    /// - Parameter chunkSizeLog2: the header's chunk size log2 (already
    ///   checked), which a fragment unit must exceed.
    /// - Throws: `BundleError.corruptHeader` for unknown flags, fragments
    ///   outside a compressed version 2 bundle with a paged index, a
    ///   fragment unit without fragments or out of range, non-zero
    ///   reserved bytes, an unknown method, or a level that does not fit
    ///   the method.
    static func parse(version: UInt16, flags: UInt16, chunkSizeLog2: UInt8,
                      bytes b: UnsafeRawBufferPointer) throws -> BundleFeatures {
        guard flags & ~(fragmentsFlag | fragmentUnitMask) == 0 else {
            throw BundleError.corruptHeader("unknown header flags 0x\(String(flags, radix: 16))")
        }
        let features = try parse(version: version, bytes: b)
        let unitLog2 = UInt8(truncatingIfNeeded: flags >> fragmentUnitShift)
        guard flags & fragmentsFlag != 0 else {
            guard unitLog2 == 0 else { throw BundleError.corruptHeader("a fragment unit without fragments") }
            return features
        }
        guard features.isCompressed, features.hasPagedIndex else {
            throw BundleError.corruptHeader("fragments without compression or a paged index")
        }
        guard unitLog2 == 0 || (unitLog2 > chunkSizeLog2 && BundleFormat.chunkSizeLog2Range.contains(unitLog2)) else {
            throw BundleError.corruptHeader("fragment unit 2^\(unitLog2) out of range")
        }
        return BundleFeatures(formatVersion: version, compression: features.compression, compressionLevel: features.compressionLevel,
                              pagedIndexHeadLength: features.pagedIndexHeadLength, hasFragments: true, fragmentUnitLog2: unitLog2)
    }

    /// Parses header bytes 34 … 39 of a header of `version`.
    private static func parse(version: UInt16, bytes b: UnsafeRawBufferPointer) throws -> BundleFeatures {
        precondition(b.count == 6, "internal error: feature bytes")
        if version == BundleFormat.version {
            guard b.allSatisfy({ $0 == 0 }) else { throw BundleError.corruptHeader("reserved header bytes are not zero") }
            return .version1
        }
        guard let method = CompressionMethod(rawValue: b[0]) else {
            throw BundleError.corruptHeader("unknown compression method \(b[0])")
        }
        let level = b[1]
        let levelOK = method == .none ? level == 0 : CompressionMethod.zstdLevels.contains(Int(level))
        guard levelOK else { throw BundleError.corruptHeader("compression level \(level) out of range") }
        return BundleFeatures(formatVersion: version, compression: method, compressionLevel: level,
                              pagedIndexHeadLength: b.le32(at: 2))
    }

    /// Header bytes 34 … 39.
    var serialized: [UInt8] {
        guard formatVersion != BundleFormat.version else { return [0, 0, 0, 0, 0, 0] }
        var bytes = [compression.rawValue, compressionLevel]
        bytes.appendLE(pagedIndexHeadLength)
        return bytes
    }
}
