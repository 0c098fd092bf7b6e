/// `-o name=value` spellings of the long options, for fstab and `mount -t`.
///
/// Debian's `mount.fuse3` runs `encfs-mount BUNDLE MOUNTPOINT -o OPTIONS`:
/// everything an fstab line says arrives as one comma-separated `-o`. So
/// every long option `--foo-bar` of the command is also `-o foo_bar=VALUE`
/// (or `-o foo_bar` for a flag), derived here from the parser's own option
/// list: an option added to the command needs no entry of its own. What is
/// not an option of the command is mount(8)'s business (ignored here) or a
/// kernel/FUSE option (left in `-o` for libfuse, as before).
extension ArgumentParser {
    /// Spellings the fstab world uses that are not derived from a long name
    /// (`keyfile=` and `passfile=` as in other FUSE file systems' fstab lines).
    static let mountOptionAliases: [String: String] = [
        "keyfile": "--key-file",
        "passfile": "--passphrase-file",
    ]

    /// Options that would carry the secret itself: refused, since an fstab
    /// line and the mount's options are readable (/proc/mounts, `ps`).
    static let secretMountOptions: Set<String> = ["key", "passphrase", "password", "pass"]

    /// mount(8), fstab and systemd options that say nothing to the file
    /// system, and those the mount overrides: `rw` (Debian's mount.fuse3
    /// adds it unless `ro` is given; the mount is read-only whatever it
    /// says), `dev`, `suid` and `exec` (the defaults `mount.fuse3` adds;
    /// the mount stays nodev,nosuid: see `MountSession.ignoredOptions`).
    static let ignoredMountOptions: Set<String> = [
        "rw", "dev", "suid", "exec", "defaults", "auto", "noauto", "nofail", "_netdev",
        "user", "users", "nouser", "owner", "group",
    ]

    /// Long options with no `-o` spelling: they are not settings of a mount.
    static let optionsWithoutMountSpelling: Set<String> = ["--help", "--version"]

    /// `result` with each part of each `-o` value that names a long option
    /// of this parser (or an alias) turned into that option, in place;
    /// mount(8)'s own options dropped; the rest left in `-o` in order.
    ///
    /// Options that start with `--internal` are never spelled (the daemon's
    /// marker). A translated `-o` option counts as if written out: the last
    /// of a single-valued option wins, repeatable ones add up.
    ///
    /// - Throws: `UsageError` for a secret given as an option, a valued
    ///   option without `=VALUE`, or a flag with one. The message names the
    ///   option, never its value.
    package func expandingMountOptions(_ result: Result) throws -> Result {
        var expanded = result
        expanded.options = []
        for (name, value) in result.options {
            guard name == "-o", let value else {
                expanded.options.append((name, value))
                continue
            }
            var kept: [[UInt8]] = []
            for part in value.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: true) {
                if let option = try translatedMountOption(Array(part)) {
                    expanded.options.append(option)
                } else if !Self.isIgnoredMountOption(Array(part)) {
                    kept.append(Array(part))
                }
            }
            if !kept.isEmpty { expanded.options.append(("-o", Array(kept.joined(separator: [UInt8(ascii: ",")])))) }
        }
        return expanded
    }

    /// The option `part` (`name` or `name=value`) stands for, or nil when
    /// it is not one of this parser's long options.
    private func translatedMountOption(_ part: [UInt8]) throws -> (name: String, value: [UInt8]?)? {
        let equals = part.firstIndex(of: UInt8(ascii: "="))
        let name = String(decoding: part[..<(equals ?? part.endIndex)], as: UTF8.self)
        let value = equals.map { Array(part[($0 + 1)...]) }
        if Self.secretMountOptions.contains(name) {
            throw UsageError("option -o \(name)= is refused: the secret would be readable in fstab and /proc/mounts (use keyfile=FILE or passfile=FILE)")
        }
        let longName = Self.mountOptionAliases[name] ?? "--" + name.replacingUnderscores()
        guard name.first != "-", !Self.optionsWithoutMountSpelling.contains(longName), !longName.hasPrefix("--internal"),
              let option = options.first(where: { $0.names.contains(longName) }) else { return nil }
        switch (option.takesValue, value) {
        case (true, let value?) where !value.isEmpty: return (option.names[0], value)
        case (true, _): throw UsageError("option -o \(name) needs a value (\(name)=VALUE)")
        case (false, nil): return (option.names[0], nil)
        case (false, _?): throw UsageError("option -o \(name) takes no value")
        }
    }

    /// Whether `part` is one of ``ignoredMountOptions``, an `x-*` option
    /// (systemd's and util-linux's own) or a `comment=`.
    private static func isIgnoredMountOption(_ part: [UInt8]) -> Bool {
        let text = String(decoding: part, as: UTF8.self)
        return ignoredMountOptions.contains(text) || text.hasPrefix("x-") || text.hasPrefix("comment=")
    }
}

private extension String {
    /// `cache_dir` → `cache-dir`.
    func replacingUnderscores() -> String { String(map { $0 == "_" ? "-" : $0 }) }
}
