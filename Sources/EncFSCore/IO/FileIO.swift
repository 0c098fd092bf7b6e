import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// Whole-buffer transfers over read(2), write(2), pread(2) and pwrite(2):
/// they continue after short transfers, and every call goes through
/// ``SystemCall/retrying(_:path:_:)``. For descriptors this code does not
/// own (standard output, inherited pipes); owned files use
/// ``FileDescriptor``, which calls these. Paths are only used in messages.
package enum FileIO {
    /// Reads until `buffer` is full or end of file. The corresponding C
    /// function is `read`.
    ///
    /// - Returns: bytes read (less than `buffer.count` only at end of file).
    /// - Throws: `BundleError.io`.
    package static func readFull(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, path: [UInt8]) throws(BundleError) -> Int {
        guard let base = buffer.baseAddress else { return 0 }
        var done = 0
        while done < buffer.count {
            let n = try SystemCall.retrying("read", path: path) { read(fd, base + done, buffer.count - done) }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Reads at `offset` until `buffer` is full or end of file. The
    /// corresponding C function is `pread`.
    ///
    /// - Returns: bytes read (less than `buffer.count` only at end of file).
    /// - Throws: `BundleError.io`.
    package static func preadFull(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64,
                                  path: [UInt8]) throws(BundleError) -> Int {
        guard let base = buffer.baseAddress else { return 0 }
        var done = 0
        while done < buffer.count {
            let n = try SystemCall.retrying("read", path: path) {
                pread(fd, base + done, buffer.count - done, off_t(offset) + off_t(done))
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Writes all of `buffer`. The corresponding C function is `write`.
    ///
    /// - Throws: `BundleError.io`.
    package static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, path: [UInt8]) throws(BundleError) {
        guard let base = buffer.baseAddress else { return }
        var done = 0
        while done < buffer.count {
            done += try SystemCall.retrying("write", path: path) { write(fd, base + done, buffer.count - done) }
        }
    }

    /// Writes all of `buffer` at `offset`. The corresponding C function is `pwrite`.
    ///
    /// - Throws: `BundleError.io`.
    package static func pwriteAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, at offset: UInt64,
                                  path: [UInt8]) throws(BundleError) {
        guard let base = buffer.baseAddress else { return }
        var done = 0
        while done < buffer.count {
            done += try SystemCall.retrying("write", path: path) {
                pwrite(fd, base + done, buffer.count - done, off_t(offset) + off_t(done))
            }
        }
    }

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
        var st = stat()
        _ = try SystemCall.retrying("stat", path: path) { fstat(file.rawValue, &st) }
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

extension Array where Element == UInt8 {
    /// Calls `body` with a NUL-terminated copy of the bytes (paths are byte
    /// strings; they never pass through `String`).
    package func withCString<R>(_ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
        var copy = self
        copy.append(0)
        return try copy.withUnsafeBufferPointer { b in
            try b.withMemoryRebound(to: CChar.self) { c in
                guard let base = c.baseAddress else { preconditionFailure("internal error: empty C string buffer") }
                return try body(base)
            }
        }
    }
}
