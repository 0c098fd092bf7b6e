import EncFSCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Fetch units of one remote bundle kept on local disk, exactly as they
/// came from the server: ciphertext only.
///
/// A unit is a byte range of the bundle, named by where it starts: the
/// source chooses each one when it fetches it (starting where a read's
/// missing bytes start, so a chunk never costs two requests), so units do
/// not lie on a fixed grid and never overlap. A table of cells of
/// ``cellSize`` bytes finds the unit that holds an offset without a
/// search.
///
/// One directory per bundle id under the cache root, locked with `flock`
/// so that a second daemon cannot share it. Each unit is one file, written
/// under a temporary name and renamed into place, so a unit file exists
/// only complete; a file of the wrong length is dropped. Nothing here is
/// trusted: the reader authenticates every chunk it takes from the cache,
/// and a chunk that fails makes the source drop the unit and fetch it
/// again (``RemoteBundleSource/discardCopies(atOffset:count:)``).
///
/// Least-recently-used units are evicted when a new one is inserted, so
/// the directory never holds more than ``limit`` bytes of units.
final class CiphertextCache: Sendable {
    /// The bundle's directory, for messages: every file in it is reached
    /// through ``folder``.
    let directory: [UInt8]
    /// The bundle's directory, opened once: names are resolved relative to
    /// it (`openat`, `renameat`, `unlinkat`), never through its path,
    /// which another process could make lead elsewhere.
    private let folder: FileDescriptor
    /// Most bytes of unit files kept.
    let limit: UInt64
    /// Bytes per cell of the table that finds a unit by offset: the fetch
    /// size, so that a unit lies in two or three cells.
    let cellSize: UInt64
    /// Held for the cache's life: the `flock` on `directory/lock`.
    private let lockFile: FileDescriptor
    private let state: Mutex<State>
    /// Unit files kept open between reads.
    private let openFiles = OpenUnitFiles(capacity: openFileLimit)
    /// Reads units into the page cache for ``readAhead(unitAt:)``.
    private let warmer = PageCacheWarmer()
    /// Most unit files kept open: more than the mount's worker threads,
    /// so that each reader's current unit stays open.
    static let openFileLimit = 32
    /// Written first in the version file: caches of the fixed-grid layout
    /// before it (files named by unit number, not by offset) are wiped.
    static let layoutTag = Array("units by offset\n".utf8)

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
        /// Units by their first byte's offset in the bundle.
        var units: [UInt64: Unit] = [:]
        /// Cell (offset / cellSize) → the starts of the units overlapping it.
        var cells: [UInt64: [UInt64]] = [:]
        var total: UInt64 = 0
        var clock: UInt64 = 0

        /// The start of the unit (ready or not) holding `offset`.
        func start(holding offset: UInt64, cellSize: UInt64) -> UInt64? {
            guard let starts = cells[offset / cellSize] else { return nil }
            for start in starts where start <= offset {
                if let unit = units[start], offset - start < UInt64(unit.length) { return start }
            }
            return nil
        }

        mutating func insert(_ unit: Unit, at start: UInt64, cellSize: UInt64) {
            units[start] = unit
            total += UInt64(unit.length)
            for cell in Self.cells(of: start, length: unit.length, cellSize: cellSize) { cells[cell, default: []].append(start) }
        }

        mutating func remove(at start: UInt64, cellSize: UInt64) -> Unit? {
            guard let unit = units.removeValue(forKey: start) else { return nil }
            total -= UInt64(unit.length)
            for cell in Self.cells(of: start, length: unit.length, cellSize: cellSize) {
                cells[cell]?.removeAll { $0 == start }
                if cells[cell]?.isEmpty == true { cells[cell] = nil }
            }
            return unit
        }

        static func cells(of start: UInt64, length: Int, cellSize: UInt64) -> ClosedRange<UInt64> {
            start / cellSize...(start + UInt64(max(length, 1)) - 1) / cellSize
        }
    }

    /// Opens (creating it) the directory of the bundle `bundleID` under
    /// `root`.
    ///
    /// - Parameters:
    ///   - version: what tells this object's bytes from another object
    ///     with the same bundle id (size and ETag); units of another
    ///     version are deleted.
    ///   - fetchable: the bytes units may hold; files outside it, or
    ///     overlapping another, are deleted (the directory is not trusted).
    ///   - cellSize: see ``cellSize``.
    /// - Throws: `RemoteError.cache` when a directory cannot be made or
    ///   another process holds the lock.
    init(root: [UInt8], bundleID: [UInt8], version: [UInt8], limit: UInt64, fetchable: Range<UInt64>,
         cellSize: UInt64) throws(RemoteError) {
        let name = Array(Hex.encode(bundleID).utf8)
        let root = try Self.absolute(root)
        directory = root + [UInt8(ascii: "/")] + name
        do {
            let top = try TrustedPath.openDirectory(root, rule: .owned, create: true)
            folder = try TrustedPath.openSubdirectory(name, in: top, shown: directory, rule: .owned, create: true)
        } catch {
            throw Self.refusal(error)
        }
        self.limit = limit
        self.cellSize = max(cellSize, 1)
        do {
            lockFile = try Self.openEntry(folder, Array("lock".utf8), O_RDWR | O_CREAT)
        } catch {
            throw .cache("cannot create its lock file", path: directory)
        }
        guard flock(lockFile.rawValue, LOCK_EX | LOCK_NB) == 0 else {
            throw .cache("in use by another encfs process (give each mount its own --cache-dir)", path: directory)
        }
        let version = Self.layoutTag + version
        let sameVersion = (try? Self.contents(of: Array("version".utf8), in: folder)) == version
        state = Mutex(Self.loadUnits(folder, keep: sameVersion, fetchable: fetchable, cellSize: self.cellSize))
        if !sameVersion { try Self.writeVersion(version, in: folder, directory: directory) }
    }

    /// A refused cache directory as the user is told.
    private static func refusal(_ error: TrustedPathError) -> RemoteError {
        switch error {
        case .io(let code, let path): return .cache("cannot open directory: \(String(cString: strerror(code)))", path: path)
        default: return .cache("refused: \(error) (it must be a directory of this user that others cannot write, "
                               + "reached through directories only root or this user can change)", path: error.path)
        }
    }

    /// `path` made absolute against the working directory.
    private static func absolute(_ path: [UInt8]) throws(RemoteError) -> [UInt8] {
        guard path.first != UInt8(ascii: "/") else { return path }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { throw .cache("cannot resolve path", path: path) }
        return buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) } + [UInt8(ascii: "/")] + path
    }

    /// The units found on disk, least recently written first; the files of
    /// units not kept (another version, outside `fetchable`, overlapping an
    /// earlier unit) deleted.
    private static func loadUnits(_ directory: FileDescriptor, keep: Bool, fetchable: Range<UInt64>, cellSize: UInt64) -> State {
        var initial = State()
        var found = listUnits(directory)
        found.sort { $0.start < $1.start }
        var end = fetchable.lowerBound
        var kept: [(start: UInt64, length: Int, modified: Int)] = []
        for file in found {
            let fits = file.length > 0 && file.start >= end && file.start < fetchable.upperBound
                && UInt64(file.length) <= fetchable.upperBound - file.start
            guard keep, fits else {
                remove(directory, file.start)
                continue
            }
            kept.append(file)
            end = file.start + UInt64(file.length)
        }
        for file in kept.sorted(by: { $0.modified < $1.modified }) {
            initial.clock += 1
            initial.insert(Unit(length: file.length, lastUse: initial.clock, ready: true, generation: initial.clock),
                           at: file.start, cellSize: cellSize)
        }
        return initial
    }

    /// Bytes of unit files now.
    var totalBytes: UInt64 { state.withLock { $0.total } }

    /// What a read from the cache gave.
    struct Hit {
        /// Bytes copied (up to the end of the unit).
        var count: Int
        /// The bytes of the bundle the unit holds.
        var unit: Range<UInt64>
    }

    /// Reads from the unit that holds `offset`, up to the end of `buffer`
    /// or of the unit, whichever comes first.
    ///
    /// - Returns: nil when no stored unit holds `offset`, or its file is
    ///   not as expected (then dropped).
    func read(at offset: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> Hit? {
        guard let (file, unit) = openFile(holding: offset) else { return nil }
        let count = Int(min(UInt64(buffer.count), unit.upperBound - offset))
        let target = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count])
        guard (try? file.read(fromAbsoluteOffset: offset - unit.lowerBound, into: target)) == count else {
            discard(unit.lowerBound)
            return nil
        }
        return Hit(count: count, unit: unit)
    }

    /// Where `offset` stands: in a unit (stored, or being written), or in
    /// a gap; then where the next unit after it, before `end`, starts.
    enum Coverage: Equatable {
        case stored(Range<UInt64>)
        /// No unit holds `offset`; the first one after it starts at
        /// `until` (`end` when none starts before `end`).
        case gap(until: UInt64)
    }

    /// Tells where `offset` stands (see ``Coverage``), looking at units
    /// that start before `end`.
    func coverage(at offset: UInt64, before end: UInt64) -> Coverage {
        state.withLock { state in
            if let start = state.start(holding: offset, cellSize: cellSize), let unit = state.units[start] {
                return .stored(start..<(start + UInt64(unit.length)))
            }
            var until = end
            guard end > offset else { return .gap(until: offset) }
            for cell in offset / cellSize...(end - 1) / cellSize {
                for start in state.cells[cell] ?? [] where start > offset && start < until { until = start }
            }
            return .gap(until: until)
        }
    }

    /// Reads the file of the unit that starts at `start` into the kernel's
    /// page cache (``PageCacheWarmer``): a sequential reader will want it
    /// next, and the kernel's own read-ahead ends with each unit file.
    /// Nothing when no such unit is stored.
    ///
    /// Waits for the disk: call it off the reader's thread.
    func readAhead(unitAt start: UInt64) {
        guard let (file, unit) = openFile(holding: start), unit.lowerBound == start else { return }
        if let warmer, warmer.warm(file, count: unit.count) { return }
        _ = posix_fadvise(file.rawValue, 0, off_t(unit.count), POSIX_FADV_WILLNEED)
    }

    /// The open file of the stored unit holding `offset`: kept open from an
    /// earlier read, or opened now and kept; with the bytes it holds.
    ///
    /// - Returns: nil when no unit holding `offset` is in place, or its
    ///   file is missing or not as long as recorded (then dropped).
    private func openFile(holding offset: UInt64) -> (FileDescriptor, Range<UInt64>)? {
        if let open = openFiles.file(holding: offset) { return open }
        let found = state.withLock { state -> (start: UInt64, length: Int, generation: UInt64)? in
            guard let start = state.start(holding: offset, cellSize: cellSize), let entry = state.units[start],
                  entry.ready else { return nil }
            state.clock += 1
            state.units[start]?.lastUse = state.clock
            return (start, entry.length, entry.generation)
        }
        guard let (start, length, generation) = found else { return nil }
        let range = start..<(start + UInt64(length))
        if let file = openFiles.file(of: start, generation: generation) { return (file, range) }
        // Named in a stack buffer, not with `FileDescriptor.open(_:in:)`:
        // this runs on a read that misses the open files.
        let opened = try? SystemCall.retrying("open") {
            withName(of: start) { openat(folder.rawValue, $0, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        }
        guard let fd = opened else {
            forget(start)
            return nil
        }
        let file = FileDescriptor(taking: fd)
        guard let st = try? file.status(), st.st_mode & S_IFMT == S_IFREG, st.st_size == length else {
            discard(start)
            return nil
        }
        let (kept, closed) = openFiles.keep(file, of: start, length: length, generation: generation)
        // Its uses while open were not counted here.
        if let closed { touch(closed) }
        return (kept, range)
    }

    /// Marks the unit that starts at `start` as used now.
    private func touch(_ start: UInt64) {
        state.withLock { state in
            guard state.units[start] != nil else { return }
            state.clock += 1
            state.units[start]?.lastUse = state.clock
        }
    }

    /// Stores a fetched unit that starts at `start`, evicting
    /// least-recently-used units first so that the total stays within
    /// ``limit``. Best effort: a unit that cannot be written, or that
    /// would overlap one stored, is simply not cached.
    func store(at start: UInt64, bytes: UnsafeRawBufferPointer) {
        let length = UInt64(bytes.count)
        guard length > 0, length <= limit else { return }
        // Open units are the most recently used (their reads bypass the
        // table): evicted last.
        let open = Set(openFiles.openUnits())
        let evicted = state.withLock { state -> [UInt64]? in
            guard state.start(holding: start, cellSize: cellSize) == nil,
                  state.start(holding: start + length - 1, cellSize: cellSize) == nil else { return nil }
            var evicted: [UInt64] = []
            while state.total + length > limit,
                  let oldest = state.units.filter({ $0.value.ready }).min(by: {
                      (open.contains($0.key) ? 1 : 0, $0.value.lastUse) < (open.contains($1.key) ? 1 : 0, $1.value.lastUse)
                  }) {
                _ = state.remove(at: oldest.key, cellSize: cellSize)
                // Under this lock, so that no read finds it open after.
                openFiles.remove(oldest.key)
                evicted.append(oldest.key)
            }
            // Reserved now, so concurrent stores count it; readable once
            // renamed into place.
            state.clock += 1
            state.insert(Unit(length: bytes.count, lastUse: state.clock, ready: false, generation: state.clock),
                         at: start, cellSize: cellSize)
            return evicted
        }
        guard let evicted else { return }
        for old in evicted { Self.remove(folder, old) }
        guard Self.writeUnit(bytes, in: folder, unit: start) else {
            forget(start)
            return
        }
        state.withLock { state in state.units[start]?.ready = true }
    }

    /// Where the last unit (stored or being written) that holds any of
    /// `bytes` ends, or nil when none does.
    func lastEnd(overlapping bytes: Range<UInt64>) -> UInt64? {
        guard !bytes.isEmpty else { return nil }
        return state.withLock { state in
            var last: UInt64?
            for cell in bytes.lowerBound / cellSize...(bytes.upperBound - 1) / cellSize {
                for start in state.cells[cell] ?? [] {
                    guard let unit = state.units[start], start < bytes.upperBound else { continue }
                    let end = start + UInt64(unit.length)
                    if end > bytes.lowerBound { last = max(last ?? end, end) }
                }
            }
            return last
        }
    }

    /// Deletes every unit that holds any of `bytes` (they failed
    /// authentication or were torn).
    ///
    /// - Returns: the bytes the deleted units held.
    @discardableResult
    func discard(overlapping bytes: Range<UInt64>) -> [Range<UInt64>] {
        guard !bytes.isEmpty else { return [] }
        let units = state.withLock { state -> [Range<UInt64>] in
            var units: [Range<UInt64>] = []
            for cell in bytes.lowerBound / cellSize...(bytes.upperBound - 1) / cellSize {
                for start in state.cells[cell] ?? [] where !units.contains(where: { $0.lowerBound == start }) {
                    if let unit = state.units[start], start < bytes.upperBound, start + UInt64(unit.length) > bytes.lowerBound {
                        units.append(start..<(start + UInt64(unit.length)))
                    }
                }
            }
            return units
        }
        for unit in units { discard(unit.lowerBound) }
        // A file kept open for a unit the table dropped meanwhile.
        openFiles.remove(overlapping: bytes)
        return units
    }

    /// Deletes the unit that starts at `start`: its file first, so that a
    /// new unit stored at the same offset (possible once the table forgets
    /// this one) is never the file deleted.
    private func discard(_ start: UInt64) {
        Self.remove(folder, start)
        forget(start)
    }

    private func forget(_ start: UInt64) {
        openFiles.remove(start)
        state.withLock { state in _ = state.remove(at: start, cellSize: cellSize) }
    }

    // MARK: - Files

    private static let unitPrefix = Array("unit-".utf8)

    /// Calls `body` with the NUL-terminated name of the unit that starts at
    /// offset `unit`, built on the stack: a read served from the cache
    /// allocates nothing.
    private func withName<R>(of unit: UInt64, _ body: (UnsafePointer<CChar>) -> R) -> R {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.unitPrefix.count + 17) { name in
            var at = 0
            func append(_ byte: UInt8) {
                name[at] = byte
                at += 1
            }
            Self.unitPrefix.forEach(append)
            // Hex digits, most significant first, no leading zeros (as
            // ``name(_:)`` names it).
            var digits = 1
            while digits < 16 && unit >> (4 * UInt64(digits)) != 0 { digits += 1 }
            for i in 0..<digits {
                let nibble = UInt8((unit >> (4 * UInt64(digits - 1 - i))) & 0xF)
                append(nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10)
            }
            append(0)
            guard let base = name.baseAddress else { preconditionFailure("internal error: empty name buffer") }
            return UnsafeRawPointer(base).withMemoryRebound(to: CChar.self, capacity: at) { body($0) }
        }
    }

    static func name(_ unit: UInt64) -> [UInt8] {
        unitPrefix + Array(String(unit, radix: 16).utf8)
    }

    private static func remove(_ directory: FileDescriptor, _ unit: UInt64) {
        _ = name(unit).withCString { unlinkat(directory.rawValue, $0, 0) }
    }

    /// Opens `name` in `directory` with `flags`, never through a symbolic
    /// link, and only a regular file.
    private static func openEntry(_ directory: FileDescriptor, _ name: [UInt8], _ flags: Int32) throws(BundleError) -> FileDescriptor {
        let file = try FileDescriptor.open(name, in: directory, flags: flags | O_NOFOLLOW, mode: 0o600)
        guard try file.status().st_mode & S_IFMT == S_IFREG else { throw .io(errno: EINVAL, operation: "open", path: name) }
        return file
    }

    /// Writes `bytes` under a new temporary name in `directory` (`O_EXCL`:
    /// nothing that is there already is written through), then renames it
    /// to the unit's name.
    private static func writeUnit(_ bytes: UnsafeRawBufferPointer, in directory: FileDescriptor, unit: UInt64) -> Bool {
        let temporary = Array(".tmp-\(String(unit, radix: 16))-\(getpid())-\(pthread_self())".utf8)
        return replace(name(unit), in: directory, through: temporary, with: bytes)
    }

    /// Writes `bytes` to `temporary` in `directory`, created `O_EXCL`, and
    /// renames it to `name`; the temporary file is removed on failure.
    private static func replace(_ name: [UInt8], in directory: FileDescriptor, through temporary: [UInt8],
                                with bytes: UnsafeRawBufferPointer) -> Bool {
        guard let file = try? FileDescriptor.open(temporary, in: directory, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW,
                                                  mode: 0o600, operation: "create") else { return false }
        let written = (try? file.writeAll(bytes)) != nil
        guard written, temporary.withCString({ from in name.withCString { renameat(directory.rawValue, from, directory.rawValue, $0) } }) == 0 else {
            _ = temporary.withCString { unlinkat(directory.rawValue, $0, 0) }
            return false
        }
        return true
    }

    private static func writeVersion(_ version: [UInt8], in folder: FileDescriptor, directory: [UInt8]) throws(RemoteError) {
        let temporary = Array("version.tmp".utf8)
        // A leftover of a daemon that died while writing it.
        _ = temporary.withCString { unlinkat(folder.rawValue, $0, 0) }
        guard version.withUnsafeBytes({ replace(Array("version".utf8), in: folder, through: temporary, with: $0) }) else {
            throw .cache("cannot write its version file", path: directory)
        }
    }

    private static func contents(of name: [UInt8], in directory: FileDescriptor) throws -> [UInt8] {
        let file = try openEntry(directory, name, O_RDONLY)
        var bytes = [UInt8](repeating: 0, count: 4096)
        let n = try bytes.withUnsafeMutableBytes { try file.read(into: $0) }
        return Array(bytes.prefix(n))
    }

    /// Unit files in `directory` with their lengths and modification
    /// times; leftover temporary files, and entries named as units that
    /// are not regular files, are deleted.
    private static func listUnits(_ directory: FileDescriptor) -> [(start: UInt64, length: Int, modified: Int)] {
        // A descriptor of its own: fdopendir takes it, and reads from its offset.
        let fd = openat(directory.rawValue, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        guard let dir = fdopendir(fd) else {
            close(fd)
            return []
        }
        defer { closedir(dir) }
        var found: [(start: UInt64, length: Int, modified: Int)] = []
        while let entry = readdir(dir) {
            let name: [UInt8] = withUnsafeBytes(of: entry.pointee.d_name) { raw in Array(raw.prefix { $0 != 0 }) }
            if name.starts(with: Array(".tmp-".utf8)) {
                _ = name.withCString { unlinkat(directory.rawValue, $0, 0) }
                continue
            }
            guard name.starts(with: unitPrefix),
                  let start = UInt64(String(decoding: name.dropFirst(unitPrefix.count), as: UTF8.self), radix: 16) else { continue }
            var st = stat()
            guard name.withCString({ fstatat(directory.rawValue, $0, &st, AT_SYMLINK_NOFOLLOW) }) == 0 else { continue }
            guard st.st_mode & S_IFMT == S_IFREG else {
                _ = name.withCString { unlinkat(directory.rawValue, $0, st.st_mode & S_IFMT == S_IFDIR ? AT_REMOVEDIR : 0) }
                continue
            }
            found.append((start, Int(st.st_size), Int(st.st_mtim.tv_sec)))
        }
        return found
    }
}
