#if canImport(Glibc)
import Glibc
#endif

/// The source directory, walked breadth-first into index order.
///
/// Paths stay byte strings from `readdir` to `openat`; nothing passes
/// through `String` or `FileManager`, so names that are not UTF-8 survive.
struct SourceTree {
    /// One file, directory or symlink found by the walk.
    struct Node {
        var name: [UInt8]
        var relativePath: [UInt8]
        var kind: IndexEntry.Kind
        var mode: UInt16
        var mtimeSeconds: Int64
        var mtimeNanoseconds: UInt32
        var size: UInt64
        var parent: Int
        var firstChild: Int = 0
        var childCount: Int = 0
        var symlinkTarget: [UInt8] = []
        /// Device and inode seen by the walk. Paths are reopened from the
        /// root later, and `openat` follows a directory that was swapped for
        /// a symlink in between: checking the identity keeps every open
        /// inside the tree that was walked.
        var device: UInt64 = 0
        var inode: UInt64 = 0
    }

    /// Nodes in breadth-first order; node 0 is the source directory itself.
    var nodes: [Node] = []
    /// Entries skipped because of their type (FIFOs, sockets, devices).
    private(set) var skipped = 0
    /// Entries left out by `--exclude`.
    private(set) var excluded = 0

    /// Walks `root`.
    ///
    /// - Parameters:
    ///   - root: the source directory path.
    ///   - rootDirectory: it, open (O_DIRECTORY).
    ///   - excludes: glob patterns; a pattern with a '/' matches the path
    ///     relative to the root, otherwise the entry name; a matching
    ///     directory is left out with everything below it.
    ///   - warn: called for each skipped entry with a message and its path.
    /// - Throws: `BundleError.io` or `.limitExceeded`.
    init(root: [UInt8], rootDirectory: FileDescriptor, excludes: [[UInt8]], warn: (String, [UInt8]) -> Void) throws {
        let st: stat
        do { st = try rootDirectory.status() } catch { throw BundleError.io(errno: error.errno, operation: "stat", path: root) }
        nodes.append(Node(name: [], relativePath: [], kind: .directory, mode: UInt16(st.st_mode & 0o7777),
                          mtimeSeconds: Int64(st.st_mtim.tv_sec), mtimeNanoseconds: UInt32(st.st_mtim.tv_nsec),
                          size: 0, parent: 0, device: UInt64(st.st_dev), inode: UInt64(st.st_ino)))
        var next = 0
        while next < nodes.count {
            defer { next += 1 }
            guard nodes[next].kind == .directory else { continue }
            let children = try readDirectory(at: next, root: root, rootDirectory: rootDirectory, excludes: excludes, warn: warn)
            nodes[next].firstChild = children.isEmpty ? 0 : nodes.count
            nodes[next].childCount = children.count
            nodes.append(contentsOf: children)
            guard nodes.count <= BundleFormat.maximumEntries else {
                throw BundleError.limitExceeded("more than \(BundleFormat.maximumEntries) entries")
            }
        }
    }

    private mutating func readDirectory(at position: Int, root: [UInt8], rootDirectory: FileDescriptor, excludes: [[UInt8]],
                                        warn: (String, [UInt8]) -> Void) throws -> [Node] {
        let dirPath = nodes[position].relativePath
        let displayPath = Self.join(root, dirPath)
        // Raw, not a FileDescriptor: fdopendir below takes it over, and
        // closedir closes it.
        let fd = dirPath.isEmpty ? fcntl(rootDirectory.rawValue, F_DUPFD_CLOEXEC, 0)
                                 : dirPath.withCString { openat(rootDirectory.rawValue, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else { throw BundleError.lastIO("open directory", displayPath) }
        var opened = stat()
        guard fstat(fd, &opened) == 0,
              UInt64(opened.st_dev) == nodes[position].device, UInt64(opened.st_ino) == nodes[position].inode else {
            close(fd)
            throw BundleError.sourceChanged(path: displayPath, what: "directory was replaced")
        }
        guard let dir = fdopendir(fd) else {
            close(fd)
            throw BundleError.lastIO("open directory", displayPath)
        }
        defer { closedir(dir) }
        rewinddir(dir)
        var children: [Node] = []
        while true {
            errno = 0
            guard let ent = readdir(dir) else {
                if errno != 0 { throw BundleError.lastIO("read directory", displayPath) }
                break
            }
            let name = withUnsafeBytes(of: ent.pointee.d_name) { raw -> [UInt8] in
                let bytes = raw.bindMemory(to: UInt8.self)
                return Array(bytes.prefix { $0 != 0 })
            }
            if name == [0x2E] || name == [0x2E, 0x2E] { continue }
            let relative = dirPath.isEmpty ? name : dirPath + [0x2F] + name
            if Self.isExcluded(name: name, relativePath: relative, patterns: excludes) {
                excluded += 1
                continue
            }
            var st = stat()
            let rc = name.withCString { fstatat(dirfd(dir), $0, &st, AT_SYMLINK_NOFOLLOW) }
            guard rc == 0 else { throw BundleError.lastIO("stat", Self.join(root, relative)) }
            var node = Node(name: name, relativePath: relative, kind: .file, mode: UInt16(st.st_mode & 0o7777),
                            mtimeSeconds: Int64(st.st_mtim.tv_sec), mtimeNanoseconds: UInt32(st.st_mtim.tv_nsec),
                            size: UInt64(max(st.st_size, 0)), parent: position,
                            device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
            switch st.st_mode & S_IFMT {
            case S_IFREG:
                node.kind = .file
            case S_IFDIR:
                node.kind = .directory
                node.size = 0
            case S_IFLNK:
                node.kind = .symlink
                node.symlinkTarget = try Self.readLink(dirfd(dir), name: name, display: Self.join(root, relative))
                node.size = UInt64(node.symlinkTarget.count)
            default:
                skipped += 1
                warn("skipping \(Self.typeName(st.st_mode)), only regular files, directories and symlinks are packed", Self.join(root, relative))
                continue
            }
            children.append(node)
        }
        children.sort { $0.name.lexicographicallyPrecedes($1.name) }
        return children
    }

    private static func readLink(_ dirFD: Int32, name: [UInt8], display: [UInt8]) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: BundleFormat.maximumSymlinkLength + 1)
        let n = name.withCString { cname in
            buffer.withUnsafeMutableBufferPointer { b in
                b.withMemoryRebound(to: CChar.self) { c in
                    guard let base = c.baseAddress else { return -1 }
                    return readlinkat(dirFD, cname, base, c.count)
                }
            }
        }
        guard n >= 0 else { throw BundleError.lastIO("read symlink", display) }
        guard n >= 1, n <= BundleFormat.maximumSymlinkLength else {
            throw BundleError.limitExceeded("symlink target longer than \(BundleFormat.maximumSymlinkLength) bytes")
        }
        return Array(buffer[0..<n])
    }

    static func isExcluded(name: [UInt8], relativePath: [UInt8], patterns: [[UInt8]]) -> Bool {
        for pattern in patterns {
            let subject = pattern.contains(0x2F) ? relativePath : name
            let flags: Int32 = pattern.contains(0x2F) ? FNM_PATHNAME : 0
            let matched = pattern.withCString { p in subject.withCString { fnmatch(p, $0, flags) == 0 } }
            if matched { return true }
        }
        return false
    }

    private static func typeName(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFIFO: return "fifo"
        case S_IFSOCK: return "socket"
        case S_IFCHR: return "character device"
        case S_IFBLK: return "block device"
        default: return "special file"
        }
    }

    /// `root/relative` for messages.
    static func join(_ root: [UInt8], _ relative: [UInt8]) -> [UInt8] {
        if relative.isEmpty { return root }
        return root.last == 0x2F ? root + relative : root + [0x2F] + relative
    }
}
