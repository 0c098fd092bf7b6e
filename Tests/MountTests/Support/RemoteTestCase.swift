import Foundation
import XCTest
import SharedTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// What the remote-bundle test classes share: a bundle published on a
/// ``RemoteServer``, a mount of its address with short deadlines, and
/// reads checked against the source.
class RemoteTestCase: ToolTestCase {
    /// A source tree of random files of `sizes` (name → bytes) packed into
    /// the server's directory as `bundle.encfs`.
    func publish(_ server: RemoteServer, _ sizes: [String: Int], chunkSize: String = "8K",
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
    func mountRemote(_ url: String, key: String, cache: String? = nil, _ options: [String] = []) throws -> MountedBundle {
        let cacheDirectory = try cache ?? scratch.makeDirectory(uniqueName("cache"))
        return try mount(url, keyArguments: ["--key-file", key],
                         options: ["--cache-dir", cacheDirectory, "--net-timeout", "2", "--fetch-size", "256K"] + options)
    }

    /// `count` bytes at `offset` of `path` with one pread (read-ahead off:
    /// one request to the daemon): the SHA-256 of what was read, or the
    /// errno name, and how long it took.
    func pread(_ path: String, offset: Int, count: Int = 4096) throws -> (result: String, seconds: Double) {
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
    func expected(_ path: String, offset: Int, count: Int = 4096) throws -> String {
        try python("""
            import hashlib, sys
            with open(sys.argv[1], 'rb') as f:
                f.seek(int(sys.argv[2])); print(hashlib.sha256(f.read(int(sys.argv[3]))).hexdigest())
            """, [path, String(offset), String(count)]).output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// SHA-256 of every file below `root`, by relative path.
    func digests(_ root: String) throws -> String {
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
    func sha256(_ path: String) throws -> String {
        String(try check("sha256sum", [path]).output.prefix(64))
    }

    func dropKernelCaches() throws {
        try sh("sync; echo 3 > /proc/sys/vm/drop_caches")
    }

    /// Bytes of unit files in a cache directory (every bundle under it).
    func cachedBytes(_ cache: String) throws -> Int {
        Int(try sh("find \"$1\" -name 'unit-*' -type f -printf '%s\\n' | awk '{s+=$1} END {print s+0}'", [cache])
            .output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    /// The unit files of a cache directory: where each unit starts in the
    /// bundle (its name) and its length, by start.
    func unitFiles(_ cache: String) throws -> [(start: UInt64, size: UInt64, path: String)] {
        try sh("find \"$1\" -name 'unit-*' -type f -printf '%f %s %p\\n'", [cache]).output.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", maxSplits: 2)
            guard fields.count == 3, fields[0].hasPrefix("unit-"), let start = UInt64(fields[0].dropFirst(5), radix: 16),
                  let size = UInt64(fields[1]) else { return nil }
            return (start, size, String(fields[2]))
        }.sorted { $0.start < $1.start }
    }
}
