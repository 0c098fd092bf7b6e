import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// Thin loops over read(2)/write(2)/pread(2) that retry on EINTR and on
/// short transfers. Paths are only used for error messages.
enum FileIO {
    /// Reads until `buffer` is full or end of file. The corresponding C
    /// function is `read`.
    ///
    /// - Returns: bytes read (less than `buffer.count` only at end of file).
    /// - Throws: `BundleError.io`.
    static func readFull(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, path: [UInt8]) throws -> Int {
        guard let base = buffer.baseAddress else { return 0 }
        var done = 0
        while done < buffer.count {
            let n = read(fd, base + done, buffer.count - done)
            if n < 0 {
                if errno == EINTR { continue }
                throw BundleError.lastIO("read", path)
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Reads at `offset` until `buffer` is full or end of file. The
    /// corresponding C function is `pread`.
    ///
    /// - Returns: bytes read.
    /// - Throws: `BundleError.io`.
    static func preadFull(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64, path: [UInt8]) throws -> Int {
        guard let base = buffer.baseAddress else { return 0 }
        var done = 0
        while done < buffer.count {
            let n = pread(fd, base + done, buffer.count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                throw BundleError.lastIO("read", path)
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Writes all of `buffer`. The corresponding C function is `write`.
    ///
    /// - Throws: `BundleError.io`.
    static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, path: [UInt8]) throws {
        guard let base = buffer.baseAddress else { return }
        var done = 0
        while done < buffer.count {
            let n = write(fd, base + done, buffer.count - done)
            if n < 0 {
                if errno == EINTR { continue }
                throw BundleError.lastIO("write", path)
            }
            done += n
        }
    }

    /// Writes all of `buffer` at `offset`. The corresponding C function is `pwrite`.
    ///
    /// - Throws: `BundleError.io`.
    static func pwriteAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, at offset: UInt64, path: [UInt8]) throws {
        guard let base = buffer.baseAddress else { return }
        var done = 0
        while done < buffer.count {
            let n = pwrite(fd, base + done, buffer.count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if errno == EINTR { continue }
                throw BundleError.lastIO("write", path)
            }
            done += n
        }
    }

    /// The absolute path of `path` with every symlink resolved. The
    /// corresponding C function is `realpath`.
    ///
    /// - Throws: `BundleError.io` naming `path`.
    static func resolvedPath(_ path: [UInt8]) throws -> [UInt8] {
        guard let resolved = path.withCString({ realpath($0, nil) }) else { throw BundleError.lastIO("resolve", path) }
        defer { free(resolved) }
        return Array(UnsafeRawBufferPointer(start: resolved, count: strlen(resolved)))
    }

    /// Reads a whole small file (key files, passphrase files) into wiping
    /// storage, refusing anything larger than `limit` bytes.
    ///
    /// - Throws: `BundleError.io`, or `.limitExceeded` for a large file.
    static func readSecretFile(_ path: [UInt8], limit: Int) throws -> SecureBytes {
        let fd = path.withCString { open($0, O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else { throw BundleError.lastIO("open", path) }
        defer { close(fd) }
        var out = [UInt8](repeating: 0, count: limit + 1)
        let n = try out.withUnsafeMutableBytes { try readFull(fd, into: $0, path: path) }
        defer { out.withUnsafeMutableBytes { SecureBytes.wipe($0) } }
        guard n <= limit else { throw BundleError.limitExceeded("file is larger than \(limit) bytes") }
        return out.withUnsafeBytes { SecureBytes(copying: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
    }
}

extension Array where Element == UInt8 {
    /// Calls `body` with a NUL-terminated copy of the bytes (paths are byte
    /// strings; they never pass through `String`).
    func withCString<R>(_ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
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
