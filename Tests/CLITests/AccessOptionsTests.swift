@testable import EncFSCLI
@testable import EncFSMountCLI
@testable import EncFSMount
import Foundation
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
import EncFSService
#endif

/// The access-policy options parse into ``AccessRules``, reach the daemon
/// unchanged, imply `allow_other` exactly when other users are let in, and
/// the rules match cgroups by whole path components.
final class AccessOptionsTests: XCTestCase {
    private func configuration(_ arguments: [String]) throws -> MountConfiguration {
        try MountCommand.configuration(from: MountCommand.parser.parse((["/b", "/m"] + arguments).map { Array($0.utf8) }))
    }

    func testDaemonArguments_RoundTripTheRules() throws {
        var configuration = MountConfiguration(bundlePath: Array("/b".utf8), mountpoint: Array("/m".utf8),
                                               indexCacheKB: 4096, threads: 4)
        configuration.readaheadKB = getuid() == 0 ? MountCommand.defaultReadahead : nil
        configuration.access.uids = [33, getuid()]
        configuration.access.gids = [0, 4242]
        configuration.access.executables = [Array("/usr/sbin/nginx".utf8), Array("/opt/a b/\u{1b}x".utf8)]
        configuration.access.cgroups = [Array("/system.slice/nginx.service".utf8), Array("/".utf8)]
        configuration.access.enforcesReads = true
        configuration.fuseOptions = ["allow_other"]
        let argv = [Array(MountDaemon.flag.utf8)] + MountDaemonCommandLine.arguments(for: configuration)
        XCTAssertEqual(try MountDaemonCommandLine.settings(from: argv).configuration, configuration)
    }

    func testRepeatedAndListedValues_Accumulate() throws {
        let access = try configuration(["--allow-uid", "33,34", "--allow-uid=35", "--allow-cgroup", "/a/b//",
                                        "--allow-exe", "/x,/y"]).access
        XCTAssertEqual(access.uids, [33, 34, 35])
        XCTAssertEqual(access.cgroups, [Array("/a/b".utf8)])
        XCTAssertEqual(access.executables, [Array("/x".utf8), Array("/y".utf8)])
        XCTAssertFalse(access.enforcesReads)
    }

    func testAllowOther_ImpliedOnlyForOtherUsers() throws {
        let me = getuid()
        XCTAssertFalse(try configuration(["--allow-uid", "\(me)"]).fuseOptions.contains("allow_other"))
        XCTAssertFalse(try configuration(["--allow-exe", "/bin/cat"]).fuseOptions.contains("allow_other"))
        XCTAssertEqual(try configuration(["--allow-uid", "\(me),\(me &+ 1)"]).fuseOptions, ["allow_other"])
        // A group lets in its members, whoever they are, unless a uid rule
        // narrows it to the mounting user.
        XCTAssertEqual(try configuration(["--allow-gid", "\(getgid() &+ 1)"]).fuseOptions, ["allow_other"])
        XCTAssertFalse(try configuration(["--allow-gid", "\(getgid() &+ 1)", "--allow-uid", "\(me)"]).fuseOptions.contains("allow_other"))
        // Asked for already: not added twice.
        XCTAssertEqual(try configuration(["-o", "allow_other", "--allow-uid", "\(me &+ 1)"]).fuseOptions, ["allow_other"])
    }

    /// A program others may write, or reach through a directory others
    /// may write without a sticky bit, is named; one under a sticky
    /// directory (/tmp) and owned by the mounting user is not.
    func testReplaceablePart_NamesWhatOthersMayWrite() throws {
        let base = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("encfs-replaceable-\(getpid())").path
        try FileManager.default.createDirectory(atPath: "\(base)/inner", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        let program = "\(base)/inner/program"
        XCTAssertTrue(FileManager.default.createFile(atPath: program, contents: Data([0x23, 0x21])))
        func culprit() -> String? {
            AccessOptions.replaceablePart(of: Array(program.utf8), trusting: getuid()).map { String(decoding: $0, as: UTF8.self) }
        }
        for path in [base, "\(base)/inner"] { XCTAssertEqual(chmod(path, 0o755), 0) }
        XCTAssertEqual(chmod(program, 0o755), 0)
        var tmp = stat()
        XCTAssertEqual(stat(NSTemporaryDirectory(), &tmp), 0)
        if tmp.st_mode & S_ISVTX != 0 || tmp.st_mode & S_IWOTH == 0 { XCTAssertNil(culprit()) }
        XCTAssertEqual(chmod(program, 0o757), 0)
        XCTAssertEqual(culprit(), program)
        XCTAssertEqual(chmod(program, 0o755), 0)
        XCTAssertEqual(chmod("\(base)/inner", 0o777), 0)
        XCTAssertEqual(culprit(), "\(base)/inner")
        XCTAssertEqual(chmod("\(base)/inner", 0o1777), 0)
        if tmp.st_mode & S_ISVTX != 0 || tmp.st_mode & S_IWOTH == 0 { XCTAssertNil(culprit(), "sticky, entry owned by the mounting user") }
        XCTAssertEqual(chmod("\(base)/inner", 0o755), 0)
    }

    func testCgroupMatching_ByWholeComponents() {
        func within(_ path: String, _ allowed: String) -> Bool {
            Array(path.utf8).withUnsafeBytes { AccessRules.cgroup($0, isWithin: Array(allowed.utf8)) }
        }
        XCTAssertTrue(within("/system.slice/nginx.service", "/system.slice/nginx.service"))
        XCTAssertTrue(within("/system.slice/nginx.service/worker", "/system.slice/nginx.service"))
        XCTAssertFalse(within("/system.slice/nginx.service2", "/system.slice/nginx.service"))
        XCTAssertFalse(within("/system.slice", "/system.slice/nginx.service"))
        XCTAssertTrue(within("/anything", "/"))
        XCTAssertTrue(within("/", "/"))
    }

    func testExecutableRuleForOtherUsers_WarnsOnlyWithoutRoot() {
        var rules = AccessRules()
        rules.executables = [Array("/usr/sbin/nginx".utf8)]
        rules.uids = [33]
        XCTAssertNotNil(AccessOptions.warning(for: rules, mountingUID: 1000, mountingGID: 1000))
        XCTAssertNil(AccessOptions.warning(for: rules, mountingUID: 0, mountingGID: 0))
        rules.uids = [1000]
        XCTAssertNil(AccessOptions.warning(for: rules, mountingUID: 1000, mountingGID: 1000), "own programs are readable")
        rules.executables = []
        rules.uids = [33]
        XCTAssertNil(AccessOptions.warning(for: rules, mountingUID: 1000, mountingGID: 1000), "no executable rule")
    }

    func testUnifiedHierarchy_FoundOnPureAndHybridSystemsOnly() {
        func has(_ text: String) -> Bool { AccessOptions.hasUnifiedHierarchy(cgroupFile: Array(text.utf8)[...]) }
        XCTAssertTrue(has("0::/system.slice/nginx.service\n"))
        XCTAssertTrue(has("9:name=systemd:/\n4:memory:/x\n0::/\n"))
        XCTAssertFalse(has("9:name=systemd:/\n4:memory:/x\n1:cpu:/\n"))
        XCTAssertFalse(has(""))
    }

    /// The caller resolution reads this very process: its executable as
    /// /proc shows it, from the main thread and from a second thread.
    func testCallerProcess_IdentifiesThisProcessFromAnyThread() throws {
        let expected = try XCTUnwrap(realpath("/proc/self/exe", nil).map { path in
            defer { free(path) }
            return Array(UnsafeRawBufferPointer(start: path, count: strlen(path)))
        })
        XCTAssertEqual(Self.identifyCallingThread(), expected)
        final class Result: @unchecked Sendable {
            // Written by the thread before it signals, read after the wait.
            var executable: [UInt8]?
            var threadID: pid_t = 0
        }
        let result = Result()
        let done = DispatchSemaphore(value: 0)
        Thread {
            result.threadID = Self.callingThreadID()
            result.executable = Self.identifyCallingThread()
            done.signal()
        }.start()
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertNotEqual(result.threadID, getpid())
        XCTAssertEqual(result.executable, expected)
        XCTAssertNil(CallerProcess.withIdentity(ofThread: 0, readingExecutable: true, readingCgroup: false) { _, _ in true })
    }

    /// The calling thread's id, from /proc/thread-self ("PID/task/TID"):
    /// Glibc's `gettid` is not imported without _GNU_SOURCE.
    private static func callingThreadID() -> pid_t {
        var link = [CChar](repeating: 0, count: 64)
        let n = readlink("/proc/thread-self", &link, link.count - 1)
        guard n > 0 else { return 0 }
        let text = String(decoding: link[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return text.split(separator: "/").last.flatMap { pid_t($0) } ?? 0
    }

    /// The executable of the calling thread's process, when its cgroup v2
    /// path was found too.
    private static func identifyCallingThread() -> [UInt8]? {
        CallerProcess.withIdentity(ofThread: callingThreadID(), readingExecutable: true, readingCgroup: true) { exe, cgroup in
            cgroup.first == UInt8(ascii: "/") ? Array(exe.path) : nil
        } ?? nil
    }
}
