// `import EncFS` is the whole public API: EncryptedBundle, EncryptedFile,
// EncryptedBundleError and their nested types, plus the few core types an
// application implements or passes, re-exported one by one below. Nothing
// else of the core is public (the tools reach it as `package` declarations
// through their own imports), and nothing else is re-exported: an
// application in this package, such as examples/embed, sees what one
// outside it sees (docs/ARCHITECTURE.md, "The public surface").
//
// Scoped re-exports rather than type aliases: with the upcoming
// MemberImportVisibility feature, an alias leaves the types' members (a
// MemoryByteSource's init, RemoteOptions' fields) behind an
// `import EncFSCore` the application should not need. The types cannot
// move here: the core's readers take them, and the core cannot import
// this module.

/// Where a bundle's bytes come from: implement it to serve a bundle from
/// storage of the application's own.
@_exported import protocol EncFSCore.ByteSource
@_exported import struct EncFSCore.ByteSourceIdentity
/// A bundle file in the file system; a bundle in memory.
@_exported import class EncFSCore.FileByteSource
@_exported import class EncFSCore.MemoryByteSource
/// Connections, timeouts, headers and cache of `EncryptedBundle(url:unlock:options:)`.
@_exported import struct EncFSRemote.RemoteOptions
