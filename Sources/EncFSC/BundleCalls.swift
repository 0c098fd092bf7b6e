import EncFS
#if canImport(Glibc)
import Glibc
#endif

// The bundle half of the C ABI: open, close, list, walk, stat. Each
// function is a thin wrapper: check the arguments, call the public API,
// write the outputs; `exported` turns a failure into the returned code and
// the thread's last error.

/// The bundle behind a handle, or a refusal when it is NULL.
func bundle(_ handle: OpaquePointer?, _ function: String) throws(Failure) -> EncryptedBundle {
    guard let handle else { throw Failure.invalid(function, "bundle is NULL") }
    return Unmanaged<EncryptedBundle>.fromOpaque(UnsafeRawPointer(handle)).takeUnretainedValue()
}

/// A handle for `object`, retained until the matching free or close.
func handle(_ object: AnyObject) -> OpaquePointer {
    OpaquePointer(Unmanaged.passRetained(object).toOpaque())
}

/// Whether `location` is an address to read over HTTP (`s3://` included:
/// EncFSRemote signs its requests, with credentials from the environment).
private func isURL(_ location: [UInt8]) -> Bool {
    ["http://", "https://", "s3://"].contains { location.starts(with: Array($0.utf8)) }
}

@_cdecl("encfs_open")
public func encfs_open(_ location: UnsafePointer<CChar>?, _ optionsHandle: OpaquePointer?,
                       _ out: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    exported { () throws(Failure) in
        let place = try bytes(of: location, "encfs_open", "location")
        let o = try options(optionsHandle, "encfs_open")
        guard let out else { throw Failure.invalid("encfs_open", "bundle is NULL") }
        guard !o.unlocks.isEmpty else { throw Failure.invalid("encfs_open", "no key, passphrase or identity given") }
        let opened = try api { () throws(EncryptedBundleError) in
            try EncryptedBundle(location: place, isURL: isURL(place), unlock: .any(o.unlocks),
                                verifyingKeys: o.verifyingKeys, bundleID: o.bundleID, remote: o.remote)
        }
        out.pointee = handle(opened)
    }
}

@_cdecl("encfs_close")
public func encfs_close(_ handle: OpaquePointer?) {
    guard let handle else { return }
    Unmanaged<EncryptedBundle>.fromOpaque(UnsafeRawPointer(handle)).release()
}

@_cdecl("encfs_bundle_id")
public func encfs_bundle_id(_ handle: OpaquePointer?, _ out: UnsafeMutablePointer<CChar>?) -> Int32 {
    exported { () throws(Failure) in
        let b = try bundle(handle, "encfs_bundle_id")
        guard let out else { throw Failure.invalid("encfs_bundle_id", "out is NULL") }
        let hex = Array(b.bundleID.utf8.prefix(32))
        for (i, c) in hex.enumerated() { out[i] = CChar(bitPattern: c) }
        out[hex.count] = 0
    }
}

/// Lists with `list` and hands out an `encfs_list`.
private func listing(_ function: String, _ handle: OpaquePointer?, _ path: UnsafePointer<CChar>?,
                     _ out: UnsafeMutablePointer<OpaquePointer?>?,
                     _ list: (EncryptedBundle, [UInt8]) throws(EncryptedBundleError) -> [[UInt8]]) -> Int32 {
    exported { () throws(Failure) in
        let b = try bundle(handle, function)
        let p = try bytes(of: path, function, "path")
        guard let out else { throw Failure.invalid(function, "list is NULL") }
        let names = try api { () throws(EncryptedBundleError) in try list(b, p) }
        guard let packed = NameList(names) else { throw Failure(status: .noMemory, message: "\(function): out of memory") }
        out.pointee = OpaquePointer(Unmanaged.passRetained(packed).toOpaque())
    }
}

@_cdecl("encfs_listdir")
public func encfs_listdir(_ handle: OpaquePointer?, _ path: UnsafePointer<CChar>?,
                          _ out: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    listing("encfs_listdir", handle, path, out) { (b, p) throws(EncryptedBundleError) in try b.contentsOfDirectory(atBytePath: p) }
}

@_cdecl("encfs_walk")
public func encfs_walk(_ handle: OpaquePointer?, _ path: UnsafePointer<CChar>?,
                       _ out: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    listing("encfs_walk", handle, path, out) { (b, p) throws(EncryptedBundleError) in try b.subpathsOfDirectory(atBytePath: p) }
}

/// `struct encfs_stat` as include/encfs.h lays it out on LP64 (x86-64,
/// arm64 Linux): int kind at 0, uint32 mode at 4, uint64 size at 8, int64
/// mtime_sec at 16, uint32 mtime_nsec at 24, char *target at 32, size_t
/// target_length at 40; 48 bytes. EmbedTests checks these against the C
/// compiler's offsetof.
private enum StatLayout {
    static let kind = 0, mode = 4, size = 8, mtimeSeconds = 16, mtimeNanoseconds = 24, target = 32, targetLength = 40
    static let byteCount = 48
}

@_cdecl("encfs_stat")
public func encfs_stat(_ handle: OpaquePointer?, _ path: UnsafePointer<CChar>?, _ out: UnsafeMutableRawPointer?) -> Int32 {
    exported { () throws(Failure) in
        let b = try bundle(handle, "encfs_stat")
        let p = try bytes(of: path, "encfs_stat", "path")
        guard let out else { throw Failure.invalid("encfs_stat", "st is NULL") }
        let attributes = try api { () throws(EncryptedBundleError) in try b.attributesOfItem(atBytePath: p) }
        var target: UnsafeMutablePointer<CChar>?
        if let bytes = attributes.symbolicLinkTargetBytes {
            guard let copy = LastError.copyBytes(bytes) else { throw Failure(status: .noMemory, message: "encfs_stat: out of memory") }
            target = copy
        }
        let kind: Int32 = switch attributes.kind {
        case .regularFile: 1
        case .directory: 2
        case .symbolicLink: 3
        }
        memset(out, 0, StatLayout.byteCount)
        out.storeBytes(of: kind, toByteOffset: StatLayout.kind, as: Int32.self)
        out.storeBytes(of: UInt32(attributes.permissions), toByteOffset: StatLayout.mode, as: UInt32.self)
        out.storeBytes(of: attributes.size, toByteOffset: StatLayout.size, as: UInt64.self)
        out.storeBytes(of: attributes.modificationSeconds, toByteOffset: StatLayout.mtimeSeconds, as: Int64.self)
        out.storeBytes(of: attributes.modificationNanoseconds, toByteOffset: StatLayout.mtimeNanoseconds, as: UInt32.self)
        out.storeBytes(of: target, toByteOffset: StatLayout.target, as: UnsafeMutablePointer<CChar>?.self)
        out.storeBytes(of: attributes.symbolicLinkTargetBytes?.count ?? 0, toByteOffset: StatLayout.targetLength, as: Int.self)
    }
}
