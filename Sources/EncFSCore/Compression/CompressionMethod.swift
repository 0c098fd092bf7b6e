/// How a bundle's chunks are compressed before they are sealed (format
/// version 2; docs/FORMAT.md).
///
/// The method is a header field, so it is covered by the header MAC, and
/// each chunk's associated data carries the method its bytes were stored
/// with (``ChunkCodec``), so a chunk cannot be passed off as raw or as
/// compressed.
package enum CompressionMethod: UInt8, Sendable, Equatable {
    /// Chunks are stored as they are (every version 1 bundle).
    case none = 0
    /// Each chunk is one zstd frame of its own, or raw when it does not shrink.
    case zstd = 1

    /// The name `encfs-pack --compress` takes and `encfs-inspect info` shows.
    package var name: String {
        switch self {
        case .none: "none"
        case .zstd: "zstd"
        }
    }

    /// Compression levels `--compress zstd:LEVEL` accepts.
    package static let zstdLevels: ClosedRange<Int> = 1...19
    /// The level `--compress zstd` uses: measured on real trees against
    /// 3 and 12 (docs/PERFORMANCE.md, "Levels, chunk and fragment sizes"):
    /// 8 … 10 % smaller bundles of source trees than 3, pack time still well
    /// under half of mksquashfs's; reads inflate as fast at any level.
    package static let defaultZstdLevel = 9
}

/// How one stored chunk of a compressed bundle is encoded: the byte bound
/// into its associated data.
package enum StoredChunkEncoding: UInt8, Sendable, Equatable {
    /// The chunk's plaintext as it is: compressing did not make it smaller.
    case raw = 0
    /// One zstd frame that inflates to exactly the chunk's plaintext length.
    case zstd = 1
}
