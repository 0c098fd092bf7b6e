import Foundation
#if canImport(Glibc)
import Glibc
import SharedTestSupport
#endif

/// A cgroup v2 group made for one test under the unified hierarchy (at
/// /sys/fs/cgroup on pure v2 systems, /sys/fs/cgroup/unified on hybrid
/// ones), removed with its children when the test ends.
final class ScratchCgroup {
    /// Where the unified hierarchy is mounted, from /proc/self/mountinfo;
    /// nil without cgroup v2.
    static let hierarchyRoot: String? = {
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count, fields[dash + 1] == "cgroup2",
                  fields.count > 4 else { continue }
            return String(fields[4])
        }
        return nil
    }()

    /// The group's path as `/proc/PID/cgroup` shows it ("/name/…").
    let path: String
    /// Its directory in the hierarchy.
    let directory: String
    private var children: [String] = []

    /// Makes `/NAME` in the hierarchy.
    ///
    /// - Throws: `SubprocessError` without cgroup v2 or when mkdir fails.
    init(_ name: String) throws {
        guard let root = Self.hierarchyRoot else { throw SubprocessError("no cgroup v2 hierarchy mounted") }
        path = "/\(name)"
        directory = root + path
        guard mkdir(directory, 0o755) == 0 else { throw SubprocessError("mkdir \(directory): errno \(errno)") }
    }

    /// Makes a child group and returns its path ("/name/child").
    func makeChild(_ name: String) throws -> String {
        guard mkdir("\(directory)/\(name)", 0o755) == 0 else { throw SubprocessError("mkdir \(directory)/\(name): errno \(errno)") }
        children.append(name)
        return "\(path)/\(name)"
    }

    /// The hierarchy directory of `groupPath` (a path like ``path``).
    static func directory(of groupPath: String) -> String { (hierarchyRoot ?? "") + groupPath }

    /// Removes the group and its children once their processes are gone
    /// (a group with members cannot be removed; the readers a test moves in
    /// have exited by then, but give them a few seconds to be reaped).
    func remove() {
        for child in children.reversed() {
            _ = Deadline.poll(seconds: 5) { rmdir("\(directory)/\(child)") == 0 || errno == ENOENT }
        }
        _ = Deadline.poll(seconds: 5) { rmdir(directory) == 0 || errno == ENOENT }
    }
}
