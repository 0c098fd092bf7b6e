import EncFSCore

/// `encfs-inspect ls [-l] [-R] [--json] BUNDLE [PATH]`: lists a directory
/// (default: the root), or describes one entry.
///
/// Names and targets are escaped (PrintableText): one line per entry,
/// whatever bytes a name holds. `--json` collects the entries and prints
/// one document at the end; a failure prints no partial document.
struct InspectList: InspectSubcommand {
    static let operandCount = 1...2

    let bundle: InspectedBundle
    /// PATH inside the bundle; empty for the root.
    let path: [UInt8]
    let long: Bool
    let recursive: Bool
    let json: Bool

    init(bundle: InspectedBundle, operands: [[UInt8]], args: ArgumentParser.Result) {
        self.bundle = bundle
        path = operands.first ?? []
        long = args.has("-l")
        recursive = args.has("-R")
        json = args.has("--json")
    }

    func run(diagnostics: Diagnostics) throws -> Int32 {
        let reader = try bundle.open()
        let index = reader.index
        let start = try InspectedBundle.resolve(path, in: index)
        var listing = Listing(index: index, long: long, json: json, warnsOfExternalLinks: !bundle.options.allowsExternalSymlinks)
        defer { listing.finish(path: path, diagnostics: diagnostics) }
        guard start.kind == .directory else {
            try listing.describe(start, name: path, diagnostics: diagnostics)
            listing.listed = true
            return ExitCode.success
        }
        if recursive {
            var queue = [start]
            var first = true
            while !queue.isEmpty {
                let dir = queue.removeFirst()
                if !json {
                    if !first { listing.out.write([0x0A]) }
                    first = false
                    let dirPath = try index.path(of: dir, maximumLength: PrintableText.defaultLimit)
                    listing.out.write(dirPath.isEmpty ? "." : "./" + PrintableText.escaping(dirPath))
                    listing.out.write(Array(":\n".utf8))
                }
                for position in dir.children {
                    let child = try index.entry(at: position)
                    try listing.describe(child, name: index.name(of: child), diagnostics: diagnostics)
                    if child.kind == .directory { queue.append(child) }
                }
            }
        } else {
            for position in start.children {
                let child = try index.entry(at: position)
                try listing.describe(child, name: index.name(of: child), diagnostics: diagnostics)
            }
        }
        listing.listed = true
        return ExitCode.success
    }

    /// `-rwxr-xr-x`, `drwxr-sr-x`, `lrwxrwxrwt`: the type, then the
    /// permission bits with setuid, setgid and sticky where ls puts them.
    static func modeString(_ entry: IndexEntry) -> String {
        let type: Character = entry.kind == .directory ? "d" : entry.kind == .symlink ? "l" : "-"
        var s = String(type)
        let m = Int(entry.mode)
        let bits: [(Int, Character)] = [(0o400, "r"), (0o200, "w"), (0o100, "x"), (0o040, "r"), (0o020, "w"), (0o010, "x"),
                                         (0o004, "r"), (0o002, "w"), (0o001, "x")]
        for (i, (bit, char)) in bits.enumerated() {
            var c: Character = m & bit != 0 ? char : "-"
            if i == 2, m & 0o4000 != 0 { c = c == "x" ? "s" : "S" }
            if i == 5, m & 0o2000 != 0 { c = c == "x" ? "s" : "S" }
            if i == 8, m & 0o1000 != 0 { c = c == "x" ? "t" : "T" }
            s.append(c)
        }
        return s
    }
}

/// One listing being written: the entries as text lines (or collected for
/// `--json`), and the external symlinks warned about.
private struct Listing {
    let index: BundleIndex
    let long: Bool
    /// Version 2 bundles get a second size column with `-l`: the bytes a
    /// file's body takes in the bundle (compressed, and shared with other
    /// files when deduplicated); version 1 output stays as it was.
    let showsStored: Bool
    let warnsOfExternalLinks: Bool
    let out = OutputStream()
    /// `--json`: the entries so far.
    var jsonEntries: [JSONValue]?
    /// Set on success: a failure prints no partial document.
    var listed = false
    var externalShown = 0

    init(index: BundleIndex, long: Bool, json: Bool, warnsOfExternalLinks: Bool) {
        self.index = index
        self.long = long
        showsStored = index.features.formatVersion != BundleFormat.version
        self.warnsOfExternalLinks = warnsOfExternalLinks
        jsonEntries = json ? [] : nil
    }

    /// One entry, and a warning after it when it is a symlink that points
    /// outside the bundle (unless those were allowed).
    mutating func describe(_ entry: IndexEntry, name: [UInt8], diagnostics: Diagnostics) throws {
        if jsonEntries != nil {
            jsonEntries?.append(try InspectCommand.entryJSON(entry, name: name, index: index))
        } else {
            try describeAsText(entry, name: name)
        }
        if warnsOfExternalLinks, try index.isExternalSymlink(entry) {
            // Flushed first, so the warning follows its entry on a terminal.
            out.flush()
            let refusal = BundleError.externalSymlink(path: try index.path(of: entry, maximumLength: PrintableText.defaultLimit),
                                                      target: try index.withSymlinkTarget(of: entry) { Array($0) })
            diagnostics.warning(refusal.message, path: refusal.path)
            externalShown += 1
        }
    }

    private func describeAsText(_ entry: IndexEntry, name: [UInt8]) throws {
        if long {
            let size = entry.kind == .directory ? 4096 : entry.kind == .symlink ? UInt64(entry.targetLength) : entry.fileSize
            out.write(InspectList.modeString(entry) + " " + String(size).leftPadded(to: 12) + " ")
            if showsStored { out.write(String(try index.storedSize(of: entry)).leftPadded(to: 12) + " ") }
            out.write(RFC3339.format(seconds: entry.mtimeSeconds, nanoseconds: entry.mtimeNanoseconds,
                                     separator: .space, zone: false) + " ")
        }
        out.write(PrintableText.escaping(name))
        if long, entry.kind == .symlink {
            out.write(" -> ")
            out.write(PrintableText.escaping(try index.withSymlinkTarget(of: entry) { Array($0) }))
        }
        out.write([0x0A])
    }

    /// The `--json` document once everything was listed, and the hint
    /// after any external symlink warned about; run on every way out.
    func finish(path: [UInt8], diagnostics: Diagnostics) {
        if let jsonEntries, listed {
            out.write(JSONValue.object(JSONValue.byteString(path, key: "path") + [("entries", .array(jsonEntries))]).serialized)
        }
        if externalShown > 0 {
            out.flush()
            diagnostics.hint("encfs-mount refuses a bundle with such links unless given \(ReaderOptions.allowExternalSymlinks)")
        }
    }
}
