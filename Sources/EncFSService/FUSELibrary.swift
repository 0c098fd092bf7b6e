#if canImport(Glibc)
import Glibc
#endif

/// The libfuse library of this system, for `--version`.
///
/// Asked through `dlopen` rather than linked: this target is FUSE-free
/// (encfs-serve, encfs-inspect and the other tools must run where libfuse
/// is not installed), and the mount, which links libfuse, finds the same
/// library already loaded.
package enum FUSELibrary {
    /// e.g. `3.14.0`, or `not installed`. The corresponding C function is
    /// `fuse_pkgversion`.
    package static var version: String {
        guard let handle = dlopen("libfuse3.so.3", RTLD_LAZY | RTLD_LOCAL) else { return "not installed" }
        defer { dlclose(handle) }
        typealias PackageVersion = @convention(c) () -> UnsafePointer<CChar>?
        guard let symbol = dlsym(handle, "fuse_pkgversion") else { return "unknown" }
        guard let text = unsafeBitCast(symbol, to: PackageVersion.self)() else { return "unknown" }
        return String(cString: text)
    }
}
