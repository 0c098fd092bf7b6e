// The library's users see the core's public types (byte sources, the
// bundle header and index for tools that want them) through `import
// EncFS` alone. Keys stay out of reach: the core keeps them `package`.
@_exported import EncFSCore
// Remote bundles: `RemoteOptions` for `EncryptedBundle(url:unlock:options:)`
// and the byte sources for applications that compose their own.
@_exported import EncFSRemote
