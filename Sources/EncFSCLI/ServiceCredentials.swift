import CryptCore
import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// Reads a secret that systemd handed to a service as a credential: the
/// file `$CREDENTIALS_DIRECTORY/NAME` (systemd.exec(5), `LoadCredential=`,
/// `LoadCredentialEncrypted=`, `SetCredentialEncrypted=`).
///
/// Why: systemd decrypts an encrypted credential (sealed with the host key
/// and/or a TPM2) into a directory only this service's processes can read,
/// on a non-swappable file system, for the service's lifetime; the secret
/// never sits in plaintext on disk, in the unit, in argv or the environment.
enum ServiceCredentials {
    /// The variable systemd sets in a service that has credentials.
    static let directoryVariable = "CREDENTIALS_DIRECTORY"

    /// The bytes of credential `name`.
    ///
    /// - Parameters:
    ///   - name: a plain file name: not empty, no `/`, not `.` or `..`.
    ///   - limit: the most bytes accepted.
    /// - Returns: the file's bytes, in wiping storage.
    /// - Throws: `KeyInputError` when the name is not a plain file name, the
    ///   directory variable is unset, or the file cannot be read or is not
    ///   a regular file (systemd makes every credential one; a FIFO would
    ///   block the service's start for ever).
    static func read(_ name: [UInt8], limit: Int) throws -> SecureBytes {
        let path = try self.path(of: name)
        do {
            return try LocalFiles.readSecretFile(path, limit: limit, regularOnly: true)
        } catch let e as BundleError {
            throw KeyInputError("cannot read credential \(shown(name)): \(e.message)", path: path)
        }
    }

    /// `$CREDENTIALS_DIRECTORY/name`.
    ///
    /// - Throws: `KeyInputError` for a name that is not a plain file name
    ///   or an unset (or empty) directory variable.
    static func path(of name: [UInt8]) throws -> [UInt8] {
        guard !name.isEmpty, !name.contains(UInt8(ascii: "/")), name != Array(".".utf8), name != Array("..".utf8) else {
            throw KeyInputError("credential name \(shown(name)) must be a plain file name (no '/', not '.' or '..')")
        }
        guard let directory = getenv(directoryVariable), directory.pointee != 0 else {
            throw KeyInputError("\(directoryVariable) is not set: credential \(shown(name)) can only be read in a service "
                                + "started by systemd with LoadCredential= or LoadCredentialEncrypted=")
        }
        return Array(UnsafeRawBufferPointer(start: directory, count: strlen(directory))) + [UInt8(ascii: "/")] + name
    }

    /// `name` as a message shows it: quoted, control bytes escaped.
    static func shown(_ name: [UInt8]) -> String {
        "\"\(PrintableText.escaping(name, limit: 256))\""
    }
}
