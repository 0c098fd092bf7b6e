internal import CKeyring
import CryptCore
import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// Reads a secret from the kernel key retention service (keyrings(7)): the
/// payload of a `user` key, as `keyctl padd user DESCRIPTION @u` stores it.
///
/// Why the kernel keyring: a key put there at login (or by a provisioning
/// step) never sits in a file, an argument or the environment, and expires
/// or is revoked by the kernel. The search goes through the session keyring
/// (and what it links, usually the user keyring), then the user keyring,
/// then the user's persistent keyring, and takes the first valid match.
///
/// The payload is read straight into wiping storage; no ordinary buffer
/// ever holds it. Messages name the description, never the payload.
enum KernelKeyring {
    /// The most bytes a `user` key can hold (keyctl(2), `add_key`).
    static let payloadLimit = 32767

    /// Key types that are not `user`, tried only to explain a failed search
    /// ("it exists, but as a logon key"), never read.
    private static let otherTypes = ["logon", "keyring", "big_key", "encrypted", "trusted", "asymmetric"]

    /// The payload of the `user` key named `description`.
    ///
    /// - Parameter description: the key's description, as given to `keyctl padd`.
    /// - Returns: the payload, in wiping storage.
    /// - Throws: `KeyInputError` naming the description: no such key (or
    ///   only one of another type), expired, revoked, not readable.
    static func readUserKey(_ description: [UInt8]) throws -> SecureBytes {
        guard !description.isEmpty else { throw KeyInputError("kernel keyring: empty key description") }
        let key = try search(description)
        return try read(key, description)
    }

    /// `description` as a message shows it: quoted, control bytes escaped.
    static func shown(_ description: [UInt8]) -> String {
        "\"\(PrintableText.escaping(description, limit: 256))\""
    }

    // MARK: - Search

    /// The id of the first valid `user` key named `description` in the
    /// session, user and persistent keyrings.
    ///
    /// The kernel skips expired and revoked keys while a search goes on and
    /// reports them only when nothing valid matched; the first such refusal
    /// is kept, so "expired" wins over "not found" in a later keyring.
    private static func search(_ description: [UInt8]) throws -> Int32 {
        var refusal: Int32?
        for keyring in searchedKeyrings() {
            guard let id = keyring() else { continue }
            // errno is taken inside the closure, before the C string's copy is freed.
            let (result, code) = description.withCString { (ckeyring_search(id, "user", $0), errno) }
            if result >= 0, let key = Int32(exactly: result) { return key }
            if code != ENOKEY, refusal == nil { refusal = code }
        }
        if let refusal { throw error(refusal, description) }
        if let type = otherType(description) {
            throw KeyInputError("kernel keyring: \(shown(description)) is a \(type) key, not a user key "
                                + "(store it with: keyctl padd user DESCRIPTION @u)")
        }
        throw KeyInputError("kernel keyring: no user key \(shown(description)) in the session, user or persistent keyring")
    }

    /// The keyrings searched, in order, as ids resolved when the search
    /// reaches them: the persistent keyring is looked up (and linked into
    /// this process's own keyring, which the kernel requires and which
    /// dies with the process) only if the first two found nothing.
    /// `nil` stands for a keyring that does not exist (a kernel without
    /// persistent keyrings answers EOPNOTSUPP): it is skipped.
    private static func searchedKeyrings() -> [() -> Int32?] {
        [
            { ckeyring_session_keyring() },
            { ckeyring_user_keyring() },
            {
                // A real keyring id is positive; -1 would name the thread keyring.
                let id = ckeyring_get_persistent(ckeyring_process_keyring())
                return id > 0 ? Int32(exactly: id) : nil
            },
        ]
    }

    /// The type of a key of another type named `description` in the
    /// session or user keyring, if there is one.
    private static func otherType(_ description: [UInt8]) -> String? {
        for type in otherTypes {
            for keyring in [ckeyring_session_keyring(), ckeyring_user_keyring()] {
                if description.withCString({ ckeyring_search(keyring, type, $0) }) >= 0 { return type }
            }
        }
        return nil
    }

    // MARK: - Read

    /// Reads the payload of `key` into wiping storage.
    ///
    /// The buffer holds one byte more than the largest `user` payload, so a
    /// longer key of another type is told apart; the exact-length copy is
    /// made from that buffer, which wipes itself when it goes.
    private static func read(_ key: Int32, _ description: [UInt8]) throws -> SecureBytes {
        var length = 0
        let buffer = try SecureBytes(count: payloadLimit + 1) { (out: UnsafeMutableRawBufferPointer) throws(KeyInputError) in
            let n = SystemCall.retryingInterrupts { ckeyring_read(key, out.baseAddress, out.count) }
            guard n >= 0 else { throw error(errno, description) }
            length = n
        }
        guard length <= payloadLimit else {
            throw KeyInputError("kernel keyring: key \(shown(description)) is larger than \(payloadLimit) bytes")
        }
        return buffer.withUnsafeBytes { SecureBytes(copying: UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
    }

    /// The message for an `errno` from KEYCTL_SEARCH or KEYCTL_READ.
    private static func error(_ code: Int32, _ description: [UInt8]) -> KeyInputError {
        let name = "kernel keyring: user key \(shown(description))"
        switch code {
        case EKEYEXPIRED: return KeyInputError("\(name) has expired")
        case EKEYREVOKED: return KeyInputError("\(name) has been revoked")
        case EACCES: return KeyInputError("\(name) may not be read by this user")
        case ENOKEY: return KeyInputError("\(name) is gone")
        default: return KeyInputError("\(name) cannot be read: \(String(cString: strerror(code)))")
        }
    }
}
