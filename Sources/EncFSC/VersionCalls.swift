import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

// Version, status strings, last-error accessors and encfs_free: the calls
// that cannot fail.

/// The version as a C string, made once and kept for the process's life.
// Written once, by the global's one-time initializer, then only read.
nonisolated(unsafe) private let versionString: UnsafeMutablePointer<CChar>? = strdup(EncFSVersion.string)

@_cdecl("encfs_version")
public func encfs_version() -> UnsafePointer<CChar>? {
    UnsafePointer(versionString)
}

@_cdecl("encfs_status_string")
public func encfs_status_string(_ status: Int32) -> UnsafePointer<CChar>? {
    let text: StaticString = Status(rawValue: status)?.summary ?? "unknown status"
    // String literals are stored NUL-terminated, in read-only data.
    return UnsafeRawPointer(text.utf8Start).assumingMemoryBound(to: CChar.self)
}

/// "" for the accessors of a thread that has had no failure.
private let empty: StaticString = ""

private var emptyString: UnsafePointer<CChar> {
    UnsafeRawPointer(empty.utf8Start).assumingMemoryBound(to: CChar.self)
}

@_cdecl("encfs_last_error")
public func encfs_last_error() -> Int32 { LastError.current?.status ?? 0 }

@_cdecl("encfs_last_error_message")
public func encfs_last_error_message() -> UnsafePointer<CChar>? {
    LastError.current?.message.map { UnsafePointer($0) } ?? emptyString
}

@_cdecl("encfs_last_error_path")
public func encfs_last_error_path(_ length: UnsafeMutablePointer<Int>?) -> UnsafePointer<CChar>? {
    guard let record = LastError.current, let path = record.path else {
        length?.pointee = 0
        return emptyString
    }
    length?.pointee = record.pathLength
    return UnsafePointer(path)
}

@_cdecl("encfs_last_error_chunk")
public func encfs_last_error_chunk() -> UInt64 { LastError.current?.chunk ?? 0 }

@_cdecl("encfs_last_error_errno")
public func encfs_last_error_errno() -> Int32 { LastError.current?.errno ?? 0 }

@_cdecl("encfs_free")
public func encfs_free(_ pointer: UnsafeMutableRawPointer?) { free(pointer) }
