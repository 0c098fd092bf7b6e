#if canImport(Glibc)
import Glibc
#endif

/// An open file descriptor that closes itself when the last reference goes.
///
/// Owned, never passed around as a raw `Int32`: whoever holds the value
/// holds the file; a descriptor owned elsewhere is a ``Borrowed`` view. The
/// path is kept for messages only. Positional reads and writes (`pread`,
/// `pwrite`) are safe from many threads at once.
package final class FileDescriptor: Sendable {
    /// The descriptor number, for calls this type does not wrap.
    package let rawValue: Int32
    /// What was opened, for messages (may be empty).
    package let path: [UInt8]

    /// Takes ownership of `rawValue` (closed in `deinit`).
    package init(taking rawValue: Int32, path: [UInt8] = []) {
        self.rawValue = rawValue
        self.path = path
    }

    deinit { close(rawValue) }

    /// Opens `path` close-on-exec. The corresponding C function is `open`.
    ///
    /// - Throws: `BundleError.io` naming `operation` and `path`.
    package static func open(_ path: [UInt8], flags: Int32, mode: mode_t = 0,
                             operation: StaticString = "open") throws(BundleError) -> FileDescriptor {
        let fd = try SystemCall.retrying(operation, path: path) {
            path.withCString { Glibc.open($0, flags | O_CLOEXEC, mode) }
        }
        return FileDescriptor(taking: fd, path: path)
    }

    /// Opens `name` relative to `directory`, close-on-exec. The
    /// corresponding C function is `openat`.
    ///
    /// - Parameter shown: what to call the file in messages (`name` when nil).
    /// - Throws: `BundleError.io` naming `operation` and the file.
    package static func open(_ name: [UInt8], in directory: FileDescriptor, flags: Int32, mode: mode_t = 0,
                             operation: StaticString = "open", shown: [UInt8]? = nil) throws(BundleError) -> FileDescriptor {
        let fd = try SystemCall.retrying(operation, path: shown ?? name) {
            name.withCString { openat(directory.rawValue, $0, flags | O_CLOEXEC, mode) }
        }
        return FileDescriptor(taking: fd, path: shown ?? name)
    }

    /// A new pipe. The corresponding C function is `pipe`.
    ///
    /// - Parameter closeOnExec: whether both ends are marked close-on-exec
    ///   (`pipe2` is not imported, so the mark is set right after `pipe`).
    ///   Without it, a process started later inherits both ends, as from a
    ///   plain `pipe`.
    /// - Throws: `BundleError.io` naming `operation`.
    package static func pipe(closeOnExec: Bool,
                             operation: StaticString = "create pipe") throws(BundleError) -> (read: FileDescriptor, write: FileDescriptor) {
        var fds: [Int32] = [-1, -1]
        _ = try SystemCall.retrying(operation) { Glibc.pipe(&fds) }
        if closeOnExec {
            _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
            _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        }
        return (FileDescriptor(taking: fds[0]), FileDescriptor(taking: fds[1]))
    }

    /// A close-on-exec copy numbered `lowest` or above. The corresponding C
    /// function is `fcntl(F_DUPFD_CLOEXEC)`.
    package func duplicate(lowest: Int32 = 0) throws(BundleError) -> FileDescriptor {
        let fd = try SystemCall.retrying("duplicate descriptor", path: path) { fcntl(rawValue, F_DUPFD_CLOEXEC, lowest) }
        return FileDescriptor(taking: fd, path: path)
    }

    /// The file's status. The corresponding C function is `fstat`.
    package func status() throws(BundleError) -> stat {
        var st = stat()
        _ = try SystemCall.retrying("stat", path: path) { fstat(rawValue, &st) }
        return st
    }

    /// Reads at `offset` until `buffer` is full or end of file.
    ///
    /// - Returns: bytes read (fewer than `buffer.count` only at end of file).
    package func read(fromAbsoluteOffset offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws(BundleError) -> Int {
        try Borrowed.preadFull(rawValue, into: buffer, at: offset, path: path)
    }

    /// Reads from the current position until `buffer` is full or end of file.
    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(BundleError) -> Int {
        try Borrowed.readFull(rawValue, into: buffer, path: path)
    }

    /// Writes all of `buffer` at the current position.
    package func writeAll(_ buffer: UnsafeRawBufferPointer) throws(BundleError) {
        try Borrowed.writeAll(rawValue, buffer, path: path)
    }

    /// Writes all of `buffer` at `offset`.
    package func writeAll(_ buffer: UnsafeRawBufferPointer, toAbsoluteOffset offset: UInt64) throws(BundleError) {
        try Borrowed.pwriteAll(rawValue, buffer, at: offset, path: path)
    }
}
