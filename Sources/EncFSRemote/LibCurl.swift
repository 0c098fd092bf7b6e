internal import CCurl
#if canImport(Glibc)
import Glibc
#endif

/// libcurl, loaded with `dlopen` the first time a remote bundle is opened.
///
/// Linking it made every process of the tools (every mount daemon, local
/// bundles too) map libcurl and its dependencies: about 4 MiB more
/// resident memory (docs/PERFORMANCE.md). The functions are looked up once;
/// the variadic ones are called through the typed helpers of
/// `Sources/CCurl/shim.h`.
struct LibCurl: @unchecked Sendable {
    let easyInit: @convention(c) () -> UnsafeMutableRawPointer?
    let easyCleanup: @convention(c) (UnsafeMutableRawPointer?) -> Void
    let easyPerform: @convention(c) (UnsafeMutableRawPointer?) -> CURLcode
    let easyStrerror: @convention(c) (CURLcode) -> UnsafePointer<CChar>?
    let slistAppend: @convention(c) (UnsafeMutablePointer<curl_slist>?, UnsafePointer<CChar>?) -> UnsafeMutablePointer<curl_slist>?
    let slistFreeAll: @convention(c) (UnsafeMutablePointer<curl_slist>?) -> Void
    /// `curl_easy_setopt` and `curl_easy_getinfo`, for the shim's helpers.
    let setopt: UnsafeMutableRawPointer
    let getinfo: UnsafeMutableRawPointer

    /// The library, loaded and initialized once per process.
    ///
    /// - Throws: `RemoteError.setup` when libcurl 4 is not installed.
    static func shared() throws(RemoteError) -> LibCurl {
        switch loaded {
        case .success(let library): return library
        case .failure(let error): throw error
        }
    }

    private static let loaded: Result<LibCurl, RemoteError> = {
        // The name of Debian's runtime package libcurl4's library.
        guard let handle = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL) else {
            return .failure(.setup("libcurl is not installed (Debian: apt-get install libcurl4)"))
        }
        func symbol(_ name: String) -> UnsafeMutableRawPointer? { dlsym(handle, name) }
        guard let globalInitMem = symbol("curl_global_init_mem"), let easyInit = symbol("curl_easy_init"),
              let easyCleanup = symbol("curl_easy_cleanup"), let easyPerform = symbol("curl_easy_perform"),
              let easyStrerror = symbol("curl_easy_strerror"), let slistAppend = symbol("curl_slist_append"),
              let slistFreeAll = symbol("curl_slist_free_all"), let setopt = symbol("curl_easy_setopt"),
              let getinfo = symbol("curl_easy_getinfo") else {
            return .failure(.setup("libcurl lacks a function this build uses"))
        }
        // libcurl's own buffers (each request's text among them) are wiped
        // when freed: Sources/CCurl/shim.h. When another part of the
        // process initialized libcurl first, this changes nothing, and
        // only the header lists are wiped (``freeHeaders(_:)``).
        guard ccurl_global_init_wiping(globalInitMem, Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK else { return .failure(.setup("curl_global_init failed")) }
        return .success(LibCurl(
            easyInit: unsafeBitCast(easyInit, to: (@convention(c) () -> UnsafeMutableRawPointer?).self),
            easyCleanup: unsafeBitCast(easyCleanup, to: (@convention(c) (UnsafeMutableRawPointer?) -> Void).self),
            easyPerform: unsafeBitCast(easyPerform, to: (@convention(c) (UnsafeMutableRawPointer?) -> CURLcode).self),
            easyStrerror: unsafeBitCast(easyStrerror, to: (@convention(c) (CURLcode) -> UnsafePointer<CChar>?).self),
            slistAppend: unsafeBitCast(slistAppend, to: (@convention(c) (UnsafeMutablePointer<curl_slist>?,
                                                                         UnsafePointer<CChar>?) -> UnsafeMutablePointer<curl_slist>?).self),
            slistFreeAll: unsafeBitCast(slistFreeAll, to: (@convention(c) (UnsafeMutablePointer<curl_slist>?) -> Void).self),
            setopt: setopt, getinfo: getinfo))
    }()

    /// Wipes every line of `list`, then frees it (`curl_slist_free_all`):
    /// header lines hold secrets (`--header-file` values, a request's
    /// signature and session token).
    func freeHeaders(_ list: UnsafeMutablePointer<curl_slist>?) {
        ccurl_slist_wipe(list)
        slistFreeAll(list)
    }
}
