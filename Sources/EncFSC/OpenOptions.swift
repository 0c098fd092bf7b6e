import EncFS
#if canImport(Glibc)
import Glibc
#endif

/// What an `encfs_options` handle holds: the secrets (already in wiping
/// storage, inside each `Unlock`), the origin checks and the HTTP
/// settings for `encfs_open`.
///
/// Used by one thread at a time (include/encfs.h says so), so it needs no
/// lock. Freeing it releases the `Unlock`s, whose storage wipes itself.
final class OpenOptions {
    var unlocks: [EncryptedBundle.Unlock] = []
    var verifyingKeys: [EncryptedBundle.VerifyingKey] = []
    var bundleID: [UInt8]?
    var remote = RemoteOptions()

    /// The 16 bytes of a bundle id written as 32 hex digits, or nil.
    static func parseBundleID(_ hex: [UInt8]) -> [UInt8]? {
        guard hex.count == 32 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        for i in stride(from: 0, to: 32, by: 2) {
            guard let high = digit(hex[i]), let low = digit(hex[i + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    private static func digit(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// The bytes of a NUL-terminated C string, or a refusal naming the
/// argument when it is NULL.
func bytes(of string: UnsafePointer<CChar>?, _ function: String, _ argument: String) throws(Failure) -> [UInt8] {
    guard let string else { throw Failure.invalid(function, "\(argument) is NULL") }
    return Array(UnsafeRawBufferPointer(start: string, count: strlen(string)))
}

/// The options behind a handle, or a refusal when it is NULL.
func options(_ handle: OpaquePointer?, _ function: String) throws(Failure) -> OpenOptions {
    guard let handle else { throw Failure.invalid(function, "options is NULL") }
    return Unmanaged<OpenOptions>.fromOpaque(UnsafeRawPointer(handle)).takeUnretainedValue()
}

/// `length` bytes at `pointer` (which may be NULL only when `length` is 0).
func buffer(_ pointer: UnsafeRawPointer?, _ length: Int, _ function: String, _ argument: String) throws(Failure) -> UnsafeRawBufferPointer {
    if length == 0 { return UnsafeRawBufferPointer(start: nil, count: 0) }
    guard let pointer else { throw Failure.invalid(function, "\(argument) is NULL") }
    return UnsafeRawBufferPointer(start: pointer, count: length)
}

@_cdecl("encfs_options_new")
public func encfs_options_new() -> OpaquePointer? {
    OpaquePointer(Unmanaged.passRetained(OpenOptions()).toOpaque())
}

@_cdecl("encfs_options_free")
public func encfs_options_free(_ handle: OpaquePointer?) {
    guard let handle else { return }
    Unmanaged<OpenOptions>.fromOpaque(UnsafeRawPointer(handle)).release()
}

@_cdecl("encfs_options_add_key_file")
public func encfs_options_add_key_file(_ handle: OpaquePointer?, _ path: UnsafePointer<CChar>?) -> Int32 {
    exported { () throws(Failure) in
        let o = try options(handle, "encfs_options_add_key_file")
        o.unlocks.append(.keyFile(bytePath: try bytes(of: path, "encfs_options_add_key_file", "path")))
    }
}

@_cdecl("encfs_options_add_key")
public func encfs_options_add_key(_ handle: OpaquePointer?, _ key: UnsafeRawPointer?, _ length: Int) -> Int32 {
    exported { () throws(Failure) in
        let o = try options(handle, "encfs_options_add_key")
        // A size_t above Int.max arrives negative: no key is that long.
        guard length >= 0 else { throw Failure.invalid("encfs_options_add_key", "length is out of range") }
        // Copied straight from the caller's bytes into wiping storage.
        o.unlocks.append(.key(try buffer(key, length, "encfs_options_add_key", "key")))
    }
}

@_cdecl("encfs_options_add_passphrase")
public func encfs_options_add_passphrase(_ handle: OpaquePointer?, _ passphrase: UnsafeRawPointer?, _ length: Int) -> Int32 {
    exported { () throws(Failure) in
        let o = try options(handle, "encfs_options_add_passphrase")
        guard length > 0 else { throw Failure.invalid("encfs_options_add_passphrase", "the passphrase is empty") }
        o.unlocks.append(.passphrase(bytes: try buffer(passphrase, length, "encfs_options_add_passphrase", "passphrase")))
    }
}

@_cdecl("encfs_options_add_passphrase_file")
public func encfs_options_add_passphrase_file(_ handle: OpaquePointer?, _ path: UnsafePointer<CChar>?) -> Int32 {
    exported { () throws(Failure) in
        let o = try options(handle, "encfs_options_add_passphrase_file")
        o.unlocks.append(.passphraseFile(bytePath: try bytes(of: path, "encfs_options_add_passphrase_file", "path")))
    }
}

@_cdecl("encfs_options_add_identity_file")
public func encfs_options_add_identity_file(_ handle: OpaquePointer?, _ path: UnsafePointer<CChar>?) -> Int32 {
    exported { () throws(Failure) in
        let o = try options(handle, "encfs_options_add_identity_file")
        o.unlocks.append(.identityFile(bytePath: try bytes(of: path, "encfs_options_add_identity_file", "path")))
    }
}

@_cdecl("encfs_options_add_verify_key_file")
public func encfs_options_add_verify_key_file(_ handle: OpaquePointer?, _ path: UnsafePointer<CChar>?) -> Int32 {
    exported { () throws(Failure) in
        let o = try options(handle, "encfs_options_add_verify_key_file")
        let file = try bytes(of: path, "encfs_options_add_verify_key_file", "path")
        o.verifyingKeys.append(try api { () throws(EncryptedBundleError) in try EncryptedBundle.VerifyingKey(contentsOfFile: file) })
    }
}

@_cdecl("encfs_options_add_verify_key_pem")
public func encfs_options_add_verify_key_pem(_ handle: OpaquePointer?, _ pem: UnsafeRawPointer?, _ length: Int) -> Int32 {
    exported { () throws(Failure) in
        let o = try options(handle, "encfs_options_add_verify_key_pem")
        guard length > 0 else { throw Failure.invalid("encfs_options_add_verify_key_pem", "the key is empty") }
        let text = try buffer(pem, length, "encfs_options_add_verify_key_pem", "pem")
        o.verifyingKeys.append(try api { () throws(EncryptedBundleError) in try EncryptedBundle.VerifyingKey(pem: text) })
    }
}

@_cdecl("encfs_options_set_bundle_id")
public func encfs_options_set_bundle_id(_ handle: OpaquePointer?, _ hex: UnsafePointer<CChar>?) -> Int32 {
    exported { () throws(Failure) in
        let o = try options(handle, "encfs_options_set_bundle_id")
        guard let id = OpenOptions.parseBundleID(try bytes(of: hex, "encfs_options_set_bundle_id", "hex")) else {
            throw Failure.invalid("encfs_options_set_bundle_id", "a bundle id is 32 hex digits")
        }
        o.bundleID = id
    }
}

@_cdecl("encfs_options_add_http_header")
public func encfs_options_add_http_header(_ handle: OpaquePointer?, _ line: UnsafePointer<CChar>?) -> Int32 {
    exported { () throws(Failure) in
        let o = try options(handle, "encfs_options_add_http_header")
        let header = try bytes(of: line, "encfs_options_add_http_header", "line")
        // A line break would start another header (or a request body).
        guard header.contains(UInt8(ascii: ":")), !header.contains(10), !header.contains(13) else {
            throw Failure.invalid("encfs_options_add_http_header", "a header is one \"Name: value\" line")
        }
        o.remote.headers.append(header)
    }
}

@_cdecl("encfs_options_set_ca_file")
public func encfs_options_set_ca_file(_ handle: OpaquePointer?, _ path: UnsafePointer<CChar>?) -> Int32 {
    exported { () throws(Failure) in
        let o = try options(handle, "encfs_options_set_ca_file")
        o.remote.caFile = try bytes(of: path, "encfs_options_set_ca_file", "path")
    }
}
