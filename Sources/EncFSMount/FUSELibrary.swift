import CFuse

/// The libfuse library this process runs with, for `--version`.
package enum FUSELibrary {
    /// e.g. `3.14.0`. The corresponding C function is `fuse_pkgversion`.
    package static var version: String {
        guard let text = fuse_pkgversion() else { return "unknown" }
        return String(cString: text)
    }
}
