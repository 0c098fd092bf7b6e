import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Searching a process's memory for secrets after a lock: the mount's
/// daemon (LockMemoryTests) and encfs-serve (ServeLockTests).
extension ToolTestCase {
    /// Prints the names (argv[3…], `name=hex`) whose bytes (argv[2]
    /// `bytes`) or Python regular expression over bytes (`regex`) occur
    /// anywhere in the readable memory of process argv[1], and how many
    /// bytes were searched. The kernel's special mappings ([vvar], [vdso],
    /// [vsyscall]) are skipped: they hold no data of the process.
    private static let memorySearchScript = """
        import re, sys
        pid, kind = int(sys.argv[1]), sys.argv[2]
        needles = dict(arg.split('=') for arg in sys.argv[3:])
        needles = {name: bytes.fromhex(hex) for name, hex in needles.items()}
        patterns = {name: re.compile(needle if kind == 'regex' else re.escape(needle)) for name, needle in needles.items()}
        found, searched = set(), 0
        with open(f'/proc/{pid}/maps') as maps, open(f'/proc/{pid}/mem', 'rb', 0) as mem:
            for line in maps:
                fields = line.split()
                lo, hi = (int(x, 16) for x in fields[0].split('-'))
                if 'r' not in fields[1] or (len(fields) > 5 and fields[5].startswith('[v')):
                    continue
                try:
                    mem.seek(lo)
                    data = mem.read(hi - lo)
                except OSError:
                    continue
                searched += len(data)
                found |= {name for name, pattern in patterns.items() if pattern.search(data)}
        print('searched', searched)
        print('found', ' '.join(sorted(found)))
        """

    /// Runs the search for `needles` of `kind` (`bytes` or `regex`) in the
    /// memory of `pid`; fails the test when it read less than 1 MiB, so a
    /// search that cannot see the process's memory never passes as
    /// "nothing found".
    private func searchMemory(of pid: pid_t, kind: String, _ needles: [String: [UInt8]],
                              file: StaticString, line: UInt) throws -> [String] {
        let arguments = needles.map { name, bytes in "\(name)=\(bytes.map { String(format: "%02x", $0) }.joined())" }
        let result = try python(Self.memorySearchScript, [String(pid), kind] + arguments, timeout: 300)
        guard result.status == 0 else { throw SubprocessError(result.summary) }
        let lines = result.output.split(separator: "\n")
        let searched = lines.first { $0.hasPrefix("searched ") }.flatMap { Int($0.dropFirst(9)) } ?? 0
        XCTAssertGreaterThan(searched, 1 << 20, "the search read almost nothing: \(result.output)", file: file, line: line)
        return lines.first { $0.hasPrefix("found") }.map { $0.dropFirst(5).split(separator: " ").map(String.init) } ?? []
    }

    /// The names of `needles` whose bytes are somewhere in the readable
    /// memory of `pid`, sorted (root only: `/proc/PID/mem`).
    public func namesFound(inMemoryOf pid: pid_t, _ needles: [String: [UInt8]],
                    file: StaticString = #filePath, line: UInt = #line) throws -> [String] {
        try searchMemory(of: pid, kind: "bytes", needles, file: file, line: line)
    }

    /// The names of `patterns` (Python regular expressions over bytes)
    /// that match somewhere in the readable memory of `pid`, sorted (root
    /// only).
    public func patternsFound(inMemoryOf pid: pid_t, _ patterns: [String: String],
                              file: StaticString = #filePath, line: UInt = #line) throws -> [String] {
        try searchMemory(of: pid, kind: "regex", patterns.mapValues { Array($0.utf8) }, file: file, line: line)
    }

    /// Whether `needle` is somewhere in the readable memory of `pid`.
    public func memory(of pid: pid_t, contains needle: [UInt8], file: StaticString = #filePath, line: UInt = #line) throws -> Bool {
        try namesFound(inMemoryOf: pid, ["needle": needle], file: file, line: line) == ["needle"]
    }
}
