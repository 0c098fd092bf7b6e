/// What a reader accepts from a bundle beyond the format's own limits.
///
/// A valid bundle can ask for scrypt memory for a passphrase slot, spent
/// before anything in the header is authenticated (so a hostile bundle can
/// ask for it too). The defaults are the safe choice; tools raise them only
/// on the user's word.
public struct OpenOptions: Sendable, Equatable {
    /// The default limit on one passphrase slot's scrypt memory: 1 GiB, what
    /// the costliest slot encfs-pack writes needs (N = 2^20, r = 8). The
    /// format's own limit (`Scrypt.maximumMemory`, 2 GiB) would let every
    /// open of a hostile bundle claim about 2 GiB before failing.
    public static let defaultScryptMemoryLimit: UInt64 = 1 << 30

    /// The most scrypt memory (128 · r · N bytes) one passphrase slot may
    /// need; slots that need more are not tried (no scrypt runs for them),
    /// and if no other slot opens, the open fails with
    /// `BundleError.scryptMemoryLimit`.
    public var scryptMemoryLimit: UInt64

    public init(scryptMemoryLimit: UInt64 = defaultScryptMemoryLimit) {
        self.scryptMemoryLimit = scryptMemoryLimit
    }
}
