/// Constants of bundle format versions 1 and 2. `docs/FORMAT.md` gives the
/// byte layout these numbers describe.
package enum BundleFormat {
    /// The first eight bytes of every bundle: "ENCFSBDL".
    package static let magic: [UInt8] = Array("ENCFSBDL".utf8)
    /// Format version 1: what a bundle without compression or shared file
    /// bodies is written as, byte for byte as before version 2 existed, so
    /// version 1 readers keep opening it.
    package static let version: UInt16 = 1
    /// Format version 2: compressed chunks with chunk tables, and files
    /// that share one body (deduplication). Written only when a bundle uses
    /// one of them.
    package static let version2: UInt16 = 2
    /// The versions this build reads.
    package static let readableVersions: ClosedRange<UInt16> = 1...2
    /// Default chunk size of compressed bundles (64 KiB): each chunk is
    /// compressed on its own, and zstd's fixed cost per frame (its entropy
    /// tables) weighs on sequential reads at smaller sizes, while a small
    /// read inflates a whole chunk; docs/PERFORMANCE.md has the
    /// measurements that chose it.
    package static let defaultCompressedChunkSizeLog2: UInt8 = 16
    /// Size of the fixed part of the header, before the key slots.
    package static let fixedHeaderSize = 64
    /// Size of the header authentication code that ends the header.
    package static let headerMACSize = 32
    /// Bundle ids and file ids are 128-bit random values.
    package static let idSize = 16
    /// Smallest and largest chunk size, as log2: 4 KiB … 1 MiB.
    package static let chunkSizeLog2Range: ClosedRange<UInt8> = 12...20
    /// Default chunk size (4 KiB, the smallest). A read decrypts whole
    /// chunks, so the chunk size trades small random reads (a 4 KiB read
    /// pays one chunk) against per-chunk costs on sequential reads;
    /// docs/PERFORMANCE.md has the sweep and the profile that chose it.
    package static let defaultChunkSizeLog2: UInt8 = 12
    /// At most this many key slots.
    package static let maximumSlots = 64
    /// Names are at most 255 bytes, as on Linux file systems.
    package static let maximumNameLength = 255
    /// Symlink targets are at most 4095 bytes (PATH_MAX − 1).
    package static let maximumSymlinkLength = 4095
    /// Entries in one bundle, root included (the record index is a u32).
    package static let maximumEntries = Int(UInt32.max - 1)

    // HKDF `info` labels: one per derived key, so no two uses share a key.
    static let labelHeaderMAC = Array("encfs v1 header mac".utf8)
    static let labelIndex = Array("encfs v1 index".utf8)
    static let labelFile = Array("encfs v1 file".utf8)
    static let labelRawKeySlot = Array("encfs v1 raw-key slot".utf8)
    static let labelPassphraseSlot = Array("encfs v1 passphrase slot".utf8)
    static let labelKeyID = Array("encfs v1 key id".utf8)
    static let labelX25519Slot = Array("encfs v1 x25519 slot".utf8)
    static let labelRSASlot = Array("encfs v1 rsa slot".utf8)
    static let labelKeyCommitment = Array("encfs v1 key commitment".utf8)
    /// The first bytes of every signed message (18 bytes, no terminator),
    /// so an encfs signature can never be taken for a signature of
    /// anything else the same key signs.
    static let signatureContext = Array("encfs v1 signature".utf8)
}
