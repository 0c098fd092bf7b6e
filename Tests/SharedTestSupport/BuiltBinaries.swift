import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Whether the `encfs-*` binaries the tests run are there and built from
/// the sources as they are, so that a plain `swift test` says in one line
/// what to run first instead of failing dozens of tests one by one.
///
/// Used through ``Tools`` by every target that runs the binaries, and by
/// FormatTests' FuzzReplayTests; all test targets run in one process, so only the
/// first test to find a problem records it as a failure (``firstReport()``)
/// and every test that needs the binaries skips.
public enum BuiltBinaries {
    /// What to run, ending every message.
    public static let remedy = "run `swift build -c release` first (or Scripts/test.sh)"

    /// The `encfs-*` executables the build makes that are not shipped
    /// tools (no man page, not in the .deb: Scripts/package-deb.sh keeps
    /// the same list): the fuzzer, the embedding example, the SigV4
    /// benchmark.
    public static let testTooling: Set<String> = ["encfs-fuzz", "encfs-embed-example", "encfs-sigv4-bench"]

    /// The shipped `encfs-*` tools in `directory`, sorted.
    public static func shippedTools(in directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).filter {
            $0.hasPrefix("encfs-") && !$0.contains(".") && !testTooling.contains($0) && access("\(directory)/\($0)", X_OK) == 0
        }.sorted()
    }

    /// One line naming what is wrong with `name` in `directory`, or nil
    /// when it is there, executable and (for a directory of this package's
    /// `.build`) not older than the sources last edited.
    ///
    /// - Parameters:
    ///   - name: the executable (`encfs-mount`).
    ///   - directory: where it should be; nil when none was found.
    public static func problem(with name: String, in directory: String?) -> String? {
        guard let directory else { return "\(name) not found (no .build/release, ENCFS_BIN_DIR unset): \(remedy)" }
        let path = "\(directory)/\(name)"
        guard access(path, X_OK) == 0 else { return "\(path) is not an executable: \(remedy)" }
        return staleness.withLock { known in
            if let verdict = known[directory] { return verdict }
            let verdict = stale(directory)
            known[directory] = verdict
            return verdict
        }
    }

    /// The line for a build directory of this package older than the
    /// source file edited last, else nil (also for a directory elsewhere:
    /// installed binaries are taken as they are).
    private static func stale(_ directory: String) -> String? {
        guard directory.hasPrefix(repositoryRoot + "/.build/"), let source = newestSource,
              let built = newestOutput(ofModule: source.module, in: directory), built < source.modified
        else { return nil }
        return "\(directory) was built before \(source.path) changed: \(remedy)"
    }

    /// ``stale(_:)`` by directory, worked out once per process.
    private static let staleness = Locked<[String: String?]>([:])

    /// True for the first caller in this process, false afterwards: the
    /// first test that finds a problem records it with `XCTFail` (recorded,
    /// so a caller's `try?` cannot hide it), and all of them skip.
    public static func firstReport() -> Bool {
        reported.withLock { done in
            defer { done = true }
            return !done
        }
    }

    private static let reported = Locked(false)

    /// This package's root (from this file's path:
    /// <root>/Tests/SharedTestSupport/BuiltBinaries.swift).
    public static let repositoryRoot: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path

    /// The source file under Sources/ modified last, with its target
    /// (the folder under Sources/).
    private static let newestSource: (path: String, module: String, modified: Double)? = {
        let sources = repositoryRoot + "/Sources"
        guard let walk = FileManager.default.enumerator(atPath: sources) else { return nil }
        var newest: (path: String, module: String, modified: Double)?
        while let relative = walk.nextObject() as? String {
            guard relative.hasSuffix(".swift") || relative.hasSuffix(".c") || relative.hasSuffix(".h"),
                  let modified = modificationTime("\(sources)/\(relative)"),
                  modified > newest?.modified ?? 0,
                  let module = relative.split(separator: "/").first else { continue }
            newest = ("Sources/\(relative)", String(module), modified)
        }
        return newest
    }()

    /// When the build last wrote the compiled target `module` in
    /// `directory` (its `<module>.build` folder, `-` spelled `_`); nil when
    /// it has none (a header-only C target), which passes.
    private static func newestOutput(ofModule module: String, in directory: String) -> Double? {
        let folder = "\(directory)/\(module.replacingOccurrences(of: "-", with: "_")).build"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return nil }
        return names.compactMap { modificationTime("\(folder)/\($0)") }.max()
    }

    private static func modificationTime(_ path: String) -> Double? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9
    }
}

/// A value behind a lock (tests run one at a time, but XCTest does not
/// promise which thread).
private final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}
