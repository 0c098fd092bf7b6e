import EncFSCore
#if canImport(Glibc)
import Glibc
import EncFSService
#endif

/// `encfs-mount`'s access-policy options (`--allow-uid`, `--allow-gid`,
/// `--allow-exe`, `--allow-cgroup`, `--enforce-reads`), parsed into
/// ``AccessRules`` and written back for the daemon in one place.
package enum AccessOptions {
    package static let allowUID = "--allow-uid"
    package static let allowGID = "--allow-gid"
    package static let allowExecutable = "--allow-exe"
    package static let allowCgroup = "--allow-cgroup"
    package static let enforceReads = "--enforce-reads"

    /// The parser entries; every `--allow-*` is repeatable.
    package static let parserOptions: [ArgumentParser.Option] = [
        .init([allowUID], takesValue: true),
        .init([allowGID], takesValue: true),
        .init([allowExecutable], takesValue: true),
        .init([allowCgroup], takesValue: true),
        .init([enforceReads], takesValue: false),
    ]

    /// The `--help` section.
    package static let help = """
    access policy (checked by the daemon at every open and opendir; a
    caller must match every kind given, and any one value of a kind; each
    option takes a comma-separated list and may be repeated):
      --allow-uid UID,...      callers running as one of these user ids; an
                               id other than yours implies -o allow_other
                               (root, or user_allow_other in /etc/fuse.conf)
      --allow-gid GID,...      callers whose group id is one of these (the
                               effective group, not supplementary groups)
      --allow-exe PATH,...     callers running one of these programs: the
                               file there when mounting (symlinks resolved;
                               remount after replacing it), run in this
                               daemon's user and mount namespaces (for a
                               container or a sandboxed service, use
                               --allow-cgroup); an interpreter allows every
                               script it runs; other users' programs are
                               known only to a daemon running as root
      --allow-cgroup PATH,...  callers in one of these cgroup v2 groups or
                               below, e.g. /system.slice/nginx.service
      --enforce-reads          check the caller on every read too, with no
                               page cache: a descriptor inherited or passed
                               from an allowed process reads nothing; slower,
                               and shared mmap is refused
      refused callers get EACCES (Permission denied) and a log line, at most
      one a minute per program and user; see docs/SECURITY.md for what this
      does not stop (root, ptrace, LD_PRELOAD, descriptors without
      --enforce-reads)
    """

    /// The rules in `args`, as given (executable paths are resolved by
    /// ``resolvingExecutables(_:)``).
    ///
    /// - Throws: `UsageError` for an id that is not a number, a cgroup path
    ///   that is not absolute, an empty list item, or `--enforce-reads`
    ///   without a rule.
    package static func rules(from args: ArgumentParser.Result) throws -> AccessRules {
        var rules = AccessRules()
        let uidMessage = "\(allowUID) must list numeric user ids, such as 33 or 33,1000"
        rules.uids = try items(args, allowUID, uidMessage).map { try id($0, uidMessage) }
        let gidMessage = "\(allowGID) must list numeric group ids, such as 33 or 33,1000"
        rules.gids = try items(args, allowGID, gidMessage).map { try id($0, gidMessage) }
        rules.executables = try items(args, allowExecutable, "\(allowExecutable) must list paths of programs")
        let cgroupMessage = "\(allowCgroup) must be an absolute cgroup path, such as /system.slice/nginx.service"
        rules.cgroups = try items(args, allowCgroup, cgroupMessage).map { path in
            guard path.first == UInt8(ascii: "/") else { throw UsageError(cgroupMessage) }
            var trimmed = path
            while trimmed.count > 1, trimmed.last == UInt8(ascii: "/") { trimmed.removeLast() }
            return trimmed
        }
        rules.enforcesReads = args.has(enforceReads)
        if rules.enforcesReads, !rules.restrictsCallers {
            throw UsageError("\(enforceReads) needs a rule: \(allowUID), \(allowGID), \(allowExecutable) or \(allowCgroup)")
        }
        return rules
    }

    /// Every comma-separated item of every value of `option`.
    ///
    /// - Throws: `UsageError(message)` for an empty item.
    private static func items(_ args: ArgumentParser.Result, _ option: String, _ message: String) throws -> [[UInt8]] {
        try args.values(option).flatMap { value in
            try value.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false).map { item in
                guard !item.isEmpty else { throw UsageError(message) }
                return Array(item)
            }
        }
    }

    /// `text` as a user or group id: decimal, below 2^32 − 1 (which means
    /// "no id" to the kernel).
    private static func id(_ text: [UInt8], _ message: String) throws -> UInt32 {
        guard text.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
              let n = UInt32(String(decoding: text, as: UTF8.self)), n != UInt32.max else { throw UsageError(message) }
        return n
    }

    /// The daemon's arguments for `rules`, read back by ``rules(from:)``.
    package static func daemonArguments(for rules: AccessRules) -> [[UInt8]] {
        var out: [[UInt8]] = []
        func add(_ name: String, _ values: [[UInt8]]) {
            guard !values.isEmpty else { return }
            out.append(Array(name.utf8))
            out.append(Array(values.joined(separator: [UInt8(ascii: ",")])))
        }
        add(allowUID, rules.uids.map { Array(String($0).utf8) })
        add(allowGID, rules.gids.map { Array(String($0).utf8) })
        add(allowExecutable, rules.executables)
        add(allowCgroup, rules.cgroups)
        if rules.enforcesReads { out.append(Array(enforceReads.utf8)) }
        return out
    }

    /// `rules` with every executable path absolute and its symlinks
    /// resolved, as `/proc/PID/exe` shows a running program (so that
    /// `/usr/bin/python3` matches the `python3.11` it points to).
    ///
    /// - Throws: `CommandError` naming a path that does not resolve or is
    ///   not a regular file.
    package static func resolvingExecutables(_ rules: AccessRules) throws -> AccessRules {
        var resolved = rules
        resolved.executables = try rules.executables.map { path in
            let real: [UInt8]
            do { real = try LocalFiles.resolvedPath(path) } catch {
                throw CommandError("cannot resolve \(allowExecutable) path", path: path)
            }
            var st = stat()
            guard real.withCString({ stat($0, &st) }) == 0, st.st_mode & S_IFMT == S_IFREG else {
                throw CommandError("\(allowExecutable) is not a regular file", path: path)
            }
            return real
        }
        return resolved
    }

    /// Where fusermount3 reads whether users may ask for `allow_other`.
    package static let fuseConfiguration: [UInt8] = Array("/etc/fuse.conf".utf8)

    /// Refuses rules that let in other users when `allow_other` is not
    /// available: a user other than root needs `user_allow_other` in
    /// /etc/fuse.conf, or fusermount3 refuses the mount with a message that
    /// names neither the option nor why it was asked for.
    ///
    /// - Throws: `CommandError` saying what is missing.
    package static func checkAllowOtherAvailable(for rules: AccessRules) throws {
        guard getuid() != 0, rules.needsAllowOther(mountingUID: getuid(), mountingGID: getgid()),
              !fuseConfigurationAllowsOther() else { return }
        let which = rules.uids.isEmpty ? allowGID : allowUID
        throw CommandError("\(which) lets other users in, which needs the allow_other mount option; "
                           + "only root may use it unless /etc/fuse.conf has a line user_allow_other")
    }

    /// Refuses a cgroup rule where processes have no cgroup v2 path (a
    /// cgroup v1-only system): every open would be refused.
    ///
    /// - Throws: `CommandError` saying so.
    package static func checkCgroupsAvailable(for rules: AccessRules) throws {
        guard !rules.cgroups.isEmpty else { return }
        var contents = [UInt8](repeating: 0, count: 16 << 10)
        let path = Array("/proc/self/cgroup".utf8)
        let n = (try? FileDescriptor.open(path, flags: O_RDONLY)).map { file in
            contents.withUnsafeMutableBytes { (try? file.read(into: $0)) ?? 0 }
        } ?? 0
        guard !hasUnifiedHierarchy(cgroupFile: contents[0..<n]) else { return }
        throw CommandError("\(allowCgroup) needs cgroup v2, and this system has no unified cgroup hierarchy")
    }

    /// Whether a `/proc/PID/cgroup` text has the cgroup v2 line (`0::PATH`).
    package static func hasUnifiedHierarchy(cgroupFile text: ArraySlice<UInt8>) -> Bool {
        text.split(separator: 0x0A).contains { $0.starts(with: Array("0::/".utf8)) }
    }

    /// A warning for rules the daemon can only partly apply: a daemon that
    /// does not run as root cannot read other users' `/proc/PID/exe` (the
    /// kernel asks for ptrace access), so with an executable rule their
    /// opens are all refused.
    package static func warning(for rules: AccessRules, mountingUID: uid_t = getuid(), mountingGID: gid_t = getgid()) -> String? {
        guard mountingUID != 0, !rules.executables.isEmpty,
              rules.needsAllowOther(mountingUID: mountingUID, mountingGID: mountingGID) else { return nil }
        return "\(allowExecutable) cannot identify other users' programs unless encfs-mount runs as root: their opens will be refused"
    }

    /// For each allowed program that someone other than root or the
    /// mounting user could change or replace, the warning's message and
    /// the path that allows it: the program itself when they can write it
    /// (same file, new code: the daemon cannot tell), or a directory on
    /// its way when they can write that without a sticky bit protecting
    /// the entry below (a program put there later matches no rule, since
    /// the daemon records the file at mount, but one put there before the
    /// mount does).
    package static func replaceableExecutables(in rules: AccessRules, trusting owner: uid_t = getuid()) -> [(message: String, path: [UInt8])] {
        rules.executables.compactMap { program in
            guard let culprit = replaceablePart(of: program, trusting: owner) else { return nil }
            let what = culprit == program ? "it is writable by" : "a directory on its path (\(PrintableText.escaping(culprit))) is writable by"
            return ("\(allowExecutable) program can be changed by users other than root: \(what) them, "
                    + "and whoever changes it reads the mount", program)
        }
    }

    /// The first of `path` and its ancestors that a user other than root
    /// or `owner` may write (see ``replaceableExecutables(in:trusting:)``),
    /// nil when none (or when one cannot be examined).
    package static func replaceablePart(of path: [UInt8], trusting owner: uid_t) -> [UInt8]? {
        func trusted(_ uid: uid_t) -> Bool { uid == 0 || uid == owner }
        func writableByOthers(_ st: stat) -> Bool {
            !trusted(st.st_uid) || st.st_mode & S_IWOTH != 0 || (st.st_mode & S_IWGRP != 0 && st.st_gid != 0)
        }
        func status(_ path: [UInt8]) -> stat? {
            var st = stat()
            return path.withCString { lstat($0, &st) } == 0 ? st : nil
        }
        guard var entry = status(path) else { return nil }
        if writableByOthers(entry) { return path }
        var current = path
        while let slash = current.lastIndex(of: UInt8(ascii: "/")), current.count > 1 {
            let parent = slash == 0 ? [UInt8(ascii: "/")] : Array(current[..<slash])
            guard let directory = status(parent) else { return nil }
            // Sticky: others may add entries but not rename or remove one
            // they do not own (/tmp).
            let protected = directory.st_mode & S_ISVTX != 0 && trusted(entry.st_uid) && trusted(directory.st_uid)
            if writableByOthers(directory), !protected { return parent }
            entry = directory
            current = parent
        }
        return nil
    }

    /// Whether /etc/fuse.conf has a `user_allow_other` line (surrounding
    /// blanks ignored, as fusermount3 reads it).
    private static func fuseConfigurationAllowsOther() -> Bool {
        guard let file = try? FileDescriptor.open(fuseConfiguration, flags: O_RDONLY) else { return false }
        var contents = [UInt8](repeating: 0, count: 64 << 10)
        let n = contents.withUnsafeMutableBytes { (try? file.read(into: $0)) ?? 0 }
        let blanks: Set<UInt8> = [0x20, 0x09, 0x0D]
        return contents[0..<n].split(separator: 0x0A).contains { line in
            Array(line.drop { blanks.contains($0) }.reversed().drop { blanks.contains($0) }.reversed())
                == Array("user_allow_other".utf8)
        }
    }
}
