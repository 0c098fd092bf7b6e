import CryptCore
import Synchronization

/// One file of a bundle with its own key and nothing else of the bundle's
/// keys or index: it reads that file's chunks after the reader it came
/// from is gone (``BundleReader/detachedFile(_:)``).
///
/// Its key is self-wiping storage, wiped when the last reference goes;
/// the workspaces its reads used (cipher contexts holding the key
/// schedule, the last decrypted chunk) are its own and go with it, so no
/// copy of the key outlives the file.
package final class DetachedFile: Sendable {
    /// The file's index entry (size, where its chunks are, its id).
    package let entry: IndexEntry
    private let key: SymmetricKey
    private let header: BundleHeader
    private let source: any ByteSource
    private let chunksPerBatch: Int
    /// Workspaces of finished reads, for the next ones (several threads
    /// may read one file at once).
    private let pool = Mutex<[ChunkWorkspace]>([])

    init(entry: IndexEntry, key: SymmetricKey, header: BundleHeader, source: any ByteSource, chunksPerBatch: Int) {
        self.entry = entry
        self.key = key
        self.header = header
        self.source = source
        self.chunksPerBatch = chunksPerBatch
    }

    /// Reads plaintext from `offset` into `buffer` as
    /// `BundleReader.read(_:fromOffset:into:using:)` does, with a workspace
    /// of this file's own.
    ///
    /// - Returns: `buffer.count`, or fewer only at end of file.
    /// - Throws: `BundleError.corruptChunk` (the buffer is then wiped),
    ///   `.io`, `.crypto` when a cipher context cannot be made.
    package func read(fromOffset offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        // The index bounded entry.payloadOffset and the sealed body by the payload,
        // and the header the payload by the file size: the sum cannot wrap.
        let plan = header.layout.readPlan(forPlaintextOffset: offset, count: buffer.count, plaintextSize: entry.fileSize,
                                          bodyOffset: UInt64(header.headerLength) + entry.payloadOffset, chunksPerBatch: chunksPerBatch)
        guard !plan.isEmpty else { return 0 }
        let workspace = try pool.withLock({ $0.popLast() }) ?? ChunkWorkspace(layout: header.layout, bundleID: header.bundleID)
        defer { pool.withLock { $0.append(workspace) } }
        return try Self.openChunks(plan, of: entry, key: key, source: source, into: buffer, using: workspace)
    }

    /// Fetches and opens the raw chunks `plan` names into `buffer`.
    ///
    /// The same steps as `BundleReader`'s loop for a file without a chunk
    /// table (the only files detached, ``BundleReader/detachedFile(_:)``);
    /// kept apart since format 2 made that loop read chunk tables from the
    /// index, which a detached file no longer has.
    ///
    /// - Returns: `plan.byteCount`.
    /// - Throws: `BundleError.corruptChunk` (the buffer is then wiped), `.io`.
    @inline(__always)
    private static func openChunks(_ plan: ChunkReadPlan, of entry: IndexEntry, key: SymmetricKey, source: any ByteSource,
                           into buffer: UnsafeMutableRawBufferPointer, using workspace: ChunkWorkspace) throws -> Int {
        do {
            try entry.withFileID { fileID in
                for batch in plan {
                    let fetched = UnsafeMutableRawBufferPointer(rebasing: workspace.sealed[0..<batch.byteCount])
                    // A source that keeps copies (a remote bundle's cache)
                    // gets one more read of a batch that failed.
                    var mayReadAgain = true
                    reading: while true {
                        let got = try source.read(into: fetched, atOffset: batch.sourceOffset)
                        // A short read means the bundle ends early: name the
                        // first chunk it cut.
                        guard got == batch.byteCount else {
                            throw BundleError.corruptChunk(entry: entry.position, chunk: batch.firstIncompleteChunk(fetched: got))
                        }
                        // The chunk being opened: only the copies of its
                        // sealed bytes are dropped when it fails.
                        var opening = 0..<batch.byteCount
                        do {
                            for slice in batch {
                                opening = slice.sealedRange
                                let sealed = UnsafeRawBufferPointer(rebasing: fetched[slice.sealedRange])
                                // Whole chunks go straight to the caller; a partly
                                // wanted one is opened aside, since nothing may be
                                // released before the whole chunk authenticated.
                                let whole = slice.coversWholeChunk
                                let target = whole ? UnsafeMutableRawBufferPointer(rebasing: buffer[slice.destinationRange])
                                                   : UnsafeMutableRawBufferPointer(rebasing: workspace.plaintext[0..<slice.chunkLength])
                                guard try workspace.codec.open(key: key, fileID: fileID, chunk: slice.chunk, last: slice.isLastChunk,
                                                               sealed: sealed, into: target) else {
                                    throw BundleError.corruptChunk(entry: entry.position, chunk: slice.chunk)
                                }
                                if !whole {
                                    UnsafeMutableRawBufferPointer(rebasing: buffer[slice.destinationRange])
                                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: target[slice.plaintextRange]))
                                }
                            }
                            break reading
                        } catch {
                            guard case BundleError.corruptChunk = error, mayReadAgain,
                                  source.discardCopies(atOffset: batch.sourceOffset + UInt64(opening.lowerBound),
                                                       count: opening.count) else { throw error }
                            mayReadAgain = false
                        }
                    }
                }
            }
        } catch {
            SecureBytes.wipe(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<plan.byteCount]))
            throw error
        }
        return plan.byteCount
    }
}
