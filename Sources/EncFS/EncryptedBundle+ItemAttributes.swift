import EncFSCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension EncryptedBundle {
    /// What an item in a bundle is.
    public enum ItemKind: Sendable, Hashable {
        /// A directory.
        case directory
        /// A regular file.
        case regularFile
        /// A symbolic link (its target is in ``ItemAttributes/symbolicLinkTarget``).
        case symbolicLink
    }

    /// The attributes of one item, as recorded when the bundle was packed.
    public struct ItemAttributes: Sendable, Hashable {
        /// Directory, regular file or symbolic link.
        public let kind: ItemKind
        /// For a file its length in bytes; for a symlink the length of its
        /// target (as `lstat` reports it); 0 for a directory.
        public let size: UInt64
        /// The POSIX permission bits (`0o7777` at most), such as `0o644`.
        public let permissions: UInt16
        /// The modification time of the packed item (kept to the
        /// nanosecond in the bundle; `Date` holds it to about 0.1 µs).
        public let modificationDate: Date
        /// A symlink's target as stored, as bytes; nil for other kinds.
        public let symbolicLinkTargetBytes: [UInt8]?
        /// The modification time exactly as stored, seconds since the epoch
        /// and nanoseconds: for the C ABI, which promises nanoseconds.
        package let modificationSeconds: Int64
        package let modificationNanoseconds: UInt32

        /// A symlink's target as stored (a path relative to the link's
        /// directory, usually); nil for other kinds. Bytes that are not
        /// valid UTF-8 become U+FFFD: ``symbolicLinkTargetBytes`` keeps them.
        public var symbolicLinkTarget: String? {
            symbolicLinkTargetBytes.map { String(decoding: $0, as: UTF8.self) }
        }

        /// Whether the item is a directory.
        public var isDirectory: Bool { kind == .directory }
        /// Whether the item is a regular file.
        public var isRegularFile: Bool { kind == .regularFile }
        /// Whether the item is a symbolic link.
        public var isSymbolicLink: Bool { kind == .symbolicLink }

        /// The attributes of `entry`; `symbolicLinkTarget` is its target
        /// when it is a symlink.
        init(entry: IndexEntry, symbolicLinkTarget: [UInt8]?) {
            switch entry.kind {
            case .directory: kind = .directory
            case .file: kind = .regularFile
            case .symlink: kind = .symbolicLink
            }
            // A directory has no byte size: report 0 as the documentation says.
            size = entry.kind == .symlink ? UInt64(entry.targetLength) : entry.fileSize
            permissions = entry.mode & 0o7777
            modificationDate = Date(timeIntervalSince1970: Double(entry.mtimeSeconds) + Double(entry.mtimeNanoseconds) / 1e9)
            symbolicLinkTargetBytes = symbolicLinkTarget
            modificationSeconds = entry.mtimeSeconds
            modificationNanoseconds = entry.mtimeNanoseconds
        }
    }
}
