import EncFSCore
import EncFSCLI
#if canImport(Glibc)
import Glibc
#endif

/// `encfs-fuzz TARGET FILE_OR_DIR... [-v]` and `encfs-fuzz seed DIR`: the
/// normal build of the fuzz harness. It runs saved inputs through a target
/// without libFuzzer, so the corpus and the crash reproducers are
/// regression tests (FuzzReplayTests runs them all).
enum FuzzReplay {
    static let usage = """
    usage: encfs-fuzz TARGET FILE_OR_DIR... [-v] [--stats]
           encfs-fuzz seed DIR

    Runs every input (each FILE, and every file below each DIR) through
    TARGET (\(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", "))) and exits 0 when none trips anything.
    A trap, a sanitizer report, an undocumented error or a broken invariant
    ends the process with a message naming the input. -v names each input
    before it runs; --stats counts how each step ended (parsed, unlocked,
    which error), to show how deep the inputs reach.

    seed DIR writes a fresh seed corpus made from real bundles, one
    directory per target (Scripts/make-fuzz-corpus.sh).

    Built with -sanitize=fuzzer,address -DFUZZING (Scripts/fuzz.sh) this
    binary is the libFuzzer driver instead; ENCFS_FUZZ_TARGET picks the target.

    exit codes: 0 every input passed, 1 an input could not be read or the
    corpus not written, 2 usage error; a finding kills the process
    """

    static let diagnostics = Diagnostics(tool: "encfs-fuzz")

    /// Runs the command and returns its exit code.
    static func run(_ arguments: [String]) -> Int32 {
        guard let first = arguments.first, first != "-h", first != "--help" else {
            print(usage)
            return arguments.isEmpty ? ExitCode.usage : ExitCode.success
        }
        if first == "seed" {
            guard arguments.count == 2 else { return usageError("seed takes one DIR") }
            do {
                try SeedCorpus.write(to: arguments[1])
                return ExitCode.success
            } catch {
                diagnostics.report(error)
                return ExitCode.failure
            }
        }
        guard let target = FuzzTarget(rawValue: first) else { return usageError("unknown target \(first)") }
        let verbose = arguments.contains("-v")
        if arguments.contains("--stats") { FuzzTarget.outcomes = [:] }
        let paths = arguments.dropFirst().filter { $0 != "-v" && $0 != "--stats" }
        guard !paths.isEmpty else { return usageError("no input given") }
        var inputs: [String] = []
        for path in paths {
            guard let found = files(at: path) else {
                diagnostics.error("cannot read \(path)")
                return ExitCode.failure
            }
            inputs += found
        }
        CrashReport.install()
        defer { BundleFuzzing.cleanUp() }
        for input in inputs {
            if verbose { diagnostics.note("\(target.rawValue): \(input)") }
            let bytes: [UInt8]
            do { bytes = try SeedCorpus.readFile(input) } catch {
                diagnostics.error("cannot read \(input)")
                return ExitCode.failure
            }
            CrashReport.current(input)
            bytes.withUnsafeBytes { target.run($0) }
        }
        for (outcome, count) in (FuzzTarget.outcomes ?? [:]).sorted(by: { $0.key < $1.key }) {
            print("\(count)\t\(outcome)")
        }
        print("encfs-fuzz: \(target.rawValue): \(inputs.count) input\(inputs.count == 1 ? "" : "s") passed")
        return ExitCode.success
    }

    /// `path` if it is a file, else the files below it in name order, dot
    /// files (libFuzzer's `.state` and such) left out; nil when unreadable.
    static func files(at path: String) -> [String]? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        guard st.st_mode & S_IFMT == S_IFDIR else { return [path] }
        var found: [String] = []
        for name in names(in: path) where !name.hasPrefix(".") {
            guard let below = files(at: "\(path)/\(name)") else { return nil }
            found += below
        }
        return found
    }

    /// The entries of a directory but `.` and `..`, sorted by name bytes.
    static func names(in directory: String) -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: MemoryLayout.size(ofValue: entry.pointee.d_name)) { String(cString: $0) }
            }
            if name != ".", name != ".." { names.append(name) }
        }
        return names.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
    }

    private static func usageError(_ message: String) -> Int32 {
        diagnostics.error(message)
        diagnostics.hint("see encfs-fuzz --help")
        return ExitCode.usage
    }
}
