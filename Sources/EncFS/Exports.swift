import EncFSCore
import EncFSRemote

// `import EncFS` is the whole public API: EncryptedBundle, EncryptedFile,
// EncryptedBundleError and their nested types, plus the few core types an
// application implements or passes, named below. Nothing else of the core
// is public (the tools reach it as `package` declarations through their
// own imports), and the core is not re-exported: an application in this
// package, such as examples/embed, sees exactly what one outside it sees
// (docs/ARCHITECTURE.md, "The public surface").
//
// Type aliases rather than moved types: the core's readers take these
// protocols and classes, and the core cannot import this module.

/// Where a bundle's bytes come from: implement it to serve a bundle from
/// storage of the application's own (``EncryptedBundle/init(source:unlock:verifyingSignatureWith:)``).
public typealias ByteSource = EncFSCore.ByteSource
/// What a ``ByteSource`` returns from `identity`: equal while its bytes are unchanged.
public typealias ByteSourceIdentity = EncFSCore.ByteSourceIdentity
/// A bundle file in the file system, read with `pread`.
public typealias FileByteSource = EncFSCore.FileByteSource
/// A bundle in memory (compiled into the application, or fetched whole).
public typealias MemoryByteSource = EncFSCore.MemoryByteSource
/// Connections, timeouts, headers and cache of ``EncryptedBundle/init(url:unlock:options:)``.
public typealias RemoteOptions = EncFSRemote.RemoteOptions
