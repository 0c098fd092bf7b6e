import EncFSCore
import Synchronization

/// What a remote mount records of its reads (``AccessLog``) and the
/// `--prefetch-list` it fetches first.
extension RemoteBundleSource: AccessRecordingSource {
    package func accessLog(with reader: BundleReader) -> [(path: [UInt8], chunks: [Range<UInt64>])] {
        let granule = accessed.granule
        let bits = accessed.bits.withLock { $0 }
        func touched(_ at: UInt64) -> Bool {
            let bit = Int((at - payloadStart) / granule)
            return bit / 64 < bits.count && bits[bit / 64] & (1 << UInt64(bit % 64)) != 0
        }
        var log: [(path: [UInt8], chunks: [Range<UInt64>])] = []
        let layout = reader.header.layout
        for position in 0..<reader.index.count {
            guard let entry = try? reader.index.entry(at: position), entry.kind == .file, entry.fileSize > 0,
                  let range = ciphertextRange(of: entry, reader: reader) else { continue }
            var chunks: [Range<UInt64>] = []
            let count = layout.chunkCount(forPlaintextSize: entry.fileSize)
            for chunk in 0..<count {
                let at = header.features.isCompressed ? range.lowerBound : range.lowerBound + layout.ciphertextOffset(ofChunk: chunk)
                guard touched(at) else { continue }
                if let last = chunks.last, last.upperBound == chunk { chunks[chunks.count - 1] = last.lowerBound..<(chunk + 1) } else {
                    chunks.append(chunk..<(chunk + 1))
                }
            }
            if !chunks.isEmpty, let path = try? reader.index.path(of: entry) { log.append((path, chunks)) }
        }
        return log
    }

    package func startPrefetch(with reader: BundleReader) {
        guard let list = prefetchList, !list.isEmpty else { return }
        var ranges: [Range<UInt64>] = []
        let layout = reader.header.layout
        for item in list {
            guard let entry = try? reader.index.resolve(path: item.path, followingLast: true), entry.kind == .file,
                  let whole = ciphertextRange(of: entry, reader: reader) else { continue }
            if item.chunks.isEmpty || header.features.isCompressed {
                ranges.append(whole)
                continue
            }
            for chunks in item.chunks {
                let count = layout.chunkCount(forPlaintextSize: entry.fileSize)
                let clamped = min(chunks.lowerBound, count)..<min(chunks.upperBound, count)
                guard !clamped.isEmpty else { continue }
                let inner = layout.ciphertextRange(ofChunks: clamped, plaintextSize: entry.fileSize)
                ranges.append((whole.lowerBound + inner.lowerBound)..<(whole.lowerBound + inner.upperBound))
            }
        }
        prefetch(ranges, exactly: true)
    }

    /// Where `entry`'s sealed chunks lie in the bundle; nil for a compressed
    /// file whose extent the index does not give here.
    private func ciphertextRange(of entry: IndexEntry, reader: BundleReader) -> Range<UInt64>? {
        let start = payloadStart + entry.payloadOffset
        let length = header.features.isCompressed ? nil : reader.header.layout.ciphertextSize(forPlaintextSize: entry.fileSize)
        guard let length, start + length <= indexStart else { return nil }
        return start..<(start + length)
    }
}

/// One bit per sealed chunk (a fetch unit's worth in a compressed
/// bundle) of the payload: set when a read touched it. Allocated once
/// when the bundle is opened; a read sets its bits under one lock.
package final class AccessLog: Sendable {
    let granule: UInt64
    let bits: Mutex<[UInt64]>

    init(payload: Range<UInt64>, granule: UInt64) {
        self.granule = max(1, granule)
        let count = Int(clamping: (UInt64(payload.count) + self.granule - 1) / self.granule)
        bits = Mutex([UInt64](repeating: 0, count: (count + 63) / 64))
    }

    /// Marks the granules of `range`, which starts `from` bytes after the
    /// payload's start.
    func record(_ range: Range<UInt64>) {
        guard !range.isEmpty else { return }
        let first = Int(range.lowerBound / granule)
        let last = Int((range.upperBound - 1) / granule)
        bits.withLock { words in
            for bit in first...last where bit / 64 < words.count { words[bit / 64] |= 1 << UInt64(bit % 64) }
        }
    }
}

/// One file of a `--prefetch-list`: its path, and the chunk ranges to
/// fetch (empty: the whole file).
package struct PrefetchItem: Sendable, Equatable {
    package var path: [UInt8]
    package var chunks: [Range<UInt64>]
    package init(path: [UInt8], chunks: [Range<UInt64>]) {
        self.path = path
        self.chunks = chunks
    }
}
