import EncFS
#if canImport(Glibc)
import Glibc
#endif

// The file half of the C ABI: open, size, pread, close. encfs_file_pread
// is the hot path: it allocates nothing and takes no lock (the public
// API's EncryptedFile.read(into:atOffset:) reads straight into the
// caller's buffer).

/// What an `encfs_file` handle holds. `EncryptedFile` is a struct: the
/// box gives it the stable address a handle needs.
final class FileBox {
    let file: EncryptedFile
    init(_ file: EncryptedFile) { self.file = file }
}

@_cdecl("encfs_file_open")
public func encfs_file_open(_ bundleHandle: OpaquePointer?, _ path: UnsafePointer<CChar>?,
                            _ out: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    exported { () throws(Failure) in
        let b = try bundle(bundleHandle, "encfs_file_open")
        let p = try bytes(of: path, "encfs_file_open", "path")
        guard let out else { throw Failure.invalid("encfs_file_open", "file is NULL") }
        let file = try api { () throws(EncryptedBundleError) in try b.openFile(atBytePath: p) }
        out.pointee = handle(FileBox(file))
    }
}

@_cdecl("encfs_file_size")
public func encfs_file_size(_ handle: OpaquePointer?) -> UInt64 {
    guard let handle else { return 0 }
    return Unmanaged<FileBox>.fromOpaque(UnsafeRawPointer(handle)).takeUnretainedValue().file.size
}

@_cdecl("encfs_file_pread")
public func encfs_file_pread(_ handle: OpaquePointer?, _ buffer: UnsafeMutableRawPointer?, _ count: Int,
                             _ offset: UInt64, _ nread: UnsafeMutablePointer<Int>?) -> Int32 {
    exported { () throws(Failure) in
        guard let handle else { throw Failure.invalid("encfs_file_pread", "file is NULL") }
        guard let nread else { throw Failure.invalid("encfs_file_pread", "nread is NULL") }
        // A size_t above Int.max arrives negative: no buffer is that
        // large, and no file is longer than Int.max bytes past any offset.
        let wanted = count < 0 ? Int.max : count
        if wanted == 0 { nread.pointee = 0; return }
        guard let buffer else { throw Failure.invalid("encfs_file_pread", "buffer is NULL") }
        let file = Unmanaged<FileBox>.fromOpaque(UnsafeRawPointer(handle)).takeUnretainedValue().file
        nread.pointee = try api { () throws(EncryptedBundleError) in
            try file.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: wanted), atOffset: offset)
        }
    }
}

@_cdecl("encfs_file_close")
public func encfs_file_close(_ handle: OpaquePointer?) {
    guard let handle else { return }
    Unmanaged<FileBox>.fromOpaque(UnsafeRawPointer(handle)).release()
}

@_cdecl("encfs_read_file")
public func encfs_read_file(_ bundleHandle: OpaquePointer?, _ path: UnsafePointer<CChar>?, _ limit: UInt64,
                            _ data: UnsafeMutablePointer<UnsafeMutableRawPointer?>?, _ length: UnsafeMutablePointer<Int>?) -> Int32 {
    exported { () throws(Failure) in
        let b = try bundle(bundleHandle, "encfs_read_file")
        let p = try bytes(of: path, "encfs_read_file", "path")
        guard let data, let length else { throw Failure.invalid("encfs_read_file", "data or length is NULL") }
        let file = try api { () throws(EncryptedBundleError) in try b.openFile(atBytePath: p) }
        guard file.size <= limit else {
            throw Failure(.tooLarge(path: p, size: file.size, limit: Int(clamping: limit)))
        }
        // size ≤ limit was checked, but a limit above what memory can hold
        // must still fail cleanly rather than trap.
        guard file.size < UInt64(Int.max), let buffer = malloc(max(Int(file.size), 1)) else {
            throw Failure(status: .noMemory, message: "encfs_read_file: out of memory")
        }
        do throws(EncryptedBundleError) {
            let got = try file.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: Int(file.size)), atOffset: 0)
            data.pointee = buffer
            length.pointee = got
        } catch {
            free(buffer)
            throw Failure(error)
        }
    }
}
