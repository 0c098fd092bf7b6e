import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// Files named by a path: making the path absolute or resolving its
/// links, and reading a small secret file whole. Transfers on an open
/// descriptor are ``FileDescriptor``'s (or its ``FileDescriptor/Borrowed``
/// view's).
package enum LocalFiles {
    /// `path` made absolute against the working directory, its symbolic
    /// links left as they are (for a path that must be opened with
    /// `O_NOFOLLOW` or through ``TrustedPath``).
    ///
    /// - Throws: `BundleError.io` when the working directory is unknown.
    package static func absolutePath(_ path: [UInt8]) throws(BundleError) -> [UInt8] {
        guard path.first != UInt8(ascii: "/") else { return path }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { throw BundleError.io(errno: errno, operation: "resolve", path: path) }
        return buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) } + [UInt8(ascii: "/")] + path
    }

    /// The absolute path of `path` with every symlink resolved. The
    /// corresponding C function is `realpath`.
    ///
    /// - Throws: `BundleError.io` naming `path`.
    package static func resolvedPath(_ path: [UInt8]) throws -> [UInt8] {
        guard let resolved = path.withCString({ realpath($0, nil) }) else { throw BundleError.lastIO("resolve", path) }
        defer { free(resolved) }
        return Array(UnsafeRawBufferPointer(start: resolved, count: strlen(resolved)))
    }

    /// Reads a whole small file (key files, passphrase files) into wiping
    /// storage, refusing anything larger than `limit` bytes.
    ///
    /// Opened without blocking, so a named FIFO nothing writes to cannot
    /// hold the command in `open` for ever. A regular file is read;
    /// without `regularOnly`, so is a pipe handed down (`--key-file
    /// /dev/stdin`, a shell's `<(…)`), until its writer closes it, and a
    /// character device (a terminal). Anything else is refused: a named
    /// FIFO, a socket, a block device, a directory. With `regularOnly` (a
    /// systemd credential, always a regular file), only a regular file is
    /// read.
    ///
    /// - Throws: `BundleError.io` (EINVAL for a file of another kind), or
    ///   `.limitExceeded` for a large file.
    package static func readSecretFile(_ path: [UInt8], limit: Int, regularOnly: Bool = false) throws -> SecureBytes {
        let file = try FileDescriptor.open(path, flags: O_RDONLY | O_NONBLOCK)
        let st = try file.status()
        let kind = st.st_mode & S_IFMT
        let readable = kind == S_IFREG || (!regularOnly && (kind == S_IFCHR || kind == S_IFIFO && isAnonymousPipe(file)))
        guard readable else {
            throw BundleError.io(errno: EINVAL, operation: regularOnly ? "read (not a regular file)"
                                                                      : "read (not a regular file, pipe or character device)", path: path)
        }
        // Blocking from here: a pipe's writer may not have written yet.
        let flags = fcntl(file.rawValue, F_GETFL)
        _ = try SystemCall.retrying("clear O_NONBLOCK", path: path) { fcntl(file.rawValue, F_SETFL, flags & ~O_NONBLOCK) }
        // One byte more than the limit tells a file at the limit from a
        // larger one. Wiping storage from the start: a read that fails
        // half-way leaves no secret bytes behind in ordinary memory.
        var n = 0
        let buffer = try SecureBytes(count: limit + 1) { (out: UnsafeMutableRawBufferPointer) throws(BundleError) in
            n = try file.read(into: out)
        }
        guard n <= limit else { throw BundleError.limitExceeded("file is larger than \(limit) bytes") }
        return buffer.withUnsafeBytes { SecureBytes(copying: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
    }

    /// Whether `file` is a pipe that has no name: one a shell or a parent
    /// handed down, as opposed to a FIFO in a file system, which nothing
    /// may ever write to. The kernel names the first `pipe:[INODE]` in
    /// /proc/self/fd, the second by its path.
    private static func isAnonymousPipe(_ file: FileDescriptor) -> Bool {
        var target = [CChar](repeating: 0, count: 16)
        let n = readlink("/proc/self/fd/\(file.rawValue)", &target, target.count)
        return n >= 6 && target.prefix(6).map { UInt8(bitPattern: $0) } == Array("pipe:[".utf8)
    }
}
