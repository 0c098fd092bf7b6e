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
package struct ChunkLayout: Sendable, Equatable {
    /// Bytes added to each chunk by its tag.
    package static let overhead: UInt64 = 16

    /// log2 of the chunk size (12 … 20).
    package let chunkSizeLog2: UInt8
    /// Plaintext bytes per full chunk.
    package let chunkSize: UInt64

    /// - Precondition: `chunkSizeLog2` is within the format's range; values
    ///   from a bundle are checked by the header parser first.
    package init(chunkSizeLog2: UInt8) {
        precondition(BundleFormat.chunkSizeLog2Range.contains(chunkSizeLog2), "internal error: chunk size 2^\(chunkSizeLog2)")
        self.chunkSizeLog2 = chunkSizeLog2
        self.chunkSize = UInt64(1) << UInt64(chunkSizeLog2)
    }

    /// Sealed bytes per full chunk.
    package var sealedChunkSize: UInt64 { chunkSize + Self.overhead }

    /// Largest file size this layout accepts: the sealed body must fit a
    /// signed 64-bit offset with room to add the payload start.
    package var maximumPlaintextSize: UInt64 { (UInt64(Int64.max) / 2 / sealedChunkSize) * chunkSize }

    /// Whether `size` is a file size the layout can address.
    package func isValidPlaintextSize(_ size: UInt64) -> Bool { size <= maximumPlaintextSize }

    /// Number of chunks of a file of `size` bytes (0 for an empty file).
    package func chunkCount(forPlaintextSize size: UInt64) -> UInt64 {
        size == 0 ? 0 : ((size - 1) >> UInt64(chunkSizeLog2)) + 1
    }

    /// The chunk holding plaintext offset `offset`.
    package func chunkIndex(forPlaintextOffset offset: UInt64) -> UInt64 {
        offset >> UInt64(chunkSizeLog2)
    }

    /// Plaintext range of chunk `chunk` in a file of `size` bytes.
    package func plaintextRange(ofChunk chunk: UInt64, plaintextSize size: UInt64) -> Range<UInt64> {
        let start = chunk << UInt64(chunkSizeLog2)
        let end = min(start + chunkSize, size)
        return start..<max(start, end)
    }

    /// Plaintext bytes the consecutive chunks `chunks` hold in a file of
    /// `size` bytes (the last chunk may be short; none past the end).
    package func plaintextBytes(ofChunks chunks: Range<UInt64>, plaintextSize size: UInt64) -> UInt64 {
        guard let last = chunks.last else { return 0 }
        return min(plaintextRange(ofChunk: last, plaintextSize: size).upperBound, size)
            - min(plaintextRange(ofChunk: chunks.lowerBound, plaintextSize: size).lowerBound, size)
    }

    /// Offset of chunk `chunk`'s sealed bytes inside the file's sealed body.
    package func ciphertextOffset(ofChunk chunk: UInt64) -> UInt64 {
        chunk * sealedChunkSize
    }

    /// Sealed bytes of chunk `chunk` (plaintext length + tag).
    package func sealedSize(ofChunk chunk: UInt64, plaintextSize size: UInt64) -> UInt64 {
        UInt64(plaintextRange(ofChunk: chunk, plaintextSize: size).count) + Self.overhead
    }

    /// Where the sealed bytes of the consecutive chunks `chunks` lie inside
    /// the file's sealed body (one read fetches them all); empty for an empty
    /// range. `chunks` must lie within the file's chunks.
    package func ciphertextRange(ofChunks chunks: Range<UInt64>, plaintextSize size: UInt64) -> Range<UInt64> {
        guard let last = chunks.last else { return 0..<0 }
        return ciphertextOffset(ofChunk: chunks.lowerBound)..<(ciphertextOffset(ofChunk: last) + sealedSize(ofChunk: last, plaintextSize: size))
    }

    /// Total sealed size of a file of `size` bytes.
    package func ciphertextSize(forPlaintextSize size: UInt64) -> UInt64 {
        size + chunkCount(forPlaintextSize: size) * Self.overhead
    }

    /// Whether `chunk` is the last chunk of a file of `size` bytes.
    package func isLastChunk(_ chunk: UInt64, plaintextSize size: UInt64) -> Bool {
        chunk + 1 == chunkCount(forPlaintextSize: size)
    }

    /// Chunks covering plaintext bytes [offset, offset + count) of a file of
    /// `size` bytes, clipped at end of file; empty when nothing is covered.
    package func chunks(coveringPlaintextOffset offset: UInt64, count: UInt64, plaintextSize size: UInt64) -> Range<UInt64> {
        guard offset < size, count > 0 else { return 0..<0 }
        let end = count > size - offset ? size : offset + count
        return chunkIndex(forPlaintextOffset: offset)..<(chunkIndex(forPlaintextOffset: end - 1) + 1)
    }

    // MARK: - Reads

    /// Sealed chunks one positional read fetches with a budget of
    /// `batchBytes`: as many whole sealed chunks as fit, at least one.
    ///
    /// Batching saves system calls for small chunks, and a batch small
    /// enough to stay in the core's cache is still there when it is
    /// decrypted.
    package func chunksPerBatch(batchBytes: Int) -> Int {
        max(1, batchBytes / Int(sealedChunkSize))
    }

    /// Bytes a buffer needs to hold one batch fetched with a budget of
    /// `batchBytes` (the budget rounded down to whole sealed chunks, at
    /// least one).
    package func batchCapacity(batchBytes: Int) -> Int {
        chunksPerBatch(batchBytes: batchBytes) * Int(sealedChunkSize)
    }

    /// How to read plaintext bytes [offset, offset + count) of a file of
    /// `size` bytes whose sealed body starts at `bodyOffset` of the source:
    /// the batches of consecutive sealed chunks to fetch, and for each chunk
    /// which of its bytes go where in the caller's buffer.
    ///
    /// The range is clipped at end of file; the plan is empty when nothing
    /// is covered. The plan is a value: iterating it allocates nothing.
    ///
    /// - Parameters:
    ///   - offset: plaintext offset of the first byte wanted.
    ///   - count: bytes wanted (the caller's buffer size; negative counts
    ///     as 0).
    ///   - size: the file's plaintext size, at most ``maximumPlaintextSize``.
    ///   - bodyOffset: where the file's sealed body starts in the source,
    ///     such that the body's end still fits a signed 64-bit offset.
    ///   - chunksPerBatch: chunks one fetch may hold, from
    ///     ``chunksPerBatch(batchBytes:)`` (worked out once by the caller:
    ///     a division on every read would cost more than the rest of this
    ///     arithmetic); values below 1 count as 1.
    package func readPlan(forPlaintextOffset offset: UInt64, count: Int, plaintextSize size: UInt64,
                         bodyOffset: UInt64 = 0, chunksPerBatch: Int) -> ChunkReadPlan {
        let perBatch = UInt64(max(1, chunksPerBatch))
        guard offset < size, count > 0 else {
            return ChunkReadPlan(layout: self, plaintextSize: size, wanted: offset..<offset, bodyOffset: bodyOffset,
                                 chunks: 0..<0, chunksPerBatch: perBatch)
        }
        let end = UInt64(count) >= size - offset ? size : offset + UInt64(count)
        return ChunkReadPlan(layout: self, plaintextSize: size, wanted: offset..<end, bodyOffset: bodyOffset,
                             chunks: chunkIndex(forPlaintextOffset: offset)..<(chunkIndex(forPlaintextOffset: end - 1) + 1),
                             chunksPerBatch: perBatch)
    }

    /// The batch of `plan` that starts at chunk `first`: up to
    /// `plan.chunksPerBatch` chunks, and where their sealed bytes lie in the
    /// source.
    func batch(of plan: ChunkReadPlan, startingAt first: UInt64) -> ChunkReadPlan.Batch {
        let last = plan.chunks.upperBound - first > plan.chunksPerBatch ? first + plan.chunksPerBatch : plan.chunks.upperBound
        let chunks = first..<last
        let sealed = ciphertextRange(ofChunks: chunks, plaintextSize: plan.plaintextSize)
        return ChunkReadPlan.Batch(plan: plan, chunks: chunks, sourceOffset: plan.bodyOffset + sealed.lowerBound,
                                   byteCount: Int(sealed.count))
    }

    /// The part of `batch`'s chunk `chunk` its read wants.
    func slice(of batch: ChunkReadPlan.Batch, chunk: UInt64) -> ChunkReadPlan.Slice {
        let plan = batch.plan
        let range = plaintextRange(ofChunk: chunk, plaintextSize: plan.plaintextSize)
        let start = max(range.lowerBound, plan.wanted.lowerBound)
        let end = min(range.upperBound, plan.wanted.upperBound)
        // A chunk of the file is its last when it reaches the end of file
        // (cheaper than counting the chunks).
        return ChunkReadPlan.Slice(chunk: chunk, chunkLength: Int(range.count),
                                   isLastChunk: range.upperBound == plan.plaintextSize,
                                   sealedOffset: Int(ciphertextOffset(ofChunk: chunk - batch.chunks.lowerBound)),
                                   skip: Int(start - range.lowerBound), count: Int(end - start),
                                   destination: Int(start - plan.wanted.lowerBound))
    }

    /// The first chunk of `batch` that a fetch returning only `fetched`
    /// bytes cut short.
    func firstIncompleteChunk(of batch: ChunkReadPlan.Batch, fetched: Int) -> UInt64 {
        batch.chunks.lowerBound + UInt64(max(0, fetched)) / sealedChunkSize
    }
}
