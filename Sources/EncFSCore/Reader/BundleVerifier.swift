import CryptCore

/// Reads and authenticates every chunk of an open bundle, and hashes the
/// sealed chunks as it goes: the chunk digest a signature records
/// (``BundleSignature``), which opening a bundle does not check.
///
/// Files are taken in index order and each file's chunks in order, the
/// order in which `encfs-pack` writes them (fragments last, in payload
/// order: `BundleIndex.forEachBody`); each chunk is hashed as stored
/// (ciphertext ‖ tag), damaged or not. A body that several files share
/// (format version 2) is checked and hashed once, with the first of them:
/// the packer wrote it once. A compressed chunk must also inflate to its
/// length. Memory is constant: one batch of
/// sealed chunks (about 1 MiB) and one chunk of plaintext, `mlock`ed where
/// the limit allows and wiped at the end; no plaintext leaves this type.
package struct BundleVerifier {
    /// A file with chunks that failed authentication (or could not be read).
    package struct DamagedFile: Sendable {
        /// The file's entry.
        package let entry: IndexEntry
        /// The damaged chunks, ascending.
        package let chunks: [UInt64]
        /// How many chunks the file has.
        package let chunkCount: UInt64
    }

    /// What a verification found.
    package struct Report: Sendable {
        /// Regular files checked.
        package var files = 0
        /// Chunks checked.
        package var chunks: UInt64 = 0
        /// Files with damaged chunks, in index order.
        package var damaged: [DamagedFile] = []
        /// SHA-256 over every sealed chunk, in index order; nil when not
        /// asked for.
        package var chunkDigest: [UInt8]?

        /// Whether the signature's chunk digest is this one; nil when the
        /// bundle is not signed or no digest was taken.
        ///
        /// - Throws: `BundleError.unsupportedSignature`.
        package func matchesSignature(of header: BundleHeader) throws -> Bool? {
            guard let chunkDigest, let signature = try header.signature() else { return nil }
            return signature.chunkDigest == chunkDigest
        }
    }

    /// Sealed bytes read at once (at least one chunk).
    static let batchBytes = 1 << 20

    /// Verifies every chunk of `reader`'s bundle.
    ///
    /// - Parameter hashing: take the chunk digest (SHA-256 over the whole
    ///   payload's chunk data: worth it only for a signed bundle, or to sign).
    /// - Throws: `BundleError.io` when reading fails for a reason other than
    ///   the bundle ending early, `.crypto`, `.corruptIndex` from a paged
    ///   index that changed or breaks a rule that spans its pages. Damaged chunks are reported, not thrown.
    package static func verify(_ reader: BundleReader, hashing: Bool = true, progress: WorkProgress? = nil) throws -> Report {
        // The reader's own scratch: a batch buffer and a locked plaintext
        // chunk (or fragment unit), wiped when the workspace goes.
        let workspace = try ChunkWorkspace(layout: reader.header.layout, fragmentLayout: reader.header.fragmentLayout,
                                           bundleID: reader.header.bundleID, batchBytes: batchBytes,
                                           compressed: reader.header.features.isCompressed)
        // The buffers belong to the workspace: keep it alive to the end.
        defer { withExtendedLifetime(workspace) {} }
        let hasher = hashing ? SHA256.Hasher() : nil
        var report = Report()
        let index = reader.index
        // A paged index's rules that span pages (a flat one was checked at open).
        try index.checkWholeIndex()
        progress?.begin(files: index.fileCount, bytes: index.totalFileBytes)
        // Bodies in the chunk digest's order, each once (a fragment after
        // every file's own body).
        try index.forEachBody(file: { _ in
            report.files += 1
            progress?.finishFile()
        }, body: { entry in
            let layout = index.layout(of: entry)
            let batchChunks = layout.chunksPerBatch(batchBytes: batchBytes)
            let chunkCount = layout.chunkCount(forPlaintextSize: entry.fileSize)
            let key = try reader.fileKey(for: entry)
            var damaged: [UInt64] = []
            var batch: Range<UInt64> = 0..<min(chunkCount, UInt64(batchChunks))
            try entry.withFileID { fileID in
                while !batch.isEmpty {
                    damaged += try check(entry, chunks: batch, reader: reader, key: key, fileID: fileID,
                                         workspace: workspace, hasher: hasher)
                    progress?.add(bytes: layout.plaintextBytes(ofChunks: batch, plaintextSize: entry.fileSize))
                    batch = batch.upperBound..<min(chunkCount, batch.upperBound + UInt64(batchChunks))
                }
            }
            report.chunks += chunkCount
            if !damaged.isEmpty { report.damaged.append(DamagedFile(entry: entry, chunks: damaged, chunkCount: chunkCount)) }
        })
        report.chunkDigest = hasher?.finalize()
        return report
    }

    /// Reads the consecutive chunks `chunks` of `entry` with one read,
    /// hashes and opens each (and inflates each compressed one).
    ///
    /// - Returns: the chunks that failed or were cut off by the end of the
    ///   bundle.
    private static func check(_ entry: IndexEntry, chunks: Range<UInt64>, reader: BundleReader, key: SymmetricKey,
                              fileID: UnsafeRawBufferPointer, workspace: ChunkWorkspace, hasher: SHA256.Hasher?) throws -> [UInt64] {
        let layout = reader.index.layout(of: entry)
        let size = entry.fileSize
        let window = entry.hasChunkTable ? try reader.index.chunkTableWindow(of: entry, chunks: chunks, into: workspace.tableEntries) : nil
        let bytes = window.map { layout.storedRange(ofChunks: chunks, in: $0) } ?? layout.ciphertextRange(ofChunks: chunks, plaintextSize: size)
        let want = Int(bytes.count)
        let sealed = workspace.sealed
        let got = try reader.source.read(into: UnsafeMutableRawBufferPointer(rebasing: sealed[0..<want]),
                                         atOffset: UInt64(reader.header.headerLength) + entry.payloadOffset + bytes.lowerBound)
        hasher?.update(UnsafeRawBufferPointer(rebasing: sealed[0..<got]))
        var damaged: [UInt64] = []
        for chunk in chunks {
            let range = window.map { layout.storedRange(ofChunk: chunk, in: $0) }
                ?? layout.ciphertextRange(ofChunks: chunk..<(chunk + 1), plaintextSize: size)
            let start = Int(range.lowerBound - bytes.lowerBound)
            let count = Int(range.count)
            // Cut off by the end of the bundle: damaged, as is the rest.
            guard start + count <= got else {
                damaged.append(chunk)
                continue
            }
            let encoding = window.map { layout.storedEncoding(ofChunk: chunk, in: $0) } ?? .raw
            let plainLength = Int(layout.plaintextRange(ofChunk: chunk, plaintextSize: size).count)
            // A zstd frame is opened in place (hashed already), as the
            // reader does; a raw chunk into the plaintext buffer.
            let stored = UnsafeMutableRawBufferPointer(rebasing: sealed[start..<(start + count)])
            let opened = UnsafeMutableRawBufferPointer(rebasing: (encoding == .raw ? workspace.plaintext : stored)[0..<(count - Int(ChunkLayout.overhead))])
            var ok = try workspace.codec.open(key: key, fileID: fileID, chunk: chunk, last: layout.isLastChunk(chunk, plaintextSize: size),
                                              encoding: encoding, sealed: UnsafeRawBufferPointer(stored), into: opened)
            if ok, encoding == .zstd {
                let target = UnsafeMutableRawBufferPointer(rebasing: workspace.plaintext[0..<plainLength])
                ok = workspace.decompressor?.decompress(UnsafeRawBufferPointer(opened), into: target) ?? false
                SecureBytes.wipe(opened)
            }
            if !ok { damaged.append(chunk) }
        }
        return damaged
    }
}

/// The bodies a whole pass over a bundle has taken, by payload offset: a
/// body shared by several files (format version 2) is taken once, with the
/// first file that has it. A file is a repeat only if it is the same body:
/// offset, size, file id and chunk table (anything else at the same offset
/// is checked on its own, and fails).
struct SharedBodies {
    private var seen: [UInt64: BodyRecord] = [:]

    /// Whether `entry`'s body has not been taken yet (and is now).
    mutating func isFirstSight(of entry: IndexEntry) -> Bool {
        let body = BodyRecord(entry)
        if let known = seen[body.start], known == body { return false }
        seen[body.start] = body
        return true
    }
}
