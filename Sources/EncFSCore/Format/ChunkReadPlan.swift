/// How one plaintext read is served: batches of consecutive sealed chunks,
/// each fetched with one positional read, and for each chunk the bytes it
/// gives the caller's buffer.
///
/// Made by ``ChunkLayout/readPlan(forPlaintextOffset:count:plaintextSize:bodyOffset:chunksPerBatch:)``,
/// which (with the layout functions it calls) does all of the arithmetic;
/// this type only holds the result and walks it. Plan, batches and slices
/// are values and their iterators keep a cursor only, so a read allocates
/// nothing:
///
/// ```swift
/// for batch in plan {
///     // fetch batch.byteCount bytes at batch.sourceOffset into `fetched`
///     for slice in batch {
///         // open fetched[slice.sealedRange] (chunk slice.chunk), then copy
///         // plaintext[slice.plaintextRange] to buffer[slice.destinationRange]
///     }
/// }
/// ```
package struct ChunkReadPlan: Sequence, Sendable, Equatable {
    /// The layout that made the plan.
    package let layout: ChunkLayout
    /// The file's plaintext size.
    package let plaintextSize: UInt64
    /// The plaintext bytes read: the request clipped at end of file (empty
    /// when nothing is covered).
    package let wanted: Range<UInt64>
    /// Where the file's sealed body starts in the source.
    package let bodyOffset: UInt64
    /// The chunks `wanted` covers.
    package let chunks: Range<UInt64>
    /// Chunks fetched per batch (at least 1).
    package let chunksPerBatch: UInt64

    /// Bytes the read returns: `wanted.count`, which is at most the
    /// requested count, so it fits an `Int`.
    package var byteCount: Int { Int(wanted.count) }

    /// Whether the read covers nothing (at or past end of file, or an empty
    /// request).
    package var isEmpty: Bool { wanted.isEmpty }

    package func makeIterator() -> Iterator { Iterator(plan: self, cursor: chunks.lowerBound) }

    /// Walks the batches of a plan in order.
    package struct Iterator: IteratorProtocol, Sendable {
        let plan: ChunkReadPlan
        /// The first chunk of the next batch.
        var cursor: UInt64

        package mutating func next() -> Batch? {
            guard cursor < plan.chunks.upperBound else { return nil }
            let batch = plan.layout.batch(of: plan, startingAt: cursor)
            cursor = batch.chunks.upperBound
            return batch
        }
    }

    /// Consecutive chunks fetched with one positional read.
    package struct Batch: Sequence, Sendable, Equatable {
        /// The plan this batch belongs to.
        let plan: ChunkReadPlan
        /// The chunks fetched.
        package let chunks: Range<UInt64>
        /// Where their sealed bytes start in the source.
        package let sourceOffset: UInt64
        /// Sealed bytes to fetch: every chunk's ciphertext and tag, back to
        /// back; at most ``ChunkLayout/batchCapacity(batchBytes:)``.
        package let byteCount: Int

        /// The first chunk a fetch returning only `fetched` bytes cut short
        /// (the chunk to name in the error).
        package func firstIncompleteChunk(fetched: Int) -> UInt64 {
            plan.layout.firstIncompleteChunk(of: self, fetched: fetched)
        }

        package func makeIterator() -> Iterator { Iterator(batch: self, cursor: chunks.lowerBound) }

        /// Walks the slices of a batch in chunk order.
        package struct Iterator: IteratorProtocol, Sendable {
            let batch: Batch
            /// The next chunk.
            var cursor: UInt64

            package mutating func next() -> Slice? {
                guard cursor < batch.chunks.upperBound else { return nil }
                let slice = batch.plan.layout.slice(of: batch, chunk: cursor)
                cursor += 1
                return slice
            }
        }
    }

    /// What one chunk gives the read.
    package struct Slice: Sendable, Equatable {
        /// The chunk's index in the file.
        package let chunk: UInt64
        /// The chunk's plaintext length (a full chunk, or less for the last).
        package let chunkLength: Int
        /// Whether this is the file's last chunk (bound into its tag).
        package let isLastChunk: Bool
        /// Where the chunk's sealed bytes start in its batch's fetched bytes.
        package let sealedOffset: Int
        /// Bytes dropped at the start of the chunk's plaintext.
        package let skip: Int
        /// Bytes the chunk gives the read.
        package let count: Int
        /// Where they go in the caller's buffer.
        package let destination: Int

        package init(chunk: UInt64, chunkLength: Int, isLastChunk: Bool, sealedOffset: Int,
                    skip: Int, count: Int, destination: Int) {
            self.chunk = chunk
            self.chunkLength = chunkLength
            self.isLastChunk = isLastChunk
            self.sealedOffset = sealedOffset
            self.skip = skip
            self.count = count
            self.destination = destination
        }

        /// The chunk's sealed bytes (ciphertext and tag) in the fetched bytes.
        package var sealedRange: Range<Int> { sealedOffset..<(sealedOffset + chunkLength + Int(ChunkLayout.overhead)) }
        /// The bytes wanted, in the chunk's plaintext.
        package var plaintextRange: Range<Int> { skip..<(skip + count) }
        /// Where they go in the caller's buffer.
        package var destinationRange: Range<Int> { destination..<(destination + count) }
        /// Whether the read wants the whole chunk, so it can be decrypted
        /// straight into the caller's buffer.
        package var coversWholeChunk: Bool { count == chunkLength }
    }
}
