import EncFSCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Fetch units of one remote bundle kept on local disk, exactly as they
/// came from the server: ciphertext only.
///
/// One directory per bundle id under the cache root, locked with `flock`
/// so that a second daemon cannot share it. Each unit is one file, written
/// under a temporary name and renamed into place, so a unit file exists
/// only complete; a file of the wrong length is dropped. Nothing here is
/// trusted: the reader authenticates every chunk it takes from the cache,
/// and a chunk that fails makes the source drop the unit and fetch it
/// again (``RemoteBundleSource/discardCopies(fromAbsoluteOffset:count:)``).
///
/// Least-recently-used units are evicted when a new one is inserted, so
/// the directory never holds more than ``limit`` bytes of units.
final class CiphertextCache: Sendable {
    /// The bundle's directory.
    let directory: [UInt8]
    /// Most bytes of unit files kept.
    let limit: UInt64
    /// Held for the cache's life: the `flock` on `directory/lock`.
    private let lockFile: FileDescriptor
    private let state: Mutex<State>
    /// Unit files kept open between reads.
    private let openFiles = OpenUnitFiles(capacity: openFileLimit)
    /// Most unit files kept open: more than the mount's worker threads,
    /// so that each reader's current unit stays open.
    static let openFileLimit = 32

    private struct Unit {
        /// The file's length.
        var length: Int
        var lastUse: UInt64
        /// The file is in place (false while it is written: counted, not
        /// readable, not evicted).
        var ready: Bool
        /// The clock when it was stored: tells this file from an earlier
        /// one of the same unit (``OpenUnitFiles``).
        var generation: UInt64
    }

    private struct State {
        var units: [UInt64: Unit] = [:]
        var total: UInt64 = 0
        var clock: UInt64 = 0
    }

    /// Opens (creating it) the directory of the bundle `bundleID` under
    /// `root`.
    ///
    /// - Parameters:
    ///   - version: what tells this object's bytes from another object
    ///     with the same bundle id (size and ETag); units of another
    ///     version are deleted.
    /// - Throws: `RemoteError.cache` when a directory cannot be made or
    ///   another process holds the lock.
    init(root: [UInt8], bundleID: [UInt8], version: [UInt8], limit: UInt64) throws(RemoteError) {
        try Self.makeDirectories(root)
        directory = root + Array("/\(Hex.encode(bundleID))".utf8)
        try Self.makeDirectories(directory)
        self.limit = limit
        do {
            lockFile = try FileDescriptor.open(directory + Array("/lock".utf8), flags: O_RDWR | O_CREAT, mode: 0o600)
        } catch {
            throw .cache("cannot create its lock file", path: directory)
        }
        guard flock(lockFile.rawValue, LOCK_EX | LOCK_NB) == 0 else {
            throw .cache("in use by another encfs process (give each mount its own --cache-dir)", path: directory)
        }
        var initial = State()
        let versionPath = directory + Array("/version".utf8)
        let sameVersion = (try? Self.contents(of: versionPath)) == version
        for (unit, length, _) in Self.listUnits(directory).sorted(by: { $0.modified < $1.modified }) {
            if !sameVersion {
                Self.remove(directory, unit)
                continue
            }
            initial.clock += 1
            initial.units[unit] = Unit(length: length, lastUse: initial.clock, ready: true, generation: initial.clock)
            initial.total += UInt64(length)
        }
        state = Mutex(initial)
        if !sameVersion { try Self.writeVersion(version, to: versionPath, directory: directory) }
    }

    /// Bytes of unit files now.
    var totalBytes: UInt64 { state.withLock { $0.total } }

    /// Whether unit `unit` is stored.
    func contains(_ unit: UInt64) -> Bool { state.withLock { $0.units[unit] != nil } }

    /// Reads `buffer.count` bytes at `offset` of unit `unit`, whose file
    /// must be `length` bytes long.
    ///
    /// - Returns: false when the unit is missing or its file is not as
    ///   expected (then dropped).
    func read(unit: UInt64, length: Int, at offset: Int, into buffer: UnsafeMutableRawBufferPointer) -> Bool {
        guard let file = openFile(of: unit, length: length) else { return false }
        guard (try? FileIO.preadFull(file.rawValue, into: buffer, at: UInt64(offset), path: [])) == buffer.count else {
            discard(unit)
            return false
        }
        return true
    }

    /// Asks the kernel to read unit `unit`'s whole file (`length` bytes)
    /// into its page cache in the background: a sequential reader will want
    /// it next, and the kernel's own read-ahead ends with each unit file.
    /// Nothing when the unit is not stored; pages already cached cost a
    /// lookup each.
    func readAhead(unit: UInt64, length: Int) {
        guard let file = openFile(of: unit, length: length) else { return }
        _ = posix_fadvise(file.rawValue, 0, off_t(length), POSIX_FADV_WILLNEED)
    }

    /// The open file of stored unit `unit`: kept open from an earlier read,
    /// or opened now and kept.
    ///
    /// - Returns: nil when the unit is not stored, or its file is missing
    ///   or not `length` bytes long (then dropped).
    private func openFile(of unit: UInt64, length: Int) -> FileDescriptor? {
        let found = state.withLock { state -> UInt64? in
            guard let entry = state.units[unit], entry.ready else { return nil }
            state.clock += 1
            state.units[unit]?.lastUse = state.clock
            return entry.generation
        }
        guard let generation = found else { return nil }
        if let file = openFiles.file(of: unit, generation: generation) { return file }
        let fd = withPath(of: unit) { open($0, O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else {
            forget(unit)
            return nil
        }
        let file = FileDescriptor(taking: fd)
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_size == length else {
            discard(unit)
            return nil
        }
        return openFiles.keep(file, of: unit, generation: generation)
    }

    /// Stores a fetched unit, evicting least-recently-used units first so
    /// that the total stays within ``limit``. Best effort: a unit that
    /// cannot be written is simply not cached.
    func store(unit: UInt64, bytes: UnsafeRawBufferPointer) {
        let length = UInt64(bytes.count)
        guard length <= limit else { return }
        let evicted = state.withLock { state -> [UInt64] in
            guard state.units[unit] == nil else { return [] }
            var evicted: [UInt64] = []
            while state.total + length > limit,
                  let oldest = state.units.filter({ $0.value.ready }).min(by: { $0.value.lastUse < $1.value.lastUse }) {
                state.units[oldest.key] = nil
                state.total -= UInt64(oldest.value.length)
                evicted.append(oldest.key)
            }
            // Reserved now, so concurrent stores count it; readable once
            // renamed into place.
            state.clock += 1
            state.units[unit] = Unit(length: bytes.count, lastUse: state.clock, ready: false, generation: state.clock)
            state.total += length
            return evicted
        }
        for old in evicted {
            openFiles.remove(old)
            Self.remove(directory, old)
        }
        guard Self.writeUnit(bytes, to: Self.path(directory, unit), directory: directory, unit: unit) else {
            forget(unit)
            return
        }
        state.withLock { state in state.units[unit]?.ready = true }
    }

    /// Deletes unit `unit` (it failed authentication or was torn).
    func discard(_ unit: UInt64) {
        forget(unit)
        Self.remove(directory, unit)
    }

    private func forget(_ unit: UInt64) {
        openFiles.remove(unit)
        state.withLock { state in
            if let entry = state.units.removeValue(forKey: unit) { state.total -= UInt64(entry.length) }
        }
    }

    // MARK: - Files

    private static let unitPrefix = Array("unit-".utf8)

    /// Calls `body` with the NUL-terminated path of unit `unit`, built on
    /// the stack: a read served from the cache allocates nothing.
    private func withPath<R>(of unit: UInt64, _ body: (UnsafePointer<CChar>) -> R) -> R {
        let prefix = directory.count + 1 + Self.unitPrefix.count
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: prefix + 17) { path in
            var at = 0
            func append(_ byte: UInt8) {
                path[at] = byte
                at += 1
            }
            directory.forEach(append)
            append(UInt8(ascii: "/"))
            Self.unitPrefix.forEach(append)
            // Hex digits, most significant first, no leading zeros (as
            // ``path(_:_:)`` names it).
            var digits = 1
            while digits < 16 && unit >> (4 * UInt64(digits)) != 0 { digits += 1 }
            for i in 0..<digits {
                let nibble = UInt8((unit >> (4 * UInt64(digits - 1 - i))) & 0xF)
                append(nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10)
            }
            append(0)
            guard let base = path.baseAddress else { preconditionFailure("internal error: empty path buffer") }
            return UnsafeRawPointer(base).withMemoryRebound(to: CChar.self, capacity: at) { body($0) }
        }
    }

    static func path(_ directory: [UInt8], _ unit: UInt64) -> [UInt8] {
        directory + [UInt8(ascii: "/")] + unitPrefix + Array(String(unit, radix: 16).utf8)
    }

    private static func remove(_ directory: [UInt8], _ unit: UInt64) {
        _ = path(directory, unit).withCString { unlink($0) }
    }

    /// Writes `bytes` under a temporary name, then renames it to `path`.
    private static func writeUnit(_ bytes: UnsafeRawBufferPointer, to path: [UInt8], directory: [UInt8], unit: UInt64) -> Bool {
        let temporary = directory + Array("/.tmp-\(String(unit, radix: 16))-\(getpid())-\(pthread_self())".utf8)
        let fd = temporary.withCString { open($0, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600) }
        guard fd >= 0 else { return false }
        let written = (try? FileIO.writeAll(fd, bytes, path: temporary)) != nil
        close(fd)
        guard written, temporary.withCString({ from in path.withCString { rename(from, $0) } }) == 0 else {
            _ = temporary.withCString { unlink($0) }
            return false
        }
        return true
    }

    private static func writeVersion(_ version: [UInt8], to path: [UInt8], directory: [UInt8]) throws(RemoteError) {
        let temporary = path + Array(".tmp".utf8)
        let fd = temporary.withCString { open($0, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600) }
        guard fd >= 0 else { throw .cache("cannot write its version file", path: directory) }
        let written = version.withUnsafeBytes { (try? FileIO.writeAll(fd, $0, path: temporary)) != nil }
        close(fd)
        guard written, temporary.withCString({ from in path.withCString { rename(from, $0) } }) == 0 else {
            throw .cache("cannot write its version file", path: directory)
        }
    }

    private static func contents(of path: [UInt8]) throws -> [UInt8] {
        let fd = try FileDescriptor.open(path, flags: O_RDONLY)
        var bytes = [UInt8](repeating: 0, count: 4096)
        let n = try bytes.withUnsafeMutableBytes { try FileIO.readFull(fd.rawValue, into: $0, path: path) }
        return Array(bytes.prefix(n))
    }

    /// Creates `path` and missing parents, mode 0700 (the cache tells
    /// which bundles a user reads).
    private static func makeDirectories(_ path: [UInt8]) throws(RemoteError) {
        let slash = UInt8(ascii: "/")
        for end in path.indices where path[end] != slash && (end == path.count - 1 || path[end + 1] == slash) {
            let prefix = Array(path[...end])
            if prefix.withCString({ mkdir($0, 0o700) }) != 0 && errno != EEXIST {
                throw .cache("cannot create directory", path: prefix)
            }
        }
        var st = stat()
        guard path.withCString({ stat($0, &st) }) == 0, st.st_mode & S_IFMT == S_IFDIR else {
            throw .cache("not a directory", path: path)
        }
    }

    /// Unit files in `directory` with their lengths and modification
    /// times; leftover temporary files are deleted.
    private static func listUnits(_ directory: [UInt8]) -> [(unit: UInt64, length: Int, modified: Int)] {
        guard let dir = directory.withCString({ opendir($0) }) else { return [] }
        defer { closedir(dir) }
        var found: [(unit: UInt64, length: Int, modified: Int)] = []
        while let entry = readdir(dir) {
            let name: [UInt8] = withUnsafeBytes(of: entry.pointee.d_name) { raw in Array(raw.prefix { $0 != 0 }) }
            let full = directory + [UInt8(ascii: "/")] + name
            if name.starts(with: Array(".tmp-".utf8)) {
                _ = full.withCString { unlink($0) }
                continue
            }
            guard name.starts(with: unitPrefix),
                  let unit = UInt64(String(decoding: name.dropFirst(unitPrefix.count), as: UTF8.self), radix: 16) else { continue }
            var st = stat()
            guard full.withCString({ stat($0, &st) }) == 0 else { continue }
            found.append((unit, Int(st.st_size), Int(st.st_mtim.tv_sec)))
        }
        return found
    }
}
