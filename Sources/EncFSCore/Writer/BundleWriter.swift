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
    /// size); nil: ``FragmentPacker/defaultThreshold(chunkSize:unitSize:)``, 0: none.
    /// A flat ``indexLayout`` has none (fragments need a paged index).
    package var fragmentThreshold: Int?
    /// log2 of the unit fragments are filled to and compressed in (one
    /// zstd frame, one sealed chunk each); nil:
    /// ``FragmentPacker/defaultUnitLog2(chunkSizeLog2:)``. At most the
    /// chunk size log2 means the chunk size (bundles as written before
    /// fragment units); at most ``BundleFormat/chunkSizeLog2Range``'s top.
    package var fragmentUnitLog2: UInt8?

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
        var plan = try PackPlan(source: source, destination: destination, options: options, warn: warn)
        let output = try AtomicFile(destination: destination)
        let sink = try ChunkSink(file: output.file, startOffset: UInt64(plan.headerLength), hashing: options.signingKey != nil)
        let (bodies, sliceOffsets, summary) = try writeBodies(&plan, into: sink)
        return try seal(plan, bodies: bodies, sliceOffsets: sliceOffsets, summary: summary, sink: sink, output: output)
    }

    /// Encrypts every file of the plan's tree into `sink`, in index order,
    /// then the small files into fragments (``FragmentPacker``), and
    /// records in the tree what each file was when it was read.
    ///
    /// - Returns: each file's body (nil for directories and symlinks), each
    ///   fragment slice's offset in its fragment, and the counts so far.
    /// - Throws: `BundleError` for a source file that cannot be read or
    ///   changed while read, `.io` for the bundle.
    private static func writeBodies(_ plan: inout PackPlan, into sink: ChunkSink) throws
        -> (bodies: [FileBody?], sliceOffsets: [Int: UInt64], summary: PackSummary) {
        let options = plan.options
        var summary = PackSummary()
        var bodies = [FileBody?](repeating: nil, count: plan.tree.nodes.count)
        let pipeline = options.compression == .zstd
            ? try ChunkPipeline(chunkSize: Int(plan.layout.chunkSize), level: options.compressionLevel, bundleID: plan.bundleID,
                                sink: sink) : nil
        // Small files go into fragments, after every other body; fragments
        // live in a paged index, so a flat one asked for has none.
        var fragments = FragmentPacker(threshold: options.compression == .none || options.indexLayout == .flat ? 0
                                           : options.fragmentThreshold ?? FragmentPacker.defaultThreshold(chunkSize: plan.layout.chunkSize,
                                                                                                    unitSize: plan.fragmentLayout.chunkSize),
                                       chunkSize: plan.layout.chunkSize,
                                       unit: plan.fragmentLayout)
        let fragmentOrder = fragments.order(plan.tree.nodes)
        // Files in the order they are read; the prefetcher keeps the disk
        // busy ahead of them.
        let nodes = plan.tree.nodes
        let readOrder = nodes.indices.filter { nodes[$0].kind == .file && !fragments.takes(size: nodes[$0].size) } + fragmentOrder
        var sequences = [Int: Int](minimumCapacity: readOrder.count)
        for (sequence, position) in readOrder.enumerated() { sequences[position] = sequence }
        let files = readOrder.map { SourcePrefetcher.File(relativePath: nodes[$0].relativePath, size: nodes[$0].size) }
        let prefetcher = SourcePrefetcher(root: plan.root, files: files)
        defer { prefetcher.stop() }
        let encryptor = try FileEncryptor(layout: plan.layout, keys: plan.keys, pipeline: pipeline, progress: options.progress,
                                          prefetcher: prefetcher)
        var deduplicator = Deduplicator(nodes.filter { !fragments.takes(size: $0.size) })
        let (root, sourcePath) = (plan.root, plan.source)
        let source = { (position: Int) in
            FileEncryptor.Source(relativePath: nodes[position].relativePath, root: root,
                                 displayPath: SourceTree.join(sourcePath, nodes[position].relativePath),
                                 identity: (nodes[position].device, nodes[position].inode), sequence: sequences[position] ?? 0)
        }
        options.progress?.begin(files: plan.tree.nodes.count { $0.kind == .file },
                                bytes: plan.tree.nodes.reduce(0) { $1.kind == .file ? $0 &+ $1.size : $0 })
        for position in plan.tree.nodes.indices {
            switch plan.tree.nodes[position].kind {
            case .directory:
                summary.directories += 1
            case .symlink:
                summary.symlinks += 1
            case .file:
                let node = plan.tree.nodes[position]
                if fragments.takes(size: node.size) { continue }
                let (snapshot, body, shared) = try deduplicator.store(source(position), size: node.size, encryptor: encryptor,
                                                                      sink: sink)
                bodies[position] = body
                plan.tree.nodes[position].size = snapshot.size
                plan.tree.nodes[position].mode = snapshot.mode
                plan.tree.nodes[position].mtimeSeconds = snapshot.mtimeSeconds
                plan.tree.nodes[position].mtimeNanoseconds = snapshot.mtimeNanoseconds
                summary.files += 1
                summary.plaintextBytes += snapshot.size
                if shared {
                    summary.sharedFiles += 1
                    summary.sharedBytes += snapshot.size
                }
                options.progress?.finishFile()
            }
        }
        let unitPipeline = fragmentOrder.isEmpty ? nil : try unitPipeline(plan, encryptor: encryptor, sink: sink)
        let sliceOffsets = try writeFragments(&fragments, order: fragmentOrder, source: source, plan: &plan, bodies: &bodies,
                                              summary: &summary, encryptor: encryptor, pipeline: unitPipeline, sink: sink)
        // Every chunk in the sink, every body complete.
        try encryptor.finish()
        try unitPipeline?.finish()
        prefetcher.stop()
        summary.directories -= 1 // the root is not counted
        summary.skipped = plan.tree.skipped
        summary.excluded = plan.tree.excluded
        summary.externalSymlinks = plan.externalSymlinks
        return (bodies, sliceOffsets, summary)
    }

    /// The pipeline of fragment units larger than chunks (nil when units
    /// are chunks), started once every file's chunks are in the sink: a
    /// pipeline hands its chunks to the sink in order, so the two never
    /// interleave.
    private static func unitPipeline(_ plan: PackPlan, encryptor: FileEncryptor, sink: ChunkSink) throws -> ChunkPipeline? {
        guard plan.fragmentLayout != plan.layout else { return nil }
        try encryptor.finish()
        return try ChunkPipeline(chunkSize: Int(plan.fragmentLayout.chunkSize), level: plan.options.compressionLevel,
                                 bundleID: plan.bundleID, sink: sink)
    }

    /// Packs the small files (positions `order`, in that order) into
    /// fragments after every other body, and records each one's body,
    /// slice and snapshot.
    ///
    /// - Parameter pipeline: the pipeline of fragment units larger than
    ///   chunks; nil: the encryptor's (units of the chunk size).
    /// - Returns: each slice's offset in its fragment, by node position.
    private static func writeFragments(_ fragments: inout FragmentPacker, order: [Int], source: (Int) -> FileEncryptor.Source,
                                       plan: inout PackPlan, bodies: inout [FileBody?], summary: inout PackSummary,
                                       encryptor: FileEncryptor, pipeline: ChunkPipeline?, sink: ChunkSink) throws -> [Int: UInt64] {
        let snapshots = try fragments.pack(order.map { ($0, source($0), plan.tree.nodes[$0].size) }, encryptor: encryptor,
                                           pipeline: pipeline)
        var sliceOffsets: [Int: UInt64] = [:]
        for position in order {
            guard let snapshot = snapshots[position] else { preconditionFailure("internal error: a small file not packed") }
            plan.tree.nodes[position].size = snapshot.size
            plan.tree.nodes[position].mode = snapshot.mode
            plan.tree.nodes[position].mtimeSeconds = snapshot.mtimeSeconds
            plan.tree.nodes[position].mtimeNanoseconds = snapshot.mtimeNanoseconds
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
        return sliceOffsets
    }

    /// Seals the index after the chunk data (flat, or paged), signs the
    /// bundle when asked, writes the header and links the bundle into place.
    ///
    /// - Returns: `summary` with the format version, the signer and the
    ///   bundle's size.
    /// - Throws: `BundleError.crypto`, `.io`.
    private static func seal(_ plan: PackPlan, bodies: [FileBody?], sliceOffsets: [Int: UInt64], summary: PackSummary,
                             sink: ChunkSink, output: AtomicFile) throws -> PackSummary {
        let options = plan.options
        var summary = summary
        var features = BundleFeatures.needed(compression: options.compression, level: options.compressionLevel,
                                             sharesBodies: summary.sharedFiles > 0)
        if summary.fragments > 0 {
            features = features.withFragments(unitLog2: plan.fragmentLayout == plan.layout ? 0 : plan.fragmentLayout.chunkSizeLog2)
        }
        summary.formatVersion = features.formatVersion
        // Everything written so far is chunk data, in index order.
        let chunkDigest = try sink.dataDigest()
        // The index, sealed as one unit after the data.
        let indexOffset = sink.dataLength
        // Plaintext, then (sealed in place below) ciphertext.
        var index = try IndexBuilder.serialize(plan.tree.nodes, bodies: bodies, sliceOffsets: sliceOffsets,
                                               creationTime: Int64(time(nil)))
        defer { index.withUnsafeMutableBytes { SecureBytes.wipe($0) } }
        // Fragments live in the table stream of a paged index.
        if features.hasFragments || options.indexLayout.isPaged(features: features, entryCount: plan.tree.nodes.count) {
            summary.formatVersion = BundleFormat.version2
            let sealed = try PagedIndexWriter.write(flat: index, layout: plan.layout, features: features, keys: plan.keys,
                                                    slots: plan.slots, indexOffset: indexOffset, chunkDigest: chunkDigest,
                                                    signingKey: options.signingKey, into: sink)
            summary.signerFingerprint = sealed.signerFingerprint
            return try finish(sealed.header, headerLength: plan.headerLength, keys: plan.keys, sink: sink, output: output,
                              summary: summary)
        }
        let indexLength = UInt64(index.count + AESGCM.tagByteCount)
        let payloadLength = indexOffset + indexLength
        var header = BundleHeader(bundleID: plan.bundleID, layout: plan.layout, slots: plan.slots, payloadLength: payloadLength,
                                  indexOffset: indexOffset, indexLength: indexLength, features: features)
        // Encrypted in place: a second buffer would double the index's share
        // of peak memory, which grows with the number of entries.
        let tag = try sealIndexInPlace(&index, keys: plan.keys, aad: IndexBuilder.associatedData(header))
        if let signingKey = options.signingKey, let chunkDigest {
            let hasher = SHA256.Hasher()
            index.withUnsafeBytes { hasher.update($0) }
            tag.withUnsafeBytes { hasher.update($0) }
            let signature = try BundleSignature.sign(header: header, indexDigest: hasher.finalize(), keys: plan.keys,
                                                     chunkDigest: chunkDigest, with: signingKey)
            header = header.replacingSignature(with: signature.slot)
            summary.signerFingerprint = signature.signerFingerprint
        }
        try sink.append(index)
        try sink.append(tag)
        return try finish(header, headerLength: plan.headerLength, keys: plan.keys, sink: sink, output: output, summary: summary)
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
