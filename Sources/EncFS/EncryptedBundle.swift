import EncFSCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// An encrypted bundle opened for reading, with calls shaped like
/// `FileManager`'s: list a directory, read an item's attributes, read a file
/// whole or open it for reads at any offset.
///
/// ```swift
/// import EncFS
///
/// let bundle = try EncryptedBundle(path: "app.bundle", unlock: .keyFile("app.key"))
/// let names = try bundle.contentsOfDirectory(atPath: "docs")        // sorted; "" or "/" is the root
/// let data = try bundle.contents(atPath: "docs/a.pdf", limit: 64 << 20)
/// let file = try bundle.openFile(atPath: "big.bin")
/// let part = try file.read(upToCount: 4096, atOffset: 1 << 30)
/// ```
///
/// Opening checks the key, the header and the whole index, so every later
/// call works on verified metadata; file contents are decrypted only when
/// read, chunk by chunk, and each chunk is authenticated before any of its
/// bytes is returned. Paths are relative to the bundle's root ("/" and ""
/// are the root; a leading "/" is ignored; "." and ".." work inside the
/// bundle) and follow symlinks inside the bundle. Every path call has an
/// overload taking the path as bytes (`atBytePath:`), which reaches names
/// that are not UTF-8.
///
/// An `EncryptedBundle` is immutable and `Sendable`: share one among any
/// number of threads and read from all of them at once. The keys it holds
/// are never handed out. Every throwing call throws ``EncryptedBundleError``.
///
/// Honest limits: the plaintext a call returns (`Data`, `String`, the
/// caller's buffer) is ordinary memory that the caller owns and that is not
/// wiped; the bundle's keys stay in self-wiping storage, locked in memory
/// where `RLIMIT_MEMLOCK` allows.
public final class EncryptedBundle: Sendable {
    /// The opened bundle. Kept private: its keys must not leave this type.
    private let reader: BundleReader

    // MARK: - Opening

    /// Opens the bundle whose bytes `source` provides: a ``FileByteSource``,
    /// a ``MemoryByteSource`` (a bundle compiled into the application), or
    /// a ``ByteSource`` of the caller's own.
    ///
    /// With `verifyingKeys`, the bundle opens only if one of them signed
    /// it, and the signature is checked before anything in the bundle is
    /// used: the signer, the header's fields, the content key the slot gave
    /// and the whole index. File contents are authenticated chunk by chunk
    /// as they are read, under that content key; a holder of a key slot
    /// knows the content key and could re-seal chunks, which only a full
    /// verification (`encfs-inspect verify --verify-key`) notices
    /// (docs/SECURITY.md).
    ///
    /// - Parameters:
    ///   - source: the bundle's bytes.
    ///   - unlock: the secret that opens one of its key slots (several:
    ///     ``Unlock/any(_:)``).
    ///   - verifyingKeys: nil to open the bundle signed or not; else the
    ///     keys one of which must have signed it, at least one (an empty
    ///     list is refused rather than checking nothing).
    /// - Throws: ``EncryptedBundleError/wrongKey(slotKinds:)``,
    ///   `.unusableKey`, `.notABundle`, `.unsupportedVersion`,
    ///   `.damagedBundle`, `.io`; with `verifyingKeys`, `.notSigned`,
    ///   `.untrustedSigner`, `.badSignature`.
    public convenience init(source: any ByteSource, unlock: Unlock,
                            verifyingSignatureWith verifyingKeys: [VerifyingKey]? = nil) throws(EncryptedBundleError) {
        var origin = OriginPolicy()
        if let verifyingKeys {
            guard !verifyingKeys.isEmpty else { throw .unusableKey(reason: "no verifying key given") }
            origin = OriginPolicy(signers: verifyingKeys.map(\.key))
        }
        try self.init(source: source, unlock: unlock, origin: origin)
    }

    /// Opens the bundle file at `path` (as ``init(source:unlock:verifyingSignatureWith:)``
    /// with a ``FileByteSource``).
    ///
    /// - Throws: as ``init(source:unlock:verifyingSignatureWith:)``; `.io`
    ///   when the file cannot be opened or is not a regular file.
    public convenience init(path: String, unlock: Unlock,
                            verifyingSignatureWith verifyingKeys: [VerifyingKey]? = nil) throws(EncryptedBundleError) {
        let source = try Self.perform([]) { try FileByteSource(path: path) }
        try self.init(source: source, unlock: unlock, verifyingSignatureWith: verifyingKeys)
    }

    /// The one initializer that opens: the public ones and the C ABI's
    /// (EncryptedBundle+Embedding.swift) come here.
    init(source: any ByteSource, unlock: Unlock, origin: OriginPolicy) throws(EncryptedBundleError) {
        // Symlinks that point outside the bundle do not refuse the whole
        // bundle here, unlike a mount: this API never follows them (a path
        // through one throws .symlinkOutsideBundle) and only reports their
        // targets as data.
        reader = try Self.perform([]) {
            try BundleReader.open(source: source, materials: try unlock.keyMaterials(),
                                  options: OpenOptions(allowsExternalSymlinks: true, origin: origin))
        }
    }

    /// The bundle's id, 32 hex digits: random per bundle (and new after a
    /// rekey that removes a slot), for pinning one exact bundle.
    public var bundleID: String { Hex.encode(reader.header.bundleID) }

    /// The fingerprint of the key that signed the bundle, or nil when it is
    /// not signed (or signed in a version this build cannot read). Checked
    /// only when the bundle was opened with `verifyingSignatureWith:`.
    public var signerFingerprint: String? { (try? reader.header.signature())??.signerFingerprint }

    // MARK: - Directories

    /// The names in the directory at `path`, sorted; without "." and "..".
    ///
    /// A name that is not valid UTF-8 is listed with U+FFFD in place of
    /// its invalid bytes and cannot be opened by that `String`: use
    /// ``contentsOfDirectory(atBytePath:)`` to reach it.
    ///
    /// - Parameter path: a directory, or a symlink to one; "" or "/" is the root.
    /// - Returns: the names, in `String` order.
    /// - Throws: ``EncryptedBundleError/noSuchFile(path:)``,
    ///   `.notADirectory`, `.symlinkOutsideBundle`, `.damagedBundle`, `.io`.
    public func contentsOfDirectory(atPath path: String) throws(EncryptedBundleError) -> [String] {
        try contentsOfDirectory(atBytePath: Array(path.utf8)).map { String(decoding: $0, as: UTF8.self) }.sorted()
    }

    /// The names in the directory at `path`, as bytes, sorted bytewise;
    /// without "." and "..".
    ///
    /// - Parameter path: a directory, or a symlink to one; empty or "/" is the root.
    /// - Throws: as ``contentsOfDirectory(atPath:)``.
    public func contentsOfDirectory(atBytePath path: [UInt8]) throws(EncryptedBundleError) -> [[UInt8]] {
        try Self.perform(path) {
            let index = reader.index
            let directory = try index.resolve(path: path, followingLast: true)
            guard directory.kind == .directory else { throw BundleError.notADirectory }
            // The index keeps each directory's children sorted bytewise.
            return try directory.children.map { try index.name(of: index.entry(at: $0)) }
        }
    }

    /// Every path below the directory at `path`, relative to it, depth
    /// first: names in bytewise order, a directory's contents right after
    /// it ("a", "a/b", "c"). Symlinks are listed, not followed.
    ///
    /// Names that are not valid UTF-8 appear as in
    /// ``contentsOfDirectory(atPath:)``; ``subpathsOfDirectory(atBytePath:)``
    /// keeps their bytes.
    ///
    /// - Throws: as ``contentsOfDirectory(atPath:)``.
    public func subpathsOfDirectory(atPath path: String) throws(EncryptedBundleError) -> [String] {
        try subpathsOfDirectory(atBytePath: Array(path.utf8)).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Every path below the directory at `path`, relative to it, as bytes,
    /// in the order of ``subpathsOfDirectory(atPath:)``.
    ///
    /// - Throws: as ``contentsOfDirectory(atPath:)``.
    public func subpathsOfDirectory(atBytePath path: [UInt8]) throws(EncryptedBundleError) -> [[UInt8]] {
        try Self.perform(path) {
            let index = reader.index
            let top = try index.resolve(path: path, followingLast: true)
            guard top.kind == .directory else { throw BundleError.notADirectory }
            var result: [[UInt8]] = []
            // A stack instead of recursion: depth is bounded only by the
            // bundle. Children go on in reverse, so they come off in order,
            // and a directory's contents come off before its next sibling.
            var pending: [(position: Int, subpath: [UInt8])] = []
            func push(childrenOf directory: IndexEntry, below prefix: [UInt8]) throws {
                for position in directory.children.reversed() {
                    let name = try index.name(of: index.entry(at: position))
                    pending.append((position, prefix.isEmpty ? name : prefix + [UInt8(ascii: "/")] + name))
                }
            }
            try push(childrenOf: top, below: [])
            while let (position, subpath) = pending.popLast() {
                result.append(subpath)
                let entry = try index.entry(at: position)
                if entry.kind == .directory { try push(childrenOf: entry, below: subpath) }
            }
            return result
        }
    }

    // MARK: - Items

    /// The attributes of the item at `path`: kind, size, permissions,
    /// modification date and, for a symlink, its target.
    ///
    /// A symlink at `path` itself is described, not followed (as `lstat`);
    /// symlinks on the way to it are followed.
    ///
    /// - Throws: ``EncryptedBundleError/noSuchFile(path:)``,
    ///   `.notADirectory`, `.symlinkOutsideBundle`, `.damagedBundle`, `.io`.
    public func attributesOfItem(atPath path: String) throws(EncryptedBundleError) -> ItemAttributes {
        try attributesOfItem(atBytePath: Array(path.utf8))
    }

    /// The attributes of the item at the byte path `path`.
    ///
    /// - Throws: as ``attributesOfItem(atPath:)``.
    public func attributesOfItem(atBytePath path: [UInt8]) throws(EncryptedBundleError) -> ItemAttributes {
        try Self.perform(path) {
            let index = reader.index
            let entry = try index.resolve(path: path, followingLast: false)
            let target = entry.kind == .symlink ? try index.withSymlinkTarget(of: entry) { Array($0) } : nil
            return ItemAttributes(entry: entry, symbolicLinkTarget: target)
        }
    }

    // MARK: - File contents

    /// The whole contents of the file at `path`, if it holds at most
    /// `limit` bytes.
    ///
    /// The limit keeps a large file from being read into memory by
    /// accident; use ``openFile(atPath:)`` to read one in parts.
    ///
    /// - Parameters:
    ///   - path: a file, or a symlink to one.
    ///   - limit: the largest size, in bytes, to read whole.
    /// - Returns: the file's bytes.
    /// - Throws: ``EncryptedBundleError/tooLarge(path:size:limit:)``,
    ///   `.damagedChunk`, `.noSuchFile`, `.isADirectory`, `.notADirectory`,
    ///   `.symlinkOutsideBundle`, `.damagedBundle`, `.io`.
    public func contents(atPath path: String, limit: Int = 64 << 20) throws(EncryptedBundleError) -> Data {
        try contents(atBytePath: Array(path.utf8), limit: limit)
    }

    /// The whole contents of the file at the byte path `path`, if it holds
    /// at most `limit` bytes.
    ///
    /// - Throws: as ``contents(atPath:limit:)``.
    public func contents(atBytePath path: [UInt8], limit: Int = 64 << 20) throws(EncryptedBundleError) -> Data {
        let file = try openFile(atBytePath: path)
        guard file.size <= UInt64(max(limit, 0)) else { throw .tooLarge(path: path, size: file.size, limit: limit) }
        // size ≤ limit ≤ Int.max: the conversion cannot trap.
        return try file.read(upToCount: Int(file.size), atOffset: 0)
    }

    /// Opens the file at `path` for reads at any offset, from any thread.
    ///
    /// Opening reads nothing but the index; no descriptor is held, so an
    /// ``EncryptedFile`` needs no closing.
    ///
    /// - Parameter path: a file, or a symlink to one.
    /// - Throws: ``EncryptedBundleError/noSuchFile(path:)``,
    ///   `.isADirectory`, `.notADirectory`, `.symlinkOutsideBundle`,
    ///   `.damagedBundle`, `.io`.
    public func openFile(atPath path: String) throws(EncryptedBundleError) -> EncryptedFile {
        try openFile(atBytePath: Array(path.utf8))
    }

    /// Opens the file at the byte path `path`.
    ///
    /// - Throws: as ``openFile(atPath:)``.
    public func openFile(atBytePath path: [UInt8]) throws(EncryptedBundleError) -> EncryptedFile {
        try Self.perform(path) {
            let entry = try reader.index.resolve(path: path, followingLast: true)
            // resolve followed the last symlink: a directory is all else it can be.
            guard entry.kind == .file else { throw BundleError.isADirectory }
            return EncryptedFile(reader: reader, entry: entry, bytePath: path)
        }
    }

    // MARK: - Errors

    /// Runs `body`, turning whatever it throws into ``EncryptedBundleError``
    /// about `path`: every public call goes through here or through
    /// ``EncryptedFile``'s equivalent.
    static func perform<Result>(_ path: [UInt8], _ body: () throws -> Result) throws(EncryptedBundleError) -> Result {
        do { return try body() } catch { throw EncryptedBundleError(error, path: path) }
    }
}

extension EncryptedBundle: CustomReflectable {
    /// An empty mirror: `dump`, `print` and debuggers show no internals
    /// (the reader behind this object holds the bundle's keys).
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}
