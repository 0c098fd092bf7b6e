import EncFSCore
import Synchronization

/// The sealed index of a remote bundle kept in memory (`--prefetch index`
/// or `all`), fetched whole at the first read of any of it.
///
/// Why not when the bundle is opened: the index's length comes from the
/// header, and nobody has authenticated the header then. A hostile server
/// that claimed a 1 TiB index made `encfs-mount -f` and `encfs-inspect`
/// allocate it before a key was tried (issue 26, finding 4). A reader
/// authenticates the header before it reads the index (`BundleReader`), so
/// by the first read the length is one the key's holder wrote. A tool that
/// reads the index without a key (the digest a signature covers) gets it
/// as it arrives: the buffer grows by one piece per answered request,
/// never ahead of the bytes, whatever the header claims.
final class PinnedIndex: Sendable {
    /// Where the index starts in the bundle.
    let start: UInt64
    /// Its length, as the header says.
    let length: UInt64
    /// Bytes per request.
    private let piece: Int
    /// Fewest bytes per request: an index of a million entries in few
    /// requests, and at most this much allocated ahead of the bytes.
    static let smallestPiece = 8 << 20
    /// The whole index once fetched.
    private let bytes = Mutex<[UInt8]?>(nil)
    /// Held while one reader fetches; the others wait for its result.
    private let fetching = Mutex<Void>(())

    init(start: UInt64, length: UInt64, piece: Int) {
        self.start = start
        self.length = length
        self.piece = max(piece, 4096)
    }

    /// Copies the index's bytes from `position` (at or after ``start``)
    /// into `buffer`, fetching the whole index over `http` first if this is
    /// the first read.
    ///
    /// - Returns: bytes copied (up to the end of the index).
    /// - Throws: `RemoteError` when the index cannot be fetched (the next
    ///   read tries again).
    func read(at position: UInt64, into buffer: UnsafeMutableRawBufferPointer, over http: HTTPByteSource) throws(RemoteError) -> Int {
        let index = try whole(over: http)
        let from = Int(position - start)
        let n = min(buffer.count, index.count - from)
        guard n > 0 else { return 0 }
        index.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[from..<(from + n)])) }
        return n
    }

    /// Drops the bytes held (they failed authentication: damaged on the
    /// way), so that the next read fetches them again.
    func discard() {
        fetching.withLock { _ in bytes.withLock { $0 = nil } }
    }

    private func whole(over http: HTTPByteSource) throws(RemoteError) -> [UInt8] {
        if let index = bytes.withLock({ $0 }) { return index }
        return try fetching.withLock { _ throws(RemoteError) -> [UInt8] in
            if let index = bytes.withLock({ $0 }) { return index }
            var index: [UInt8] = []
            while UInt64(index.count) < length {
                let count = Int(min(UInt64(piece), length - UInt64(index.count)))
                let at = index.count
                // Grown by what the next request brings, not by the claim.
                index.append(contentsOf: repeatElement(0, count: count))
                var failure: RemoteError?
                index.withUnsafeMutableBytes { all in
                    do throws(RemoteError) {
                        try http.fetch(offset: start + UInt64(at), count: count,
                                       into: UnsafeMutableRawBufferPointer(rebasing: all[at..<(at + count)]))
                    } catch {
                        failure = error
                    }
                }
                if let failure { throw failure }
            }
            bytes.withLock { $0 = index }
            return index
        }
    }
}
