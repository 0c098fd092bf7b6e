/// Where a bundle's bytes come from: a local file, memory, a remote object.
///
/// The reader, the index pages, the mount daemon and the rekeyer see only
/// this protocol, so a new kind of source is one new type and no change to
/// the read path. Implementations must allow ``read(into:atOffset:)``
/// from many threads at once.
public protocol ByteSource: AnyObject, Sendable {
    /// The source's length in bytes, fixed when it was opened.
    var size: UInt64 { get }

    /// What the source is, for messages: a path or an address with no
    /// secret in it.
    var displayName: [UInt8] { get }

    /// Tells this source's bytes apart from other bytes at the same name:
    /// equal identities mean the same unchanged object (for a file: device,
    /// inode, size and modification time; for a remote object: its ETag).
    var identity: ByteSourceIdentity { get }

    /// Reads bytes at `offset` until `buffer` is full or the source ends.
    ///
    /// - Parameters:
    ///   - offset: where to start; at or past ``size`` reads nothing.
    ///   - buffer: receives the bytes (the caller's memory: nothing is
    ///     allocated per call by a good implementation).
    /// - Returns: bytes read; fewer than `buffer.count` only at the end.
    /// - Throws: `BundleError.io` when the bytes cannot be had. A source
    ///   written outside this package throws
    ///   ``EncryptedBundleError/io(errno:what:)`` to hand its callers an
    ///   errno; any other error reaches them as `.io` with `EIO`.
    func read(into buffer: UnsafeMutableRawBufferPointer, atOffset offset: UInt64) throws -> Int

    /// Drops any copy this source keeps of `count` bytes at `offset`,
    /// which failed authentication (a torn or altered cache file, a body
    /// damaged on the way).
    ///
    /// - Returns: whether reading them again may give other bytes; the
    ///   reader then reads them once more before it reports the chunk.
    func discardCopies(atOffset offset: UInt64, count: Int) -> Bool
}

extension ByteSource {
    /// A file or memory keeps no copy: reading again gives the same bytes.
    public func discardCopies(atOffset offset: UInt64, count: Int) -> Bool { false }
}

/// An opaque value that changes when a source's bytes may have changed.
public struct ByteSourceIdentity: Hashable, Sendable {
    /// The identity's bytes; meaningful only to the source that made them.
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) { self.bytes = bytes }
}
