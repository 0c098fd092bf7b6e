#if canImport(Glibc)
import Glibc
#endif

/// A bundle in a local file, read with `pread` on one descriptor that it
/// owns (safe from many threads: `pread` keeps no file position).
public final class FileByteSource: ByteSource {
    /// The open file; the mount command hands it to its daemon so the
    /// daemon serves the very file that was verified.
    package let descriptor: FileDescriptor
    public let size: UInt64
    public let identity: ByteSourceIdentity
    public var displayName: [UInt8] { descriptor.path }

    /// Opens the regular file at `path` for reading.
    ///
    /// - Throws: `BundleError.io` when it cannot be opened or is not a
    ///   regular file.
    public convenience init(path: [UInt8]) throws {
        try self.init(descriptor: try FileDescriptor.open(path, flags: O_RDONLY, operation: "open bundle"))
    }

    /// Opens the regular file at `path` (a file-system path in UTF-8).
    public convenience init(path: String) throws {
        try self.init(path: Array(path.utf8))
    }

    /// Wraps a file already open for reading (the daemon's inherited
    /// descriptor); takes ownership of it.
    ///
    /// - Throws: `BundleError.io` when it is not a regular file.
    package init(descriptor: FileDescriptor) throws {
        let st = try descriptor.status()
        guard st.st_mode & S_IFMT == S_IFREG else {
            throw BundleError.io(errno: EINVAL, operation: "open bundle (not a regular file)", path: descriptor.path)
        }
        self.descriptor = descriptor
        size = UInt64(max(st.st_size, 0))
        identity = Self.identity(of: st)
    }

    public func read(into buffer: UnsafeMutableRawBufferPointer, atOffset offset: UInt64) throws -> Int {
        try descriptor.read(fromAbsoluteOffset: offset, into: buffer)
    }

    /// Device, inode, size and modification time: a file replaced by
    /// rename, or rewritten in place, gets another identity.
    package static func identity(of st: stat) -> ByteSourceIdentity {
        var bytes: [UInt8] = []
        for value in [UInt64(st.st_dev), UInt64(st.st_ino), UInt64(bitPattern: Int64(st.st_size)),
                      UInt64(bitPattern: Int64(st.st_mtim.tv_sec)), UInt64(bitPattern: Int64(st.st_mtim.tv_nsec))] {
            withUnsafeBytes(of: value.bigEndian) { bytes += $0 }
        }
        return ByteSourceIdentity(bytes: bytes)
    }
}
