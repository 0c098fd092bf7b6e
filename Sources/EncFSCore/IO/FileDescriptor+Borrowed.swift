#if canImport(Glibc)
import Glibc
#endif

extension FileDescriptor {
    /// A descriptor owned elsewhere, never closed by this value: standard
    /// input and output, a pipe a parent handed down, one a C library or
    /// another ``FileDescriptor`` holds.
    ///
    /// The whole-buffer transfers live here, and ``FileDescriptor`` calls
    /// them: they continue after short transfers, and every call goes
    /// through ``SystemCall/retrying(_:path:_:)``. The path is only used in
    /// messages.
    package struct Borrowed: Sendable {
        /// The descriptor number.
        package let rawValue: Int32
        /// What it is, for messages (may be empty).
        package let path: [UInt8]

        /// A view of `rawValue`, which its owner keeps open while the view is used.
        package init(_ rawValue: Int32, path: [UInt8] = []) {
            self.rawValue = rawValue
            self.path = path
        }

        /// Descriptor 0.
        package static let standardInput = Borrowed(0, path: Array("stdin".utf8))
        /// Descriptor 1.
        package static let standardOutput = Borrowed(1, path: Array("stdout".utf8))
        /// The working directory, as the `*at` calls name it (`AT_FDCWD`):
        /// a directory argument only, never read or written.
        package static let currentDirectory = Borrowed(AT_FDCWD, path: Array(".".utf8))

        /// Reads from the current position until `buffer` is full or end of file.
        ///
        /// - Returns: bytes read (fewer than `buffer.count` only at end of file).
        /// - Throws: `BundleError.io`.
        package func read(into buffer: UnsafeMutableRawBufferPointer) throws(BundleError) -> Int {
            try Self.readFull(rawValue, into: buffer, path: path)
        }

        /// Reads at `offset` until `buffer` is full or end of file.
        ///
        /// - Returns: bytes read (fewer than `buffer.count` only at end of file).
        /// - Throws: `BundleError.io`.
        package func read(fromAbsoluteOffset offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) throws(BundleError) -> Int {
            try Self.preadFull(rawValue, into: buffer, at: offset, path: path)
        }

        /// Writes all of `buffer` at the current position.
        ///
        /// - Throws: `BundleError.io`.
        package func writeAll(_ buffer: UnsafeRawBufferPointer) throws(BundleError) {
            try Self.writeAll(rawValue, buffer, path: path)
        }

        /// Writes all of `buffer` at `offset`.
        ///
        /// - Throws: `BundleError.io`.
        package func writeAll(_ buffer: UnsafeRawBufferPointer, toAbsoluteOffset offset: UInt64) throws(BundleError) {
            try Self.pwriteAll(rawValue, buffer, at: offset, path: path)
        }

        // The loops take the number and path rather than a view, so that
        // ``FileDescriptor`` (on the read path, through `FileByteSource`)
        // calls them without making one.

        /// Reads until `buffer` is full or end of file. The corresponding C
        /// function is `read`.
        static func readFull(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, path: [UInt8]) throws(BundleError) -> Int {
            guard let base = buffer.baseAddress else { return 0 }
            var done = 0
            while done < buffer.count {
                let n = try SystemCall.retrying("read", path: path) { Glibc.read(fd, base + done, buffer.count - done) }
                if n == 0 { break }
                done += n
            }
            return done
        }

        /// Reads at `offset` until `buffer` is full or end of file. The
        /// corresponding C function is `pread`.
        static func preadFull(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64,
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
        static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, path: [UInt8]) throws(BundleError) {
            guard let base = buffer.baseAddress else { return }
            var done = 0
            while done < buffer.count {
                done += try SystemCall.retrying("write", path: path) { Glibc.write(fd, base + done, buffer.count - done) }
            }
        }

        /// Writes all of `buffer` at `offset`. The corresponding C function is `pwrite`.
        static func pwriteAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, at offset: UInt64,
                              path: [UInt8]) throws(BundleError) {
            guard let base = buffer.baseAddress else { return }
            var done = 0
            while done < buffer.count {
                done += try SystemCall.retrying("write", path: path) {
                    pwrite(fd, base + done, buffer.count - done, off_t(offset) + off_t(done))
                }
            }
        }
    }

    /// This descriptor as a borrowed view, valid while `self` is alive.
    package var borrowed: Borrowed { Borrowed(rawValue, path: path) }
}
