import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Remote bundles: `encfs-mount URL` and `encfs-inspect … URL` against a
/// real nginx on 127.0.0.1, through the fault proxy (Scripts/fault-proxy.py)
/// where a test counts transfers or injects faults.
///
/// Every read is checked against the source: nothing wrong is ever
/// returned, only the right bytes or EIO. Deadlines are short (2 s) and
/// files small, so the class runs in well under three minutes.
final class RemoteMountTests: MountTestCase {
    // MARK: - Helpers

    /// A source tree of random files of `sizes` (name → bytes) packed into
    /// the server's directory as `bundle.encfs`.
    private func publish(_ server: RemoteServer, _ sizes: [String: Int], chunkSize: String = "8K",
                         name: String = "bundle.encfs") throws -> (source: String, key: String, bundle: String) {
        let source = try scratch.makeDirectory(uniqueName("src"))
        var generator = SeededGenerator(seed: UInt64(sizes.count * 7919 + chunkSize.count))
        for (file, size) in sizes.sorted(by: { $0.key < $1.key }) {
            if let slash = file.lastIndex(of: "/") {
                try FileManager.default.createDirectory(atPath: "\(source)/\(file[..<slash])", withIntermediateDirectories: true)
            }
            try Data(generator.bytes(size)).write(to: URL(fileURLWithPath: "\(source)/\(file)"))
        }
        let key = try makeKeyFile(uniqueName("key"))
        let bundle = "\(server.root)/\(name)"
        try packOrThrow(source, bundle, keyFile: key, ["--chunk-size", chunkSize])
        return (source, key, bundle)
    }

    /// Mounts `url` with a cache in scratch and short deadlines.
    private func mountRemote(_ url: String, key: String, cache: String? = nil, _ options: [String] = []) throws -> MountedBundle {
        let cacheDirectory = try cache ?? scratch.makeDirectory(uniqueName("cache"))
        return try mount(url, keyArguments: ["--key-file", key],
                         options: ["--cache-dir", cacheDirectory, "--net-timeout", "2", "--fetch-size", "256K"] + options)
    }

    /// `count` bytes at `offset` of `path` with one pread (read-ahead off:
    /// one request to the daemon): the SHA-256 of what was read, or the
    /// errno name, and how long it took.
    private func pread(_ path: String, offset: Int, count: Int = 4096) throws -> (result: String, seconds: Double) {
        let start = ContinuousClock.now
        let out = try python("""
            import hashlib, os, sys, errno
            fd = os.open(sys.argv[1], os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            try:
                print(hashlib.sha256(os.pread(fd, int(sys.argv[3]), int(sys.argv[2]))).hexdigest())
            except OSError as e:
                print(errno.errorcode[e.errno])
            """, [path, String(offset), String(count)], timeout: 60)
        return (out.output.trimmingCharacters(in: .whitespacesAndNewlines), seconds(since: start))
    }

    /// The SHA-256 of `count` bytes at `offset` of a local file.
    private func expected(_ path: String, offset: Int, count: Int = 4096) throws -> String {
        try python("""
            import hashlib, sys
            with open(sys.argv[1], 'rb') as f:
                f.seek(int(sys.argv[2])); print(hashlib.sha256(f.read(int(sys.argv[3]))).hexdigest())
            """, [path, String(offset), String(count)]).output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// SHA-256 of every file below `root`, by relative path.
    private func digests(_ root: String) throws -> String {
        try python("""
            import hashlib, os, sys
            root = sys.argv[1]
            for d, _, files in sorted(os.walk(root)):
                for f in sorted(files):
                    p = os.path.join(d, f)
                    print(os.path.relpath(p, root), hashlib.sha256(open(p, 'rb').read()).hexdigest())
            """, [root], timeout: 120).output
    }

    /// SHA-256 of a whole file.
    private func sha256(_ path: String) throws -> String {
        String(try check("sha256sum", [path]).output.prefix(64))
    }

    private func dropKernelCaches() throws {
        try sh("sync; echo 3 > /proc/sys/vm/drop_caches")
    }

    /// Bytes of unit files in a cache directory (every bundle under it).
    private func cachedBytes(_ cache: String) throws -> Int {
        Int(try sh("find \"$1\" -name 'unit-*' -type f -printf '%s\\n' | awk '{s+=$1} END {print s+0}'", [cache])
            .output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    // MARK: - Content

    func testMount_ServesSourceExactly_SeveralChunkSizes() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        for chunkSize in ["4K", "64K", "1M"] {
            let published = try publish(server, ["a.bin": 1_500_000, "empty": 0, "small.txt": 100, "dir/b.bin": 300_000,
                                                 "dir/deeper/c.bin": 70_001], chunkSize: chunkSize, name: "\(chunkSize).encfs")
            try server.resetProxy()
            let mounted = try mountRemote(server.url("\(chunkSize).encfs"), key: published.key)
            let atMount = try server.proxyStats()
            XCTAssertLessThanOrEqual(atMount.requests, 2, "chunk size \(chunkSize): requests before the mount served")
            assertSuccess(try run("/usr/bin/diff", ["-r", published.source, mounted.mountpoint]), "diff -r, chunk size \(chunkSize)")
            XCTAssertEqual(try digests(mounted.mountpoint), try digests(published.source), "chunk size \(chunkSize)")
            var generator = SeededGenerator(seed: 42)
            for _ in 0..<20 {
                let offset = Int(generator.next() % 1_500_000)
                let count = Int(generator.next() % 70_000) + 1
                XCTAssertEqual(try pread(mounted.path("a.bin"), offset: offset, count: count).result,
                               try expected("\(published.source)/a.bin", offset: offset, count: count),
                               "pread \(count) at \(offset), chunk size \(chunkSize)")
            }
            // Warm: everything is cached; the kernel's copy is dropped.
            try dropKernelCaches()
            try server.resetProxy()
            XCTAssertEqual(try digests(mounted.mountpoint), try digests(published.source))
            XCTAssertEqual(try server.proxyStats().bytes, 0, "a warm re-read transferred bytes (chunk size \(chunkSize))")
            unmount(mounted)
        }
    }

    func testInspect_ReadsURL() throws {
        let server = try RemoteServer(test: self, withProxy: false)
        let published = try publish(server, ["x/y.bin": 50_000])
        let url = server.url("bundle.encfs")
        let cache = ["--cache-dir", try scratch.makeDirectory("cache")]
        let listing = try check(try Tools.inspect(), ["ls", url, "x", "--key-file", published.key] + cache)
        XCTAssertEqual(listing.output, "y.bin\n")
        let cat = try run(try Tools.inspect(), ["cat", url, "x/y.bin", "--key-file", published.key] + cache)
        XCTAssertEqual(cat.stdout, [UInt8](try Data(contentsOf: URL(fileURLWithPath: "\(published.source)/x/y.bin"))))
        assertSuccess(try run(try Tools.inspect(), ["verify", url, "--key-file", published.key] + cache))
        XCTAssertTrue(try check(try Tools.inspect(), ["info", url] + cache).output.contains("bundle id:"))
        let rekey = try run(try Tools.inspect(), ["rekey", url, "--key-file", published.key])
        XCTAssertEqual(rekey.status, 2, rekey.summary)
    }

    // MARK: - Transfers and the cache

    func testTransfers_ColdPieceWholeFileAndCacheBound() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        // One large file: the bundle is that file's ciphertext and little else.
        let published = try publish(server, ["large.bin": 12 << 20], chunkSize: "64K")
        let bundleSize = try BundleSurgery.size(of: published.bundle)
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, ["--fetch-size", "1M"])
        try server.resetProxy()
        let offset = (5 << 20) + 12_345
        XCTAssertEqual(try pread(mounted.path("large.bin"), offset: offset).result,
                       try expected("\(published.source)/large.bin", offset: offset))
        let piece = try server.proxyStats()
        XCTAssertGreaterThan(piece.bytes, 0)
        XCTAssertLessThanOrEqual(piece.bytes, 1 << 20, "a cold 4 KiB read transferred more than one fetch unit")
        try server.resetProxy()
        XCTAssertEqual(try sha256(mounted.path("large.bin")), try sha256("\(published.source)/large.bin"))
        let whole = try server.proxyStats()
        XCTAssertLessThanOrEqual(Double(whole.bytes), 1.01 * Double(bundleSize), "whole-file read: \(whole.bytes) of \(bundleSize)")
        unmount(mounted)

        // 12 MiB read through a 4 MiB cache: at most one unit over.
        let cache = try scratch.makeDirectory("small-cache")
        let small = try mountRemote(server.url("bundle.encfs"), key: published.key, cache: cache,
                                    ["--fetch-size", "1M", "--cache-size", "4M"])
        XCTAssertEqual(try sha256(small.path("large.bin")), try sha256("\(published.source)/large.bin"))
        XCTAssertLessThanOrEqual(try cachedBytes(cache), (4 << 20) + (1 << 20))
        XCTAssertGreaterThan(try cachedBytes(cache), 0)
        // Ciphertext only: no 32-byte window of the plaintext is in the cache.
        let leaked = try python("""
            import os, sys
            plain = open(sys.argv[1], 'rb').read()
            cached = b''.join(open(os.path.join(d, f), 'rb').read() for d, _, fs in os.walk(sys.argv[2]) for f in fs)
            print(sum(plain[o:o + 32] in cached for o in range(0, len(plain) - 32, len(plain) // 64)))
            """, ["\(published.source)/large.bin", cache])
        XCTAssertEqual(leaked.output.trimmingCharacters(in: .whitespacesAndNewlines), "0")
        unmount(small)
    }

    func testCache_DamagedUnitIsFetchedAgain_SecondDaemonRefused() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let published = try publish(server, ["f.bin": 1 << 20, "g.bin": 200_000])
        let cache = try scratch.makeDirectory("cache")
        let url = server.url("bundle.encfs")
        var mounted = try mountRemote(url, key: published.key, cache: cache)
        XCTAssertEqual(try digests(mounted.mountpoint), try digests(published.source))
        // A second daemon on the same cache directory is refused.
        let other = try scratch.makeDirectory("mnt-other")
        let second = try run(try Tools.mount(), [url, other, "--key-file", published.key, "--cache-dir", cache])
        XCTAssertEqual(second.status, 1, second.summary)
        XCTAssertTrue(second.errorOutput.contains("in use by another encfs process"), second.errorOutput)
        XCTAssertFalse(MountTable.isMounted(other))
        unmount(mounted)

        // Alter one unit file and cut another short.
        let units = try sh("find \"$1\" -name 'unit-*' -type f | sort", [cache]).output.split(separator: "\n").map(String.init)
        XCTAssertGreaterThanOrEqual(units.count, 2)
        try BundleSurgery.flipByte(at: 1000, in: units[1])
        try BundleSurgery.truncate(units[2 % units.count], to: 100)
        mounted = try mountRemote(url, key: published.key, cache: cache)
        try server.resetProxy()
        XCTAssertEqual(try digests(mounted.mountpoint), try digests(published.source), "a damaged cache file was served")
        let refetched = try server.proxyStats()
        XCTAssertGreaterThan(refetched.bytes, 0, "damaged units must be fetched again")
        XCTAssertLessThanOrEqual(refetched.bytes, 2 * (256 << 10))
        XCTAssertFalse(mounted.logLines().contains { $0.contains("error") }, mounted.logLines().joined(separator: "\n"))
        unmount(mounted)
    }

    func testPrefetch_NoneFetchesOnDemand_AllFillsTheCacheAtMount() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let published = try publish(server, ["a.bin": 400_000, "dir/b.bin": 300_000, "dir/c.txt": 5])
        let bundleSize = try BundleSurgery.size(of: published.bundle)
        try server.resetProxy()
        var mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, ["--prefetch", "none"])
        // The index is still read whole at mount (its tag covers it all),
        // through the cache rather than into memory.
        XCTAssertLessThanOrEqual(try server.proxyStats().requests, 2)
        XCTAssertEqual(try digests(mounted.mountpoint), try digests(published.source))
        unmount(mounted)

        // all: head, index and every unit arrive without a read (together
        // exactly the bundle); then the server may go away.
        try server.resetProxy()
        mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, ["--prefetch", "all"])
        XCTAssertTrue(Deadline.poll(seconds: 30) { (try? server.proxyStats().bytes) == Int(bundleSize) },
                      "prefetched \((try? server.proxyStats().bytes) ?? -1) of \(bundleSize) bytes")
        server.stopNginx()
        try dropKernelCaches()
        XCTAssertEqual(try digests(mounted.mountpoint), try digests(published.source))
        unmount(mounted)
    }

    // MARK: - Faults

    func testFaults_TransientOnesAreRetried() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let names = (0..<9).map { "f\($0).bin" }
        let published = try publish(server, Dictionary(uniqueKeysWithValues: names.map { ($0, 300_000) }))
        // 10 s deadline: a stall is cut after 3 s and retried.
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key,
                                      ["--net-timeout", "10", "--cache-size", "0"])
        let faults: [(String, Int?, [String: String])] = [
            ("status", 2, ["code": "503"]), ("status", 1, ["code": "500"]), ("status", 1, ["code": "429", "retry_after": "1"]),
            ("reset", 1, ["after": "1000"]), ("short", 1, [:]), ("stall", 1, ["after": "1000"]),
            ("pass", nil, ["latency_ms": "30", "bytes_per_second": "4000000"]),
            // Damaged on the way once: the chunk fails authentication, the
            // reader reads it again, fresh.
            ("flip", 1, ["every": "4096"]),
        ]
        for (index, (mode, count, parameters)) in faults.enumerated() {
            try server.setFault(mode, count: count, parameters)
            let file = names[index]
            XCTAssertEqual(try sha256(mounted.path(file)), try sha256("\(published.source)/\(file)"), "\(mode) \(parameters)")
            try server.resetProxy()
        }
        XCTAssertFalse(mounted.logLines().contains { $0.contains("error") }, mounted.logLines().joined(separator: "\n"))
        unmount(mounted)
    }

    func testFaults_PersistentOnesFailWithinTheDeadline_StallKeepsCachedPartsAndUnmount() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let published = try publish(server, ["cached.bin": 100_000, "dir/x.txt": 10, "a.bin": 2 << 20])
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, ["--fetch-size", "64K"])
        XCTAssertEqual(try sha256(mounted.path("cached.bin")), try sha256("\(published.source)/cached.bin"))
        var offset = 1 << 20
        for (mode, parameters, logged) in [("status", ["code": "500"], "status 500"), ("status", ["code": "403"], "presigned URL may have expired"),
                                           ("full200", [:], "does not answer range requests"),
                                           ("flip", ["every": "4096"], "failed authentication"),
                                           ("stall", ["after": "10"], "did not deliver in time")] {
            try server.setFault(mode, parameters)
            let read = try pread(mounted.path("a.bin"), offset: offset)
            XCTAssertEqual(read.result, "EIO", "\(mode) \(parameters)")
            XCTAssertLessThanOrEqual(read.seconds, 2 + 1, "\(mode) \(parameters): the read outlived --net-timeout")
            XCTAssertTrue(mounted.logLines().contains { $0.contains(logged) }, "\(mode): \(mounted.logLines())")
            offset += 128 << 10
        }
        // During a stall: a reader waits on the network, yet listing and
        // cached data are served, and the mount comes down.
        try server.setFault("stall", ["after": "10"])
        let waiting = try SpawnedProcess(Tools.python, ["-c", "import sys; open(sys.argv[1], 'rb').read()", mounted.path("a.bin")])
        usleep(300_000)
        XCTAssertEqual(try check("/bin/ls", ["-R", mounted.mountpoint]).output.contains("x.txt"), true)
        try dropKernelCaches()
        XCTAssertEqual(try sha256(mounted.path("cached.bin")), try sha256("\(published.source)/cached.bin"))
        waiting.signal(SIGKILL)
        XCTAssertNotNil(waiting.wait(deadline: Deadline(seconds: 10)))
        let unmounted = try run(Tools.fusermount, ["-u", mounted.mountpoint], timeout: 10)
        XCTAssertEqual(unmounted.status, 0, unmounted.summary)
        XCTAssertTrue(Deadline.poll(seconds: 5) { !MountTable.isMounted(mounted.mountpoint) })
    }

    func testMount_RefusesWhatIsNotThisBundle() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        let published = try publish(server, ["a": 10])
        let mountpoint = try scratch.makeDirectory("mnt")
        let url = server.url("bundle.encfs")
        for (mode, parameters, message) in [("full200", [:], "does not answer range requests"),
                                            ("status", ["code": "403"], "a presigned URL may have expired"),
                                            ("status", ["code": "416"], "is not the bundle that was expected")] {
            try server.setFault(mode, count: 1, parameters)
            let result = try run(try Tools.mount(), [url, mountpoint, "--key-file", published.key, "--net-timeout", "2"])
            XCTAssertEqual(result.status, 1, result.summary)
            XCTAssertEqual(result.errorLines.first?.hasPrefix("encfs-mount: error: "), true, result.errorOutput)
            XCTAssertTrue(result.errorOutput.contains(message), "\(mode): \(result.errorOutput)")
            XCTAssertFalse(MountTable.isMounted(mountpoint))
        }
        let missing = try run(try Tools.mount(), [server.url("nothing.encfs"), mountpoint, "--key-file", published.key])
        XCTAssertEqual(missing.status, 1, missing.summary)
        XCTAssertTrue(missing.errorOutput.contains("404"), missing.errorOutput)
    }

    func testReplacedBundle_CachedDataServesUncachedFails() throws {
        let server = try RemoteServer(test: self, withProxy: false)
        // Packed in name order; the spacer keeps read-ahead after early.bin
        // from reaching late.bin.
        let published = try publish(server, ["early.bin": 300_000, "gap.bin": 1 << 20, "late.bin": 300_000, "later.bin": 300_000])
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, ["--fetch-size", "64K"])
        XCTAssertEqual(try sha256(mounted.path("early.bin")), try sha256("\(published.source)/early.bin"))
        // Another bundle renamed over it: a new ETag and size.
        let replacement = try scratch.makeDirectory("replacement")
        _ = try scratch.write("replacement/other", Array(repeating: 7, count: 1000))
        let staged = "\(server.root)/staged.encfs"
        try packOrThrow(replacement, staged, keyFile: published.key)
        XCTAssertEqual(rename(staged, published.bundle), 0)
        try dropKernelCaches()
        XCTAssertEqual(try sha256(mounted.path("early.bin")), try sha256("\(published.source)/early.bin"))
        XCTAssertEqual(try pread(mounted.path("late.bin"), offset: 0).result, "EIO")
        XCTAssertEqual(try pread(mounted.path("later.bin"), offset: 100_000).result, "EIO")
        XCTAssertEqual(mounted.logLines().filter { $0.contains("replaced") }.count, 1, mounted.logLines().joined(separator: "\n"))
        unmount(mounted)
    }

    func testServerKilled_UncachedFailsWithinDeadline_CachedServes() throws {
        let server = try RemoteServer(test: self, withProxy: false)
        // Packed in name order; the spacer keeps read-ahead after kept.bin
        // from reaching lost.bin.
        let published = try publish(server, ["kept.bin": 200_000, "spacer.bin": 1 << 20, "z-lost.bin": 200_000])
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, ["--fetch-size", "64K"])
        XCTAssertEqual(try sha256(mounted.path("kept.bin")), try sha256("\(published.source)/kept.bin"))
        server.stopNginx()
        try dropKernelCaches()
        XCTAssertEqual(try sha256(mounted.path("kept.bin")), try sha256("\(published.source)/kept.bin"))
        let lost = try pread(mounted.path("z-lost.bin"), offset: 150_000)
        XCTAssertEqual(lost.result, "EIO")
        XCTAssertLessThanOrEqual(lost.seconds, 2 + 1, "the read outlived --net-timeout + 1 s")
        unmount(mounted)
    }

    // MARK: - HTTPS

    func testHTTPS_TrustsTheCAFileOnly() throws {
        let server = try RemoteServer(test: self, withProxy: false, tls: true)
        let published = try publish(server, ["t.bin": 200_000])
        let certificate = try XCTUnwrap(server.certificate)
        let mounted = try mountRemote(server.url("bundle.encfs"), key: published.key, ["--ca-file", certificate])
        assertSuccess(try run("/usr/bin/diff", ["-r", published.source, mounted.mountpoint]))
        unmount(mounted)
        // Without it the self-signed certificate is refused at once, not
        // retried until the deadline.
        let mountpoint = try scratch.makeDirectory("mnt-untrusted")
        let refused = try run(try Tools.mount(), [server.url("bundle.encfs"), mountpoint, "--key-file", published.key,
                                                  "--net-timeout", "30"], timeout: 20)
        XCTAssertEqual(refused.status, 1, refused.summary)
        XCTAssertTrue(refused.errorOutput.contains("TLS:"), refused.errorOutput)
        XCTAssertFalse(MountTable.isMounted(mountpoint))
    }

    // MARK: - Secrets

    func testSecrets_QueryAndHeaderReachServerOnly() throws {
        let server = try RemoteServer(test: self, withProxy: true)
        // Larger than the first request: reads need more requests.
        let published = try publish(server, ["s.bin": 300_000])
        let signature = "sig-\(randomHex(bytes: 8))"
        let token = "tok-\(randomHex(bytes: 8))"
        try server.setFault("pass", ["require_auth": "Bearer \(token)"])
        let headerFile = try scratch.write("headers", Array("# private bucket\nAuthorization: Bearer \(token)\n".utf8), mode: 0o600)
        let url = server.url("bundle.encfs", query: "?X-Amz-Signature=\(signature)&X-Amz-Expires=60")
        let mounted = try mountRemote(url, key: published.key, ["--header-file", headerFile])
        XCTAssertEqual(try sha256(mounted.path("s.bin")), try sha256("\(published.source)/s.bin"))
        XCTAssertGreaterThanOrEqual(try server.proxyStats().authSeen, 2, "the Authorization header did not reach the server")
        var exposed: [(String, String)] = []
        func scan(_ what: String, _ text: String) {
            for secret in [signature, token] where text.contains(secret) { exposed.append((what, secret)) }
        }
        let daemon = try XCTUnwrap(mounted.daemonPID)
        scan("daemon argv", (ProcessTable.arguments(of: daemon) ?? []).map { String(decoding: $0, as: UTF8.self) }.joined(separator: " "))
        scan("daemon environment", (try? String(contentsOfFile: "/proc/\(daemon)/environ", encoding: .utf8)) ?? "")
        scan("/proc/mounts", (try? String(contentsOfFile: "/proc/mounts", encoding: .utf8)) ?? "")
        scan("mount log", mounted.logLines().joined(separator: "\n"))
        // Failures name the address without its query.
        let wrongPath = url.replacingOccurrences(of: "bundle.encfs", with: "gone.encfs")
        let failedMount = try run(try Tools.mount(), [wrongPath, try scratch.makeDirectory("mnt2"), "--key-file", published.key,
                                                      "--header-file", headerFile])
        XCTAssertEqual(failedMount.status, 1)
        XCTAssertTrue(failedMount.errorOutput.contains("gone.encfs?…"), failedMount.errorOutput)
        scan("mount error", failedMount.errorOutput + failedMount.output)
        let unauthorized = try run(try Tools.inspect(), ["info", url, "--net-timeout", "2"])
        XCTAssertEqual(unauthorized.status, 1)
        scan("inspect error", unauthorized.errorOutput + unauthorized.output)
        try server.setFault("status", ["code": "403"])
        // Cached data is still served after the server starts refusing.
        XCTAssertEqual(try pread(mounted.path("s.bin"), offset: 0).result, try expected("\(published.source)/s.bin", offset: 0))
        scan("mount log after 403", mounted.logLines().joined(separator: "\n"))
        XCTAssertTrue(exposed.isEmpty, "secrets exposed: \(exposed)")
        unmount(mounted)
    }
}
