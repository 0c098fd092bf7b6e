/// A tree in which paths can be walked and symlinks followed: the index of
/// an opened bundle, or the source tree encfs-pack walked. One walker
/// (``SymlinkContainment``) serves both, so what the packer warns about is
/// exactly what a reader refuses.
protocol SymlinkTree {
    associatedtype Entry
    func isRoot(_ node: Entry) -> Bool
    func kind(of node: Entry) -> IndexEntry.Kind
    /// The directory holding `node` (the root is its own parent).
    func parent(of node: Entry) throws -> Entry
    /// The child of `directory` called `name`, or nil.
    func child(named name: [UInt8], of directory: Entry) throws -> Entry?
    /// The target bytes of a symlink node.
    func target(of link: Entry) throws -> [UInt8]
}

/// Whether symlinks stay inside the bundle, and path walks that follow them.
///
/// A link is **external** when its target is absolute, or when it holds a
/// `..` component and either
/// - climbs above the root lexically, counting from the link's own
///   directory (`sub/rel -> ../../x`), or
/// - climbs above the root when walked as the kernel walks it, following
///   links on the way (`a -> x/x/../..` with `x -> .`: lexically inside,
///   yet the kernel ends above the mount's root).
///
/// A link without `..` that is not absolute is never external itself: it
/// can lead outside only through another link, which is then external and
/// named instead (fixing that one fixes both). This also lets a reader
/// check only the few links whose targets hold `..` or start with `/`.
enum SymlinkContainment {
    /// How many links one walk follows before giving up (Linux's limit).
    static let maximumHops = 40

    /// How a walk ended.
    enum Outcome<Entry> {
        /// At this node.
        case reached(Entry)
        /// Above the root or at an absolute target, following a link.
        case outside
        /// A component does not exist.
        case missing
        /// A component before the last is not a directory.
        case notADirectory
        /// More than ``maximumHops`` links.
        case tooManyLinks
    }

    /// Whether a target may be external at all: absolute, or holding a `..`
    /// component. Cheap; the index keeps the positions of such links.
    static func isSuspect(_ target: UnsafeRawBufferPointer) -> Bool {
        guard let first = target.first else { return false }
        if first == UInt8(ascii: "/") { return true }
        var componentStart = 0
        for i in 0...target.count where i == target.count || target[i] == UInt8(ascii: "/") {
            if i - componentStart == 2, target[componentStart] == UInt8(ascii: "."), target[componentStart + 1] == UInt8(ascii: ".") {
                return true
            }
            componentStart = i + 1
        }
        return false
    }

    /// Whether the symlink `link` of `tree` is external (see the type's
    /// documentation).
    ///
    /// - Throws: what reading the tree throws.
    static func isExternal<Tree: SymlinkTree>(_ link: Tree.Entry, in tree: Tree) throws -> Bool {
        let target = try tree.target(of: link)
        guard target.withUnsafeBytes(isSuspect) else { return false }
        if target.first == UInt8(ascii: "/") { return true }
        let components = Self.components(of: target)
        let climbs = components.filter { $0 == [UInt8(ascii: "."), UInt8(ascii: ".")] }.count
        // The link's directory's depth matters only up to the number of "..".
        var depth = 0
        var directory = try tree.parent(of: link)
        while depth < climbs, !tree.isRoot(directory) {
            depth += 1
            directory = try tree.parent(of: directory)
        }
        if climbsAboveRoot(components, fromDepth: depth) { return true }
        if case .outside = try walk(tree, from: tree.parent(of: link), components: components, fromLink: true, followingLast: true) {
            return true
        }
        return false
    }

    /// Whether `components`, taken lexically from a directory `depth` levels
    /// below the root, go above it.
    static func climbsAboveRoot(_ components: [[UInt8]], fromDepth depth: Int) -> Bool {
        var level = depth
        for component in components {
            if component == [UInt8(ascii: ".")] { continue }
            if component == [UInt8(ascii: "."), UInt8(ascii: ".")] {
                level -= 1
                if level < 0 { return true }
            } else {
                level += 1
            }
        }
        return false
    }

    /// The '/'-separated components of a path, empty ones dropped.
    static func components(of path: [UInt8]) -> [[UInt8]] {
        path.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true).map(Array.init)
    }

    /// Walks `components` from `start` as the kernel would inside a mount
    /// of the tree: "." stays, ".." goes up, a symlink before the last
    /// component (or at it, when `followingLast`) continues from its own
    /// directory with its target's components.
    ///
    /// A ".." at the root is where the kernel leaves the mount: for a
    /// component that came from a link's target (or from `components` when
    /// `fromLink`), the walk ends `.outside`; for one the caller gave, it
    /// stays at the root, as a shell's path does at "/".
    ///
    /// - Throws: what reading the tree throws.
    static func walk<Tree: SymlinkTree>(_ tree: Tree, from start: Tree.Entry, components: [[UInt8]], fromLink: Bool,
                                        followingLast: Bool) throws -> Outcome<Tree.Entry> {
        // A stack, last component on top; each tagged with where it came from.
        var pending: [(name: [UInt8], fromLink: Bool)] = components.reversed().map { ($0, fromLink) }
        var current = start
        var hops = 0
        while let (component, componentFromLink) = pending.popLast() {
            // "f/." and "f/.." with f a file are not directories, as in POSIX.
            guard tree.kind(of: current) == .directory else { return .notADirectory }
            if component == [UInt8(ascii: ".")] { continue }
            if component == [UInt8(ascii: "."), UInt8(ascii: ".")] {
                if tree.isRoot(current) {
                    if componentFromLink { return .outside }
                    continue
                }
                current = try tree.parent(of: current)
                continue
            }
            guard let next = try tree.child(named: component, of: current) else { return .missing }
            if tree.kind(of: next) == .symlink, !pending.isEmpty || followingLast {
                hops += 1
                guard hops <= maximumHops else { return .tooManyLinks }
                let target = try tree.target(of: next)
                if target.first == UInt8(ascii: "/") { return .outside }
                // Continue from the link's directory (current) with the target.
                pending.append(contentsOf: Self.components(of: target).reversed().map { ($0, true) })
                continue
            }
            current = next
        }
        return .reached(current)
    }
}
