/// All offset arithmetic of chunked content, in one place.
///
/// Three spaces meet here:
/// - *plaintext* offsets inside one file, 0 ..< size;
/// - *chunk* indices, 0 ..< chunkCount(forPlaintextSize:);
/// - *ciphertext* offsets inside the file's sealed body, which starts at the
///   entry's payload offset: every chunk is stored as its ciphertext (as long
///   as its plaintext) followed by a 16-byte tag, so chunk `i` starts at
///   `i · (chunkSize + 16)`.
///
/// Every function is total for sizes up to `UInt64.max / 2`; callers reject
/// larger sizes from untrusted input with ``isValidPlaintextSize(_:)``.
public struct ChunkLayout: Sendable, Equatable {
    /// Bytes added to each chunk by its tag.
    public static let overhead: UInt64 = 16

    /// log2 of the chunk size (12 … 20).
    public let chunkSizeLog2: UInt8
    /// Plaintext bytes per full chunk.
    public let chunkSize: UInt64

    /// - Precondition: `chunkSizeLog2` is within the format's range; values
    ///   from a bundle are checked by the header parser first.
    public init(chunkSizeLog2: UInt8) {
        precondition(BundleFormat.chunkSizeLog2Range.contains(chunkSizeLog2), "internal error: chunk size 2^\(chunkSizeLog2)")
        self.chunkSizeLog2 = chunkSizeLog2
        self.chunkSize = UInt64(1) << UInt64(chunkSizeLog2)
    }

    /// Sealed bytes per full chunk.
    public var sealedChunkSize: UInt64 { chunkSize + Self.overhead }

    /// Largest file size this layout accepts: the sealed body must fit a
    /// signed 64-bit offset with room to add the payload start.
    public var maximumPlaintextSize: UInt64 { (UInt64(Int64.max) / 2 / sealedChunkSize) * chunkSize }

    /// Whether `size` is a file size the layout can address.
    public func isValidPlaintextSize(_ size: UInt64) -> Bool { size <= maximumPlaintextSize }

    /// Number of chunks of a file of `size` bytes (0 for an empty file).
    public func chunkCount(forPlaintextSize size: UInt64) -> UInt64 {
        size == 0 ? 0 : ((size - 1) >> UInt64(chunkSizeLog2)) + 1
    }

    /// The chunk holding plaintext offset `offset`.
    public func chunkIndex(forPlaintextOffset offset: UInt64) -> UInt64 {
        offset >> UInt64(chunkSizeLog2)
    }

    /// Plaintext range of chunk `chunk` in a file of `size` bytes.
    public func plaintextRange(ofChunk chunk: UInt64, plaintextSize size: UInt64) -> Range<UInt64> {
        let start = chunk << UInt64(chunkSizeLog2)
        let end = min(start + chunkSize, size)
        return start..<max(start, end)
    }

    /// Offset of chunk `chunk`'s sealed bytes inside the file's sealed body.
    public func ciphertextOffset(ofChunk chunk: UInt64) -> UInt64 {
        chunk * sealedChunkSize
    }

    /// Sealed bytes of chunk `chunk` (plaintext length + tag).
    public func sealedSize(ofChunk chunk: UInt64, plaintextSize size: UInt64) -> UInt64 {
        UInt64(plaintextRange(ofChunk: chunk, plaintextSize: size).count) + Self.overhead
    }

    /// Where the sealed bytes of the consecutive chunks `chunks` lie inside
    /// the file's sealed body (one read fetches them all); empty for an empty
    /// range. `chunks` must lie within the file's chunks.
    public func ciphertextRange(ofChunks chunks: Range<UInt64>, plaintextSize size: UInt64) -> Range<UInt64> {
        guard let last = chunks.last else { return 0..<0 }
        return ciphertextOffset(ofChunk: chunks.lowerBound)..<(ciphertextOffset(ofChunk: last) + sealedSize(ofChunk: last, plaintextSize: size))
    }

    /// Total sealed size of a file of `size` bytes.
    public func ciphertextSize(forPlaintextSize size: UInt64) -> UInt64 {
        size + chunkCount(forPlaintextSize: size) * Self.overhead
    }

    /// Whether `chunk` is the last chunk of a file of `size` bytes.
    public func isLastChunk(_ chunk: UInt64, plaintextSize size: UInt64) -> Bool {
        chunk + 1 == chunkCount(forPlaintextSize: size)
    }

    /// Chunks covering plaintext bytes [offset, offset + count) of a file of
    /// `size` bytes, clipped at end of file; empty when nothing is covered.
    public func chunks(coveringPlaintextOffset offset: UInt64, count: UInt64, plaintextSize size: UInt64) -> Range<UInt64> {
        guard offset < size, count > 0 else { return 0..<0 }
        let end = count > size - offset ? size : offset + count
        return chunkIndex(forPlaintextOffset: offset)..<(chunkIndex(forPlaintextOffset: end - 1) + 1)
    }
}
