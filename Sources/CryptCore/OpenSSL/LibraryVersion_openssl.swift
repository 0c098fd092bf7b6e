internal import COpenSSL

/// The OpenSSL library this process runs with (not the headers it was
/// built against), for `--version` and bug reports.
package enum OpenSSLLibrary {
    /// e.g. `OpenSSL 3.0.15 3 Sep 2024`. The corresponding C function is
    /// `OpenSSL_version(OPENSSL_VERSION)`.
    package static var versionText: String {
        guard let text = OpenSSL_version(OPENSSL_VERSION) else { return "OpenSSL (unknown version)" }
        return String(cString: text)
    }
}
