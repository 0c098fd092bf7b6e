/// What a reader accepts from a bundle beyond the format's own limits.
///
/// Two things a valid bundle can ask of whoever opens it: scrypt memory for
/// a passphrase slot, spent before anything in the header is authenticated
/// (so a hostile bundle can ask for it too), and symlinks whose targets lead
/// out of the bundle, which a mount would serve as they are. The defaults
/// are the safe choice; tools raise them only on the user's word. And one
/// thing the reader can ask of the bundle: its origin (a signer, an id).
package struct OpenOptions: Sendable, Equatable {
    /// The default limit on one passphrase slot's scrypt memory: 1 GiB, what
    /// the costliest slot encfs-pack writes needs (N = 2^20, r = 8). The
    /// format's own limit (`Scrypt.maximumMemory`, 2 GiB) would let every
    /// open of a hostile bundle claim about 2 GiB before failing.
    package static let defaultScryptMemoryLimit: UInt64 = 1 << 30

    /// The most scrypt memory (128 · r · N bytes) one passphrase slot may
    /// need; slots that need more are not tried (no scrypt runs for them),
    /// and if no other slot opens, the open fails with
    /// `BundleError.scryptMemoryLimit`.
    package var scryptMemoryLimit: UInt64
    /// Whether symlinks whose targets are absolute or climb above the
    /// bundle's root are accepted (and served as stored). When false, the
    /// open fails with `BundleError.externalSymlink` naming the first one.
    package var allowsExternalSymlinks: Bool

    /// Where the bundle must come from: a signature by one of its signers,
    /// and/or its bundle id (``OriginPolicy``); by default anything a given
    /// secret opens.
    package var origin: OriginPolicy

    package init(scryptMemoryLimit: UInt64 = defaultScryptMemoryLimit, allowsExternalSymlinks: Bool = false,
                origin: OriginPolicy = OriginPolicy()) {
        self.scryptMemoryLimit = scryptMemoryLimit
        self.allowsExternalSymlinks = allowsExternalSymlinks
        self.origin = origin
    }
}
