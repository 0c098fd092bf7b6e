import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// What to pack and how.
package struct PackOptions: Sendable {
    /// log2 of the chunk size.
    package var chunkSizeLog2: UInt8 = BundleFormat.defaultChunkSizeLog2
    /// Glob patterns to leave out (see `SourceTree`).
    package var excludes: [[UInt8]] = []
    /// One key slot is written per secret.
    package var keys: [KeyMaterial] = []
    /// One key slot per recipient public key (X25519 or RSA): packing to
    /// recipients needs no secret at all.
    package var recipients: [PublicKey] = []
    /// scrypt cost for passphrase slots.
    package var scrypt: Scrypt.Parameters = .default
    /// Refuse symlinks whose targets lead outside the bundle (absolute, or
    /// climbing above the root) instead of storing them with a warning:
    /// readers refuse such bundles unless told otherwise.
    package var refusesExternalSymlinks = false
    /// When given, the bundle is signed with it (``BundleSignature``): its
    /// sealed chunks are hashed as they are written, which costs SHA-256
    /// over the payload on the writer thread.
    package var signingKey: SigningKey?
    /// How chunks are compressed: `.none` writes a version 1 bundle (unless
    /// files share a body), `.zstd` a version 2 bundle.
    package var compression: CompressionMethod = .none
    /// The zstd level, 1 … 19.
    package var compressionLevel = CompressionMethod.defaultZstdLevel
    /// Advanced as files are packed, for a progress display.
    package var progress: WorkProgress?
    /// Flat or paged index (`.automatic`: paged for large or version 2 bundles).
    package var indexLayout = IndexLayout.automatic
    /// With compression, files of 1 byte up to (not including) this size
    /// go into shared fragments (``FragmentPacker``; capped at the chunk
    /// size); nil: ``FragmentPacker/defaultThreshold(chunkSize:)``, 0: none.
    /// A flat ``indexLayout`` has none (fragments need a paged index).
    package var fragmentThreshold: Int?

    package init() {}
}

/// What a pack run did.
package struct PackSummary: Sendable {
    package var files = 0
    package var directories = 0
    package var symlinks = 0
    package var skipped = 0
    package var excluded = 0
    /// Symlinks stored although they lead outside the bundle (each warned about).
    package var externalSymlinks = 0
    package var plaintextBytes: UInt64 = 0
    package var bundleBytes: UInt64 = 0
    /// Files stored as a body another file already had (deduplicated).
    package var sharedFiles = 0
    /// Their bytes, not stored again.
    package var sharedBytes: UInt64 = 0
    /// Files stored as slices of fragments (deduplicated ones included).
    package var fragmentFiles = 0
    /// Fragments written.
    package var fragments = 0
    /// The format version written.
    package var formatVersion = BundleFormat.version
    /// The signer's fingerprint, when the bundle was signed.
    package var signerFingerprint: String?
}

/// Writes a bundle from a source directory.
///
/// The bundle is written to an unnamed file and linked into place only when
/// complete and synced (`AtomicFile`): on any failure nothing is left at the
/// destination and an existing bundle stays as it was. Plaintext exists only
/// in one buffer of a few chunks (``FileEncryptor``), wiped at the end, and in
/// the source files' own page cache, which ``SourcePrefetcher`` fills ahead
/// of the reads.
package enum BundleWriter {
    /// Packs `source` into `destination`.
    ///
    /// - Parameters:
    ///   - source: the source directory (path bytes).
    ///   - destination: the bundle path (path bytes).
    ///   - options: chunk size, excludes, keys.
    ///   - warn: receives one message and path per skipped entry, per
    ///     symlink stored that leads outside the bundle, and (with the
    ///     destination) for passphrase slots costlier than readers allow by
    ///     default.
    /// - Returns: counts and sizes.
    /// - Throws: `BundleError` naming what failed and where;
    ///   `.externalSymlink` for the first such link when
    ///   `options.refusesExternalSymlinks` (before anything is written).
    package static func pack(source: [UInt8], destination: [UInt8], options: PackOptions,
                            warn: (String, [UInt8]) -> Void) throws -> PackSummary {
        guard !options.keys.isEmpty || !options.recipients.isEmpty else { throw BundleError.noKeyGiven }
        guard BundleFormat.chunkSizeLog2Range.contains(options.chunkSizeLog2) else {
            throw BundleError.invalidChunkSize(log2: Int(options.chunkSizeLog2))
        }
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
        let root: FileDescriptor
        do { root = try FileDescriptor.open(source, flags: O_RDONLY | O_DIRECTORY, operation: "open source directory") } catch {
            throw BundleError.sourceUnreadable(errno: error.errno, path: source)
        }
        let rootFD = root.rawValue
        var tree = try SourceTree(root: source, rootFD: rootFD, excludes: options.excludes, warn: warn)
        let externalSymlinks = try checkSymlinks(of: tree, source: source, refusing: options.refusesExternalSymlinks, warn: warn)

        let layout = ChunkLayout(chunkSizeLog2: options.chunkSizeLog2)
        let bundleID = try randomBytes(BundleFormat.idSize)
        let contentKey: SymmetricKey
        do { contentKey = try SymmetricKey.random() } catch { throw BundleError.crypto("random generator failed") }
        let keys = try BundleKeys(contentKey: contentKey, bundleID: bundleID)
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
        let headerLength = BundleHeader(bundleID: bundleID, layout: layout, slots: slots, payloadLength: 0,
                                        indexOffset: 0, indexLength: 0).headerLength

        let output = try AtomicFile(destination: destination)
        var summary = PackSummary()
        var bodies = [FileBody?](repeating: nil, count: tree.nodes.count)
        let sink = try ChunkSink(fd: output.file.rawValue, startOffset: UInt64(headerLength), path: destination,
                                 hashing: options.signingKey != nil)
        let pipeline = options.compression == .zstd
            ? try ChunkPipeline(chunkSize: Int(layout.chunkSize), level: options.compressionLevel, bundleID: bundleID, sink: sink) : nil
        // Small files go into fragments, after every other body; fragments
        // live in a paged index, so a flat one asked for has none.
        var fragments = FragmentPacker(threshold: options.compression == .none || options.indexLayout == .flat ? 0
                                           : options.fragmentThreshold ?? FragmentPacker.defaultThreshold(chunkSize: layout.chunkSize),
                                       chunkSize: layout.chunkSize)
        let fragmentOrder = fragments.order(tree.nodes)
        // Files in the order they are read; the prefetcher keeps the disk
        // busy ahead of them.
        let readOrder = tree.nodes.indices.filter { tree.nodes[$0].kind == .file && !fragments.takes(size: tree.nodes[$0].size) }
            + fragmentOrder
        var sequences = [Int: Int](minimumCapacity: readOrder.count)
        for (sequence, position) in readOrder.enumerated() { sequences[position] = sequence }
        let files = readOrder.map { SourcePrefetcher.File(relativePath: tree.nodes[$0].relativePath, size: tree.nodes[$0].size) }
        let prefetcher = SourcePrefetcher(root: root, files: files)
        defer { prefetcher.stop() }
        let encryptor = try FileEncryptor(layout: layout, keys: keys, pipeline: pipeline, progress: options.progress,
                                          prefetcher: prefetcher)
        var deduplicator = Deduplicator(tree.nodes.filter { !fragments.takes(size: $0.size) })
        func fileSource(_ position: Int) -> FileEncryptor.Source {
            FileEncryptor.Source(relativePath: tree.nodes[position].relativePath, rootFD: rootFD,
                                 displayPath: SourceTree.join(source, tree.nodes[position].relativePath),
                                 identity: (tree.nodes[position].device, tree.nodes[position].inode),
                                 sequence: sequences[position] ?? 0)
        }
        options.progress?.begin(files: tree.nodes.count { $0.kind == .file },
                                bytes: tree.nodes.reduce(0) { $1.kind == .file ? $0 &+ $1.size : $0 })
        for position in tree.nodes.indices {
            switch tree.nodes[position].kind {
            case .directory:
                summary.directories += 1
            case .symlink:
                summary.symlinks += 1
            case .file:
                if fragments.takes(size: tree.nodes[position].size) { continue }
                let (snapshot, body, shared) = try deduplicator.store(fileSource(position), size: tree.nodes[position].size,
                                                                      encryptor: encryptor, sink: sink)
                bodies[position] = body
                tree.nodes[position].size = snapshot.size
                tree.nodes[position].mode = snapshot.mode
                tree.nodes[position].mtimeSeconds = snapshot.mtimeSeconds
                tree.nodes[position].mtimeNanoseconds = snapshot.mtimeNanoseconds
                summary.files += 1
                summary.plaintextBytes += snapshot.size
                if shared {
                    summary.sharedFiles += 1
                    summary.sharedBytes += snapshot.size
                }
                options.progress?.finishFile()
            }
        }
        let snapshots = try fragments.pack(fragmentOrder.map { ($0, fileSource($0), tree.nodes[$0].size) }, encryptor: encryptor,
                                           chunkSize: Int(layout.chunkSize))
        var sliceOffsets: [Int: UInt64] = [:]
        for position in fragmentOrder {
            guard let snapshot = snapshots[position] else { preconditionFailure("internal error: a small file not packed") }
            tree.nodes[position].size = snapshot.size
            tree.nodes[position].mode = snapshot.mode
            tree.nodes[position].mtimeSeconds = snapshot.mtimeSeconds
            tree.nodes[position].mtimeNanoseconds = snapshot.mtimeNanoseconds
            if let placement = fragments.placements[position] {
                bodies[position] = placement.body
                sliceOffsets[position] = placement.offset
                summary.fragmentFiles += 1
            } else {
                // Emptied since the walk: an empty file, no slice.
                bodies[position] = FileBody(first: sink.dataLength, fileID: try randomBytes(BundleFormat.idSize))
            }
            summary.files += 1
            summary.plaintextBytes += snapshot.size
        }
        summary.sharedFiles += fragments.sharedFiles
        summary.sharedBytes += fragments.sharedBytes
        summary.fragments = fragments.fragmentCount
        // Every chunk in the sink, every body complete.
        try encryptor.finish()
        prefetcher.stop()
        var features = BundleFeatures.needed(compression: options.compression, level: options.compressionLevel,
                                             sharesBodies: summary.sharedFiles > 0)
        if fragments.fragmentCount > 0 { features = features.withFragments() }
        summary.formatVersion = features.formatVersion
        summary.directories -= 1 // the root is not counted
        summary.skipped = tree.skipped
        summary.excluded = tree.excluded
        summary.externalSymlinks = externalSymlinks

        // Everything written so far is chunk data, in index order.
        let chunkDigest = try sink.dataDigest()
        // The index, sealed as one unit after the data.
        let indexOffset = sink.dataLength
        // Plaintext, then (sealed in place below) ciphertext.
        var index = try IndexBuilder.serialize(tree.nodes, bodies: bodies, sliceOffsets: sliceOffsets, creationTime: Int64(time(nil)))
        defer { index.withUnsafeMutableBytes { SecureBytes.wipe($0) } }
        // Fragments live in the table stream of a paged index.
        if features.hasFragments || options.indexLayout.isPaged(features: features, entryCount: tree.nodes.count) {
            summary.formatVersion = BundleFormat.version2
            let sealed = try PagedIndexWriter.write(flat: index, layout: layout, features: features, keys: keys, slots: slots,
                                                    indexOffset: indexOffset, chunkDigest: chunkDigest,
                                                    signingKey: options.signingKey, into: sink)
            summary.signerFingerprint = sealed.signerFingerprint
            return try finish(sealed.header, headerLength: headerLength, keys: keys, sink: sink, output: output, summary: summary)
        }
        let indexLength = UInt64(index.count + AESGCM.tagByteCount)
        let payloadLength = indexOffset + indexLength
        var header = BundleHeader(bundleID: bundleID, layout: layout, slots: slots, payloadLength: payloadLength,
                                  indexOffset: indexOffset, indexLength: indexLength, features: features)
        // Encrypted in place: a second buffer would double the index's share
        // of peak memory, which grows with the number of entries.
        let tag = try sealIndexInPlace(&index, keys: keys, aad: IndexBuilder.associatedData(header))
        if let signingKey = options.signingKey, let chunkDigest {
            let hasher = SHA256.Hasher()
            index.withUnsafeBytes { hasher.update($0) }
            tag.withUnsafeBytes { hasher.update($0) }
            let signature = try BundleSignature.sign(header: header, indexDigest: hasher.finalize(), keys: keys,
                                                     chunkDigest: chunkDigest, with: signingKey)
            header = header.replacingSignature(with: signature.slot)
            summary.signerFingerprint = signature.signerFingerprint
        }
        try sink.append(index)
        try sink.append(tag)
        return try finish(header, headerLength: headerLength, keys: keys, sink: sink, output: output, summary: summary)
    }

    /// Flushes the payload, writes the header and renames the bundle into place.
    private static func finish(_ header: BundleHeader, headerLength: Int, keys: BundleKeys, sink: ChunkSink, output: AtomicFile,
                               summary: PackSummary) throws -> PackSummary {
        var summary = summary
        try sink.finish()
        let headerBytes = try header.serialized(keys: keys)
        precondition(headerBytes.count == headerLength, "internal error: header length changed")
        try headerBytes.withUnsafeBytes { try output.file.writeAll($0, toAbsoluteOffset: 0) }
        summary.bundleBytes = UInt64(headerLength) + header.payloadLength
        try output.commit()
        return summary
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

    /// Encrypts the index plaintext in place and returns its tag.
    private static func sealIndexInPlace(_ index: inout [UInt8], keys: BundleKeys, aad: [UInt8]) throws -> [UInt8] {
        var tag = [UInt8](repeating: 0, count: AESGCM.tagByteCount)
        do {
            let gcm = try AESGCM()
            try index.withUnsafeMutableBytes { buffer in
                try tag.withUnsafeMutableBytes { t in
                    try IndexBuilder.zeroNonce.withUnsafeBytes { nonce in
                        try aad.withUnsafeBytes { a in
                            try gcm.seal(key: keys.indexKey, nonce: nonce, aad: a, plaintext: UnsafeRawBufferPointer(buffer),
                                         into: buffer, tag: t)
                        }
                    }
                }
            }
        } catch {
            throw BundleError.crypto("index encryption failed")
        }
        return tag
    }
}
