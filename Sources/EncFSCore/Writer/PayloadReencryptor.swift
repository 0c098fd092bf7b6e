import CryptCore

/// Re-encrypts a bundle's payload under new keys, streaming: each file's
/// chunks, then the sealed index, are decrypted with the reader's keys and
/// sealed again with the new ones, at the same payload offsets of the
/// output.
///
/// The payload keeps its layout: chunk and index sizes do not depend on the
/// keys, so offsets, lengths and the index plaintext (file ids included:
/// file keys derive from the content key and the bundle id, both new) stay
/// as they are, and only the header in front changes length.
///
/// Memory is constant: one batch of sealed chunks (about 1 MiB, re-sealed
/// in place) and one plaintext buffer of a chunk, `mlock`ed where the limit
/// allows and wiped when released. Plaintext is never written anywhere.
/// A chunk is authenticated before its plaintext is sealed again; the index
/// is one AES-GCM message, so its pieces are sealed again before the old
/// tag is checked at the end, and a failure there throws, for the caller
/// to discard the output.
///
/// When hashing, the new sealed chunks (in the chunk digest's order,
/// `BundleIndex.forEachBody`) and the new sealed
/// index are hashed as they are written: what a new signature records.
struct PayloadReencryptor {
    /// The SHA-256 digests of the new payload that a signature covers.
    struct Digests {
        /// Over every new sealed chunk, in index order.
        var chunks: [UInt8]
        /// Over the new sealed index, ciphertext ‖ tag.
        var index: [UInt8]
    }

    private let reader: BundleReader
    private let newKeys: BundleKeys
    private let newHeader: BundleHeader
    private let output: FileDescriptor
    private let chunkHasher: SHA256.Hasher?
    private let indexHasher: SHA256.Hasher?
    private let progress: WorkProgress?

    /// Bytes of sealed chunks read, re-sealed and written at once (at least one chunk).
    static let batchBytes = 1 << 20

    /// - Parameters:
    ///   - reader: the open bundle (old keys, authenticated index).
    ///   - newKeys: the keys to seal under (new content key and bundle id).
    ///   - newHeader: the new header (for the index's associated data and
    ///     where the payload starts in the output).
    ///   - output: the new bundle file.
    ///   - hashing: whether ``run()`` returns the new payload's digests.
    init(reader: BundleReader, newKeys: BundleKeys, newHeader: BundleHeader, output: FileDescriptor, hashing: Bool = false,
         progress: WorkProgress? = nil) {
        precondition(newHeader.payloadLength == reader.header.payloadLength && newHeader.indexOffset == reader.header.indexOffset,
                     "internal error: re-encryption keeps the payload layout")
        self.reader = reader
        self.newKeys = newKeys
        self.newHeader = newHeader
        self.output = output
        chunkHasher = hashing ? SHA256.Hasher() : nil
        indexHasher = hashing ? SHA256.Hasher() : nil
        self.progress = progress
    }

    /// Writes the whole payload to the output.
    ///
    /// - Returns: the new payload's digests when hashing, else nil.
    /// - Throws: `BundleError.corruptChunk` naming the first chunk that
    ///   fails (or cannot be read whole), `.corruptIndex` when the index
    ///   fails, `.io`, `.crypto`.
    @discardableResult
    func run() throws -> Digests? {
        // The reader's own scratch: a batch buffer and a locked plaintext
        // chunk (or fragment unit), wiped when the workspace goes.
        let compressed = reader.header.features.isCompressed
        let workspace = try ChunkWorkspace(layout: reader.header.layout, fragmentLayout: reader.header.fragmentLayout,
                                           bundleID: reader.header.bundleID, batchBytes: Self.batchBytes, compressed: compressed)
        // The buffers belong to the workspace: keep it alive to the end.
        defer { withExtendedLifetime(workspace) {} }
        let (sealed, plaintext, oldCodec) = (workspace.sealed, workspace.plaintext, workspace.codec)
        let newCodec = try ChunkCodec(bundleID: newKeys.bundleID, compressed: compressed)
        let index = reader.index
        progress?.begin(files: index.fileCount, bytes: index.totalFileBytes)
        // A body shared by several files (a fragment: all its slices) is
        // re-sealed once, in the chunk digest's order.
        try index.forEachBody(file: { _ in progress?.finishFile() }, body: { entry in
            try entry.withFileID { fileID in
                let oldKey = try reader.keys.fileKey(fileID: fileID)
                let newKey = try newKeys.fileKey(fileID: fileID)
                let layout = index.layout(of: entry)
                let batchChunks = layout.chunksPerBatch(batchBytes: Self.batchBytes)
                let chunkCount = layout.chunkCount(forPlaintextSize: entry.fileSize)
                var batch: Range<UInt64> = 0..<min(chunkCount, UInt64(batchChunks))
                while !batch.isEmpty {
                    try reseal(entry, chunks: batch, fileID: fileID, oldKey: oldKey, newKey: newKey,
                               codecs: (oldCodec, newCodec), sealed: sealed, plaintext: plaintext,
                               tableEntries: workspace.tableEntries)
                    progress?.add(bytes: layout.plaintextBytes(ofChunks: batch, plaintextSize: entry.fileSize))
                    batch = batch.upperBound..<min(chunkCount, batch.upperBound + UInt64(batchChunks))
                }
            }
        })
        try resealIndex(buffer: sealed, plaintext: plaintext)
        guard let chunkHasher, let indexHasher else { return nil }
        return Digests(chunks: chunkHasher.finalize(), index: indexHasher.finalize())
    }

    /// Re-seals the consecutive chunks `chunks` of `entry` in one read and
    /// one write. A compressed chunk's stored bytes (its zstd frame) are
    /// re-sealed as they are, with the same encoding: same length, same
    /// chunk table.
    private func reseal(_ entry: IndexEntry, chunks: Range<UInt64>, fileID: UnsafeRawBufferPointer,
                        oldKey: SymmetricKey, newKey: SymmetricKey, codecs: (old: ChunkCodec, new: ChunkCodec),
                        sealed: UnsafeMutableRawBufferPointer, plaintext: UnsafeMutableRawBufferPointer,
                        tableEntries: UnsafeMutableRawBufferPointer) throws {
        let layout = reader.index.layout(of: entry)
        let size = entry.fileSize
        let window = entry.hasChunkTable ? try reader.index.chunkTableWindow(of: entry, chunks: chunks, into: tableEntries) : nil
        let bytes = window.map { layout.storedRange(ofChunks: chunks, in: $0) } ?? layout.ciphertextRange(ofChunks: chunks, plaintextSize: size)
        let want = Int(bytes.count)
        let batch = UnsafeMutableRawBufferPointer(rebasing: sealed[0..<want])
        let got = try reader.source.read(into: batch,
                                         atOffset: UInt64(reader.header.headerLength) + entry.payloadOffset + bytes.lowerBound)
        // A short read means the bundle ends early: name the first chunk it cut.
        guard got == want else {
            throw BundleError.corruptChunk(entry: entry.position,
                                           chunk: window == nil ? chunks.lowerBound + UInt64(got) / layout.sealedChunkSize : chunks.lowerBound)
        }
        for chunk in chunks {
            let range = window.map { layout.storedRange(ofChunk: chunk, in: $0) }
                ?? layout.ciphertextRange(ofChunks: chunk..<(chunk + 1), plaintextSize: size)
            let start = Int(range.lowerBound - bytes.lowerBound)
            let count = Int(range.count)
            let encoding = window.map { layout.storedEncoding(ofChunk: chunk, in: $0) } ?? .raw
            let slot = UnsafeMutableRawBufferPointer(rebasing: batch[start..<(start + count)])
            let plain = UnsafeMutableRawBufferPointer(rebasing: plaintext[0..<(count - Int(ChunkLayout.overhead))])
            let last = layout.isLastChunk(chunk, plaintextSize: size)
            guard try codecs.old.open(key: oldKey, fileID: fileID, chunk: chunk, last: last, encoding: encoding,
                                      sealed: UnsafeRawBufferPointer(slot), into: plain) else {
                throw BundleError.corruptChunk(entry: entry.position, chunk: chunk)
            }
            // Same length sealed: the new chunk takes the old one's place.
            try codecs.new.seal(key: newKey, fileID: fileID, chunk: chunk, last: last, encoding: encoding,
                                plaintext: UnsafeRawBufferPointer(plain), into: slot)
        }
        chunkHasher?.update(UnsafeRawBufferPointer(batch))
        try output.writeAll(UnsafeRawBufferPointer(batch),
                            toAbsoluteOffset: UInt64(newHeader.headerLength) + entry.payloadOffset + bytes.lowerBound)
    }

    /// Opens the sealed index under the old index key and seals it under
    /// the new one, piece by piece, then writes the new tag after it.
    private func resealIndex(buffer: UnsafeMutableRawBufferPointer, plaintext: UnsafeMutableRawBufferPointer) throws {
        let old = reader.header
        if case .paged(let store) = reader.index.storage {
            let to = UInt64(newHeader.headerLength) + newHeader.indexOffset
            try store.reseal(source: reader.source, start: UInt64(old.headerLength) + old.indexOffset,
                             headLength: old.features.pagedIndexHeadLength,
                             old: (reader.keys.indexKey, IndexBuilder.associatedData(old)),
                             new: (newKeys.indexKey, IndexBuilder.associatedData(newHeader))) { page, offset in
                indexHasher?.update(page)
                try output.writeAll(page, toAbsoluteOffset: to + offset)
            }
            return
        }
        // Bounded by the authenticated header (indexLength ≥ the tag size).
        let length = old.indexLength - UInt64(AESGCM.tagByteCount)
        let from = UInt64(old.headerLength) + old.indexOffset
        let to = UInt64(newHeader.headerLength) + newHeader.indexOffset
        var oldTag = [UInt8](repeating: 0, count: AESGCM.tagByteCount)
        let gotTag = try oldTag.withUnsafeMutableBytes { try reader.source.read(into: $0, atOffset: from + length) }
        guard gotTag == oldTag.count else { throw BundleError.corruptIndex("index is truncated") }
        var newTag = [UInt8](repeating: 0, count: AESGCM.tagByteCount)
        let piece = min(buffer.count, plaintext.count)
        let oldAAD = IndexBuilder.associatedData(old)
        let newAAD = IndexBuilder.associatedData(newHeader)
        do {
            let opener = try AESGCM()
            let sealer = try AESGCM()
            try IndexBuilder.zeroNonce.withUnsafeBytes { nonce in
                try newAAD.withUnsafeBytes { newAAD in
                    try newTag.withUnsafeMutableBytes { newTag in
                        try sealer.seal(key: newKeys.indexKey, nonce: nonce, aad: newAAD, tag: newTag) { encrypt in
                            try oldAAD.withUnsafeBytes { oldAAD in
                                try oldTag.withUnsafeBytes { oldTag in
                                    try opener.open(key: reader.keys.indexKey, nonce: nonce, aad: oldAAD, tag: oldTag) { decrypt in
                                        var done: UInt64 = 0
                                        while done < length {
                                            let n = Int(min(length - done, UInt64(piece)))
                                            let sealedPiece = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n])
                                            let plainPiece = UnsafeMutableRawBufferPointer(rebasing: plaintext[0..<n])
                                            let got = try reader.source.read(into: sealedPiece, atOffset: from + done)
                                            guard got == n else { throw BundleError.corruptIndex("index is truncated") }
                                            try decrypt(UnsafeRawBufferPointer(sealedPiece), plainPiece)
                                            try encrypt(UnsafeRawBufferPointer(plainPiece), sealedPiece)
                                            indexHasher?.update(UnsafeRawBufferPointer(sealedPiece))
                                            try output.writeAll(UnsafeRawBufferPointer(sealedPiece), toAbsoluteOffset: to + done)
                                            done += UInt64(n)
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        } catch let error as BundleError {
            throw error
        } catch CryptError.authenticationFailure {
            throw BundleError.corruptIndex("index failed authentication")
        } catch {
            throw BundleError.crypto("index re-encryption failed")
        }
        newTag.withUnsafeBytes { indexHasher?.update($0) }
        try newTag.withUnsafeBytes { try output.writeAll($0, toAbsoluteOffset: to + length) }
    }
}
