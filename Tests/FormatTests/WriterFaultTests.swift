import CryptCore
@testable import EncFSCore
import SharedTestSupport
import XCTest

/// The writer packs a consistent snapshot or nothing: a source that changes
/// under it fails with `sourceChanged`, and a failed pack leaves nothing at
/// the destination and an existing bundle byte-identical.
///
/// Hooks: the packer walks the whole tree first, then encrypts file by file.
/// A Unix socket in a subdirectory is skipped with a warning *during the
/// walk*, after every entry of the directories before it has been recorded,
/// so the warning callback can change the tree between walk and read. For
/// changes after a file was opened, `ReadTrigger` fires on its first read.
final class WriterFaultTests: XCTestCase {
    private var tmp: TemporaryDirectory!
    private var source: [UInt8] = []
    private var out: [UInt8] = []
    private var victim: [UInt8] = []
    private let key = TestSecrets.key(11)
    private let victimContents = [UInt8](repeating: 0x5A, count: 10_000)

    override func setUpWithError() throws {
        tmp = try TemporaryDirectory(prefix: "encfs-format-tests", under: "/tmp")
        source = tmp.appending("source")
        out = tmp.appending("out")
        try FileTree.makeDirectory(source)
        try FileTree.makeDirectory(out)
        victim = join(source, bytes("victim.bin"))
        try FileTree.writeFile(victim, victimContents)
        try FileTree.writeFile(join(source, bytes("other.txt")), bytes("other\n"))
        // Walked after the root directory: breadth-first.
        try FileTree.makeDirectory(join(source, bytes("zz-hook")))
        try FileTree.makeSocket(join(source, bytes("zz-hook/hook.sock")))
    }

    override func tearDown() { tmp = nil }

    private func options(chunkSizeLog2: UInt8 = 12) -> PackOptions {
        var options = PackOptions()
        options.chunkSizeLog2 = chunkSizeLog2
        options.keys = [.rawKey(key)]
        return options
    }

    /// Packs with `change` run in the middle of the walk (from the socket's
    /// warning), after the victim was recorded.
    @discardableResult
    private func pack(to destination: [UInt8], changingTheTreeWith change: () throws -> Void) throws -> PackSummary {
        var hooked = 0
        defer { XCTAssertEqual(hooked, 1, "the walk hook ran \(hooked) times") }
        return try BundleWriter.pack(source: source, destination: destination, options: options()) { _, path in
            guard path == join(source, bytes("zz-hook/hook.sock")) else { return XCTFail("warning about \(path.debugPath)") }
            hooked += 1
            do { try change() } catch { XCTFail("changing the tree failed: \(error)") }
        }
    }

    /// An existing bundle at `path`, and the listing of its directory.
    private func existingBundle(at path: [UInt8]) throws -> (bytes: [UInt8], listing: [[UInt8]]) {
        let sourceOfOld = tmp.appending("old-source")
        try FileTree.makeDirectory(sourceOfOld)
        try FileTree.writeFile(join(sourceOfOld, bytes("old.txt")), bytes("the previous bundle\n"))
        try packBundle(source: sourceOfOld, destination: path, keys: [.rawKey(key)])
        let directory = Array(path[..<path.lastIndex(of: UInt8(ascii: "/"))!])
        return (try FileTree.readFile(path), try FileTree.list(directory))
    }

    private func assertUnchanged(_ path: [UInt8], _ before: (bytes: [UInt8], listing: [[UInt8]]),
                                 file: StaticString = #filePath, line: UInt = #line) throws {
        let directory = Array(path[..<path.lastIndex(of: UInt8(ascii: "/"))!])
        XCTAssertEqual(try FileTree.readFile(path), before.bytes, "existing bundle changed", file: file, line: line)
        XCTAssertEqual(try FileTree.list(directory).map(\.debugPath), before.listing.map(\.debugPath),
                       "files left behind", file: file, line: line)
    }

    // MARK: - The hook itself

    func testPack_SpecialFile_IsSkippedWithOneWarning() throws {
        let destination = join(out, bytes("b.bundle"))
        let summary = try pack(to: destination) {}
        XCTAssertEqual(summary.skipped, 1)
        XCTAssertEqual(summary.files, 2)
        let reader = try BundleReader.open(path: destination, materials: [.rawKey(key)])
        XCTAssertThrowsBundleError(.notFound) { try reader.entry(bytes("zz-hook/hook.sock")) }
        XCTAssertEqual(try reader.contents(of: bytes("victim.bin")), victimContents)
    }

    // MARK: - Source changes

    func testPack_FileRemovedBetweenWalkAndRead_FailsSourceChanged() throws {
        let destination = join(out, bytes("b.bundle"))
        XCTAssertThrowsBundleError(.sourceChanged(path: victim)) {
            try pack(to: destination) { _ = victim.withCPath { unlink($0) } }
        }
        XCTAssertEqual(try FileTree.list(out), [], "nothing may be left at the destination")
    }

    func testPack_FileReplacedByDirectory_FailsSourceChanged() throws {
        XCTAssertThrowsBundleError(.sourceChanged(path: victim)) {
            try pack(to: join(out, bytes("b.bundle"))) {
                _ = victim.withCPath { unlink($0) }
                try FileTree.makeDirectory(victim)
            }
        }
        XCTAssertEqual(try FileTree.list(out), [])
    }

    /// Regression: a file replaced by a symlink was reported as a bare
    /// `open` failure (ELOOP from O_NOFOLLOW) instead of a source change.
    func testPack_FileReplacedBySymlink_FailsSourceChanged() throws {
        XCTAssertThrowsBundleError(.sourceChanged(path: victim)) {
            try pack(to: join(out, bytes("b.bundle"))) {
                _ = victim.withCPath { unlink($0) }
                try FileTree.makeSymlink(victim, target: join(source, bytes("other.txt")))
            }
        }
        XCTAssertEqual(try FileTree.list(out), [])
    }

    /// Regression: files are reopened by their path from the source root, and
    /// `openat` follows a directory on that path that was swapped for a
    /// symlink after the walk; the packer then read a file from outside the
    /// source tree into the bundle. The file must be the inode the walk saw.
    func testPack_DirectorySwappedForSymlinkBeforeRead_FailsSourceChanged() throws {
        let outside = tmp.appending("outside")
        try FileTree.makeDirectory(outside)
        try FileTree.writeFile(join(outside, bytes("f")), bytes("not part of the source\n"))
        try FileTree.makeDirectory(join(source, bytes("sub")))
        try FileTree.writeFile(join(source, bytes("sub/f")), bytes("inside\n"))
        XCTAssertThrowsBundleError(.sourceChanged(path: join(source, bytes("sub/f")))) {
            try pack(to: join(out, bytes("b.bundle"))) {
                try swapForSymlink(join(source, bytes("sub")), to: outside)
            }
        }
        XCTAssertEqual(try FileTree.list(out), [])
    }

    /// The same for a directory the walk has yet to list.
    func testPack_DirectorySwappedForSymlinkBeforeListing_FailsSourceChanged() throws {
        let outside = tmp.appending("outside")
        try FileTree.makeDirectory(outside)
        try FileTree.makeDirectory(join(outside, bytes("b")))
        try FileTree.writeFile(join(outside, bytes("b/f")), bytes("not part of the source\n"))
        try FileTree.makeDirectory(join(source, bytes("a")))
        try FileTree.makeDirectory(join(source, bytes("a/b")))
        try FileTree.writeFile(join(source, bytes("a/b/f")), bytes("inside\n"))
        XCTAssertThrowsBundleError(.sourceChanged(path: join(source, bytes("a/b")))) {
            try pack(to: join(out, bytes("b.bundle"))) {
                try swapForSymlink(join(source, bytes("a")), to: outside)
            }
        }
        XCTAssertEqual(try FileTree.list(out), [])
    }

    /// A file renamed over the walked one (as editors save) is another file.
    func testPack_FileReplacedByRename_FailsSourceChanged() throws {
        XCTAssertThrowsBundleError(.sourceChanged(path: victim)) {
            try pack(to: join(out, bytes("b.bundle"))) {
                let replacement = join(source, bytes("replacement"))
                try FileTree.writeFile(replacement, bytes("new\n"))
                guard replacement.withCPath({ r in victim.withCPath { rename(r, $0) } }) == 0 else { throw POSIXFailure("rename", victim) }
            }
        }
    }

    private func swapForSymlink(_ directory: [UInt8], to target: [UInt8]) throws {
        let aside = directory + bytes(".aside")
        guard directory.withCPath({ d in aside.withCPath { rename(d, $0) } }) == 0 else { throw POSIXFailure("rename", directory) }
        try FileTree.makeSymlink(directory, target: target)
    }

    /// The snapshot of a file is taken when it is opened for encryption, not
    /// during the walk (`FileEncryptor`): a file that shrank in between is
    /// packed as it is at open, with its size at open. (Pinned so that a
    /// change of this rule is a deliberate one.)
    func testPack_FileShrunkBetweenWalkAndOpen_PacksTheFileAsOpened() throws {
        let destination = join(out, bytes("b.bundle"))
        try pack(to: destination) { try FileTree.writeFile(victim, Array(victimContents[0..<10])) }
        let reader = try BundleReader.open(path: destination, materials: [.rawKey(key)])
        XCTAssertEqual(try reader.contents(of: bytes("victim.bin")), Array(victimContents[0..<10]))
    }

    func testPack_FileShrunkWhileRead_FailsSourceChanged() throws {
        try assertChangeWhileReadFails { path in _ = path.withCPath { truncate($0, 100) } }
    }

    func testPack_FileGrewWhileRead_FailsSourceChanged() throws {
        try assertChangeWhileReadFails { path in
            let fd = path.withCPath { open($0, O_WRONLY | O_APPEND | O_CLOEXEC) }
            if fd >= 0 {
                _ = write(fd, "x", 1)
                close(fd)
            }
        }
    }

    /// A compressed pack fails the same way while chunks of the file are
    /// with the pipeline's workers or still waiting to be handed to them.
    func testPack_CompressedFileGrewWhileRead_FailsSourceChanged() throws {
        var compressed = options(chunkSizeLog2: 15)
        compressed.compression = .zstd
        try assertChangeWhileReadFails(options: compressed) { path in
            let fd = path.withCPath { open($0, O_WRONLY | O_APPEND | O_CLOEXEC) }
            if fd >= 0 {
                _ = write(fd, "x", 1)
                close(fd)
            }
        }
    }

    private func assertChangeWhileReadFails(options packOptions: PackOptions? = nil, _ change: @escaping @Sendable ([UInt8]) -> Void,
                                            file: StaticString = #filePath, line: UInt = #line) throws {
        let big = join(source, bytes("big.bin"))
        try FileTree.writeFile(big, [UInt8](repeating: 0xC3, count: 16 << 20))
        let trigger = try ReadTrigger(path: big) { change(big) }
        let destination = join(out, bytes("b.bundle"))
        XCTAssertThrowsBundleError(.sourceChanged(path: big), file: file, line: line) {
            try BundleWriter.pack(source: source, destination: destination, options: packOptions ?? options()) { _, _ in }
        }
        XCTAssertTrue(trigger.wait(), "the file was never read", file: file, line: line)
        XCTAssertEqual(try FileTree.list(out), [], "nothing may be left at the destination", file: file, line: line)
    }

    // MARK: - Destination

    /// The bundle is written to an unnamed file: a failure after it was
    /// created and partly written leaves the old bundle and no stray file.
    func testPack_FailsAfterOutputCreated_KeepsExistingDestination() throws {
        let destination = join(out, bytes("b.bundle"))
        let before = try existingBundle(at: destination)
        XCTAssertThrowsBundleError(.sourceChanged(path: victim)) {
            try pack(to: destination) { _ = victim.withCPath { unlink($0) } }
        }
        try assertUnchanged(destination, before)
    }

    func testPack_SourceMissing_FailsAndKeepsDestination() throws {
        let destination = join(out, bytes("b.bundle"))
        let before = try existingBundle(at: destination)
        XCTAssertThrowsBundleError(.sourceUnreadable(errno: ENOENT)) {
            try BundleWriter.pack(source: tmp.appending("no-such-source"), destination: destination, options: options()) { _, _ in }
        }
        try assertUnchanged(destination, before)
    }

    func testPack_SourceIsAFile_FailsAndKeepsDestination() throws {
        let destination = join(out, bytes("b.bundle"))
        let before = try existingBundle(at: destination)
        XCTAssertThrowsBundleError(.sourceUnreadable(errno: ENOTDIR)) {
            try BundleWriter.pack(source: victim, destination: destination, options: options()) { _, _ in }
        }
        try assertUnchanged(destination, before)
    }

    /// Settings the writer refuses say what they are, and nothing is
    /// written: not a cryptographic failure for a missing key, not a limit
    /// exceeded (EFBIG) for a zstd level or chunk size out of range.
    func testPack_BadSettings_RefusedByName() throws {
        let destination = join(out, bytes("b.bundle"))
        var noKey = options()
        noKey.keys = []
        var level = options()
        level.compression = .zstd
        level.compressionLevel = 25
        let cases: [(PackOptions, ExpectedBundleError)] = [
            (noKey, .noKeyGiven), (level, .invalidCompressionLevel(25)), (options(chunkSizeLog2: 40), .invalidChunkSize(log2: 40)),
        ]
        for (options, expected) in cases {
            let error = XCTAssertThrowsBundleError(expected) {
                try BundleWriter.pack(source: source, destination: destination, options: options) { _, _ in }
            }
            XCTAssertEqual(error?.errno, EINVAL, "\(expected)")
        }
        XCTAssertEqual(try FileTree.list(out), [])
    }

    func testPack_DestinationDirectoryMissing_FailsIO() throws {
        XCTAssertThrowsBundleError(.io(errno: ENOENT)) {
            try BundleWriter.pack(source: source, destination: join(out, bytes("missing/b.bundle")), options: options()) { _, _ in }
        }
        XCTAssertEqual(try FileTree.list(out), [])
    }

    /// A read-only destination directory refuses the output file; the
    /// existing bundle in it stays. Root ignores permission bits, so when
    /// the tests run as root this thread drops them for the pack with
    /// `setfsuid(65534)`: file-system checks then run as `nobody` without
    /// CAP_DAC_OVERRIDE. glibc's `setfsuid` changes the calling thread only,
    /// and Swift does not import <sys/fsuid.h>, hence `dlsym`.
    func testPack_DestinationDirectoryNotWritable_KeepsDestination() throws {
        let destination = join(out, bytes("b.bundle"))
        let before = try existingBundle(at: destination)
        try FileTree.setMode(out, 0o555)
        try FileTree.setMode(tmp.path, 0o755) // let nobody reach the source
        XCTAssertThrowsBundleError(.io(errno: EACCES)) {
            try withFileSystemUser(65534) {
                try BundleWriter.pack(source: source, destination: destination, options: options()) { _, _ in }
            }
        }
        try assertUnchanged(destination, before)
    }

    private func withFileSystemUser<R>(_ uid: uid_t, _ body: () throws -> R) throws -> R {
        guard geteuid() == 0 else { return try body() }
        typealias SetFSUID = @convention(c) (uid_t) -> Int32
        let symbol = try XCTUnwrap(dlsym(UnsafeMutableRawPointer(bitPattern: 0), "setfsuid"), "setfsuid not found") // RTLD_DEFAULT
        let setfsuid = unsafeBitCast(symbol, to: SetFSUID.self)
        _ = setfsuid(uid)
        defer { _ = setfsuid(0) }
        return try body()
    }

    /// A successful pack replaces an existing bundle and leaves nothing else.
    func testPack_Success_ReplacesExistingDestination() throws {
        let destination = join(out, bytes("b.bundle"))
        let before = try existingBundle(at: destination)
        try pack(to: destination) {}
        XCTAssertNotEqual(try FileTree.readFile(destination), before.bytes)
        XCTAssertEqual(try FileTree.list(out), [bytes("b.bundle")])
        let reader = try BundleReader.open(path: destination, materials: [.rawKey(key)])
        XCTAssertEqual(try reader.contents(of: bytes("victim.bin")), victimContents)
    }
}
