#if canImport(Glibc)
import Glibc
#endif

/// Directories and files a privileged process writes into, opened so that
/// no other user can redirect where the writes land.
///
/// A root daemon that opens `/tmp/cache/lock` by path writes wherever
/// whoever owns `/tmp/cache` lets that name point. Here a path is walked
/// from `/` one component at a time, each opened relative to the one
/// before with `O_NOFOLLOW`, and every directory on the way must be one
/// that only root or the effective user can change:
///
/// - a directory passed through is owned by root or the effective user,
///   and not writable by group or others unless sticky (`/tmp`: others
///   cannot rename or remove what they do not own there);
/// - a symbolic link is followed only when root or the effective user owns
///   it (it lies in a directory already checked, so nobody else can have
///   put it there or change it), at most ``linkLimit`` of them;
/// - the directory finally opened is held as a descriptor, and every later
///   operation is relative to it (`openat`, `renameat`, `unlinkat`).
///
/// The rule for the last directory itself is the caller's (``Rule``).
package enum TrustedPath {
    /// What the directory at the end of the path must be.
    package enum Rule: Sendable {
        /// Owned by the effective user, not writable by group or others:
        /// a directory whose entries this process alone creates (a cache).
        case owned
        /// The rule of every directory on the way (owned by root or the
        /// effective user, not writable by others unless sticky): a
        /// directory where this process creates one entry of its own (a
        /// log file in `/var/log` or `/tmp`).
        case passable
    }

    /// Symbolic links followed in one walk, as the kernel's own limit.
    static let linkLimit = 40

    /// Opens the directory at `path` (absolute) as `rule` requires,
    /// creating missing components mode 0700 when `create`.
    ///
    /// - Returns: the directory, opened `O_DIRECTORY` (`O_PATH` is not
    ///   used: the caller lists it and `fdopendir` needs a real one).
    /// - Throws: ``TrustedPathError`` naming the component at fault.
    package static func openDirectory(_ path: [UInt8], rule: Rule, create: Bool) throws(TrustedPathError) -> FileDescriptor {
        guard path.first == UInt8(ascii: "/") else { throw .relative(path) }
        let root = try openComponent(at: .currentDirectory, Array("/".utf8), shown: Array("/".utf8))
        try check(root, shown: Array("/".utf8), rule: .passable)
        var walked: [(file: FileDescriptor, shown: [UInt8])] = [(root, Array("/".utf8))]
        var pending = Array(components(of: path).reversed())
        var links = 0
        while let name = pending.popLast() {
            guard let (current, shownSoFar) = walked.last else { preconditionFailure("internal error: empty walk") }
            if name == Array("..".utf8) {
                if walked.count > 1 { walked.removeLast() }
                continue
            }
            let shown = shownSoFar == Array("/".utf8) ? shownSoFar + name : shownSoFar + [UInt8(ascii: "/")] + name
            var st = try entryStatus(current, name, shown: shown, create: create)
            if st.st_mode & S_IFMT == S_IFLNK {
                guard st.st_uid == 0 || st.st_uid == geteuid() else { throw .untrustedLink(shown) }
                links += 1
                guard links <= linkLimit else { throw .io(errno: ELOOP, shown) }
                let target = try readLink(current, name, shown: shown)
                if target.first == UInt8(ascii: "/") { walked.removeSubrange(1...) }
                pending += components(of: target).reversed()
                continue
            }
            let file = try openComponent(at: current.borrowed, name, shown: shown)
            st = try status(file, shown: shown)
            try check(st, shown: shown, rule: pending.isEmpty ? rule : .passable)
            walked.append((file, shown))
        }
        guard let last = walked.last else { preconditionFailure("internal error: empty walk") }
        if walked.count == 1 { try check(last.file, shown: last.shown, rule: rule) }
        return last.file
    }

    /// Opens the directory `name` in `directory` (made 0700 first when
    /// missing and `create`) as `rule` requires; a symbolic link there is
    /// refused, never followed.
    ///
    /// - Throws: ``TrustedPathError`` naming `shown`.
    package static func openSubdirectory(_ name: [UInt8], in directory: FileDescriptor, shown: [UInt8], rule: Rule,
                                         create: Bool) throws(TrustedPathError) -> FileDescriptor {
        let st = try entryStatus(directory, name, shown: shown, create: create)
        guard st.st_mode & S_IFMT != S_IFLNK else { throw .symbolicLink(shown) }
        let file = try openComponent(at: directory.borrowed, name, shown: shown)
        try check(file, shown: shown, rule: rule)
        return file
    }

    /// Opens (creating it 0600) the file `name` in `directory` for
    /// appending, refusing anything but a regular file of the effective
    /// user with one link: a symbolic link, another user's file, or a hard
    /// link to a file elsewhere.
    ///
    /// - Throws: ``TrustedPathError`` naming `shown`.
    package static func openForAppending(_ name: [UInt8], in directory: FileDescriptor,
                                         shown: [UInt8]) throws(TrustedPathError) -> FileDescriptor {
        // Looked at first: the kernel answers EACCES rather than ELOOP for
        // another user's link in a sticky directory (protected_symlinks).
        var st = stat()
        if name.withCString({ fstatat(directory.rawValue, $0, &st, AT_SYMLINK_NOFOLLOW) }) == 0, st.st_mode & S_IFMT == S_IFLNK {
            throw .symbolicLink(shown)
        }
        let fd = name.withCString { openat(directory.rawValue, $0, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0o600) }
        guard fd >= 0 else { throw errno == ELOOP ? .symbolicLink(shown) : .io(errno: errno, shown) }
        let file = FileDescriptor(taking: fd, path: shown)
        st = try status(file, shown: shown)
        guard st.st_mode & S_IFMT == S_IFREG, st.st_nlink == 1 else { throw .notARegularFile(shown) }
        guard st.st_uid == geteuid() else { throw .notOwned(shown) }
        return file
    }

    /// Opens the file at `path` for appending (``openForAppending(_:in:shown:)``)
    /// in a directory reached as ``openDirectory(_:rule:create:)`` walks,
    /// with ``Rule/passable``.
    package static func openForAppending(_ path: [UInt8]) throws(TrustedPathError) -> FileDescriptor {
        guard let slash = path.lastIndex(of: UInt8(ascii: "/")), slash < path.count - 1 else { throw .relative(path) }
        let directory = try openDirectory(slash == 0 ? Array("/".utf8) : Array(path[..<slash]), rule: .passable, create: false)
        return try openForAppending(Array(path[(slash + 1)...]), in: directory, shown: path)
    }

    /// Refuses `st` unless it is a directory `rule` accepts.
    static func check(_ st: stat, shown: [UInt8], rule: Rule) throws(TrustedPathError) {
        guard st.st_mode & S_IFMT == S_IFDIR else { throw .notADirectory(shown) }
        let euid = geteuid()
        switch rule {
        case .owned:
            guard st.st_uid == euid else { throw .notOwned(shown) }
            guard st.st_mode & 0o022 == 0 else { throw .writableByOthers(shown) }
        case .passable:
            guard st.st_uid == 0 || st.st_uid == euid else { throw .notOwned(shown) }
            guard st.st_mode & 0o022 == 0 || st.st_mode & S_ISVTX != 0 else { throw .writableByOthers(shown) }
        }
    }

    private static func check(_ file: FileDescriptor, shown: [UInt8], rule: Rule) throws(TrustedPathError) {
        try check(try status(file, shown: shown), shown: shown, rule: rule)
    }

    /// The non-empty components of `path`, "." dropped.
    static func components(of path: [UInt8]) -> [[UInt8]] {
        path.split(separator: UInt8(ascii: "/")).map(Array.init).filter { $0 != [UInt8(ascii: ".")] }
    }

    /// `name` in `directory` not followed, made (0700) first when missing
    /// and `create`.
    private static func entryStatus(_ directory: FileDescriptor, _ name: [UInt8], shown: [UInt8],
                                    create: Bool) throws(TrustedPathError) -> stat {
        var st = stat()
        if name.withCString({ fstatat(directory.rawValue, $0, &st, AT_SYMLINK_NOFOLLOW) }) == 0 { return st }
        guard errno == ENOENT, create else { throw .io(errno: errno, shown) }
        if name.withCString({ mkdirat(directory.rawValue, $0, 0o700) }) != 0, errno != EEXIST { throw .io(errno: errno, shown) }
        guard name.withCString({ fstatat(directory.rawValue, $0, &st, AT_SYMLINK_NOFOLLOW) }) == 0 else { throw .io(errno: errno, shown) }
        return st
    }

    private static func openComponent(at directory: FileDescriptor.Borrowed, _ name: [UInt8],
                                      shown: [UInt8]) throws(TrustedPathError) -> FileDescriptor {
        let fd = SystemCall.retryingInterrupts {
            name.withCString { openat(directory.rawValue, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        }
        guard fd >= 0 else {
            // Replaced by a link or a file since it was looked at.
            throw errno == ELOOP || errno == ENOTDIR ? .notADirectory(shown) : .io(errno: errno, shown)
        }
        return FileDescriptor(taking: fd, path: shown)
    }

    private static func status(_ file: FileDescriptor, shown: [UInt8]) throws(TrustedPathError) -> stat {
        var st = stat()
        guard fstat(file.rawValue, &st) == 0 else { throw .io(errno: errno, shown) }
        return st
    }

    private static func readLink(_ directory: FileDescriptor, _ name: [UInt8], shown: [UInt8]) throws(TrustedPathError) -> [UInt8] {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX))
        let n = name.withCString { readlinkat(directory.rawValue, $0, &buffer, buffer.count) }
        guard n > 0, n < buffer.count else { throw .io(errno: n < 0 ? errno : ENAMETOOLONG, shown) }
        return buffer.prefix(n).map { UInt8(bitPattern: $0) }
    }
}

/// Why ``TrustedPath`` refused a path; each names the component at fault.
package enum TrustedPathError: Error, Sendable, CustomStringConvertible {
    /// Not an absolute path (callers resolve relative ones first).
    case relative([UInt8])
    /// A symbolic link another user owns.
    case untrustedLink([UInt8])
    /// A symbolic link where none is followed.
    case symbolicLink([UInt8])
    /// Owned by another user (or, on the way, by neither root nor this user).
    case notOwned([UInt8])
    /// Writable by group or others (and not sticky, on the way).
    case writableByOthers([UInt8])
    /// Not a directory (or replaced by something else while walked).
    case notADirectory([UInt8])
    /// Not a regular file with one link (a log file).
    case notARegularFile([UInt8])
    /// A system call failed.
    case io(errno: Int32, [UInt8])

    /// The component at fault.
    package var path: [UInt8] {
        switch self {
        case .relative(let p), .untrustedLink(let p), .symbolicLink(let p), .notOwned(let p), .writableByOthers(let p), .notADirectory(let p),
             .notARegularFile(let p), .io(_, let p): return p
        }
    }

    package var description: String {
        switch self {
        case .relative: return "not an absolute path"
        case .untrustedLink: return "a symbolic link owned by another user"
        case .symbolicLink: return "a symbolic link"
        case .notOwned: return "owned by another user"
        case .writableByOthers: return "writable by group or others"
        case .notADirectory: return "not a directory"
        case .notARegularFile: return "not a regular file with a single link"
        case .io(let code, _): return String(cString: strerror(code))
        }
    }
}
