#if canImport(Glibc)
import Glibc
#endif

/// What can go wrong with a bundle read over HTTP.
///
/// Every message names the bundle by ``RemoteLocation/displayName`` at
/// most: never a query string or a header value. A read that fails with
/// any of these answers EIO (``errno``).
package enum RemoteError: Error, Sendable, CustomStringConvertible {
    /// The address cannot be used.
    case invalidURL(String)
    /// The server answered a range request with the whole object (200): a
    /// bundle is never downloaded whole by accident.
    case rangesNotSupported
    /// 416, a missing total size, or a size other than the header's: the
    /// object at the address is not this bundle.
    case notThisBundle(String)
    /// 412, 404 or a changed size after the mount: the object was replaced.
    case replaced
    /// 403: the server refuses (a presigned URL that has expired).
    case forbidden
    /// The AWS credentials cannot be found or read (names a file or a
    /// variable, never a value).
    case credentials(String)
    /// The server refused the signed request: its S3 error code
    /// (`SignatureDoesNotMatch`, `InvalidAccessKeyId`, `ExpiredToken`…),
    /// nil when it sent none. Newer credentials were looked for first.
    case credentialsRefused(code: String?)
    /// A status that retrying will not change.
    case status(Int)
    /// Transient failures went on until the read's deadline or the retry
    /// budget ran out; `last` says what the last attempt saw.
    case gaveUp(last: String)
    /// Too many reads already wait for the network, and none finished
    /// within 2 s: this one is refused rather than taking the last free
    /// worker thread.
    case busy
    /// libcurl could not be set up (out of memory, a bad option).
    case setup(String)
    /// The server's certificate is not trusted, or `--ca-file` cannot be
    /// used: retrying will not change that.
    case tls(String)
    /// The local cache directory cannot be used.
    case cache(String, path: [UInt8])

    package var description: String {
        switch self {
        case .invalidURL(let why): return "invalid bundle address: \(why)"
        case .rangesNotSupported:
            return "the server does not answer range requests (it sent the whole object); refusing to download the bundle whole"
        case .notThisBundle(let why): return "the object at this address is not the bundle that was expected (\(why))"
        case .replaced: return "the remote bundle was replaced since it was mounted; only cached data can be read"
        case .forbidden: return "the server refused access (403); a presigned URL may have expired"
        case .credentials(let why): return "AWS credentials: \(why)"
        case .credentialsRefused(let code): return "the server refused the AWS credentials" + Self.explained(code)
        case .status(let code): return "the server answered \(code)"
        case .gaveUp(let last): return "the server did not deliver in time (\(last))"
        case .busy: return "too many reads are waiting for the server"
        case .setup(let why): return "cannot set up HTTP: \(why)"
        case .tls(let why): return "TLS: \(why) (is --ca-file right?)"
        case .cache(let why, _): return "cache: \(why)"
        }
    }

    /// What an S3 error code says about the credentials, for the message.
    private static func explained(_ code: String?) -> String {
        switch code {
        case "SignatureDoesNotMatch"?: return " (SignatureDoesNotMatch: the secret access key is wrong for this key id)"
        case "InvalidAccessKeyId"?: return " (InvalidAccessKeyId: the key id is unknown or was revoked)"
        case "ExpiredToken"?: return " (ExpiredToken: the session token has expired)"
        case "InvalidToken"?, "InvalidClientTokenId"?: return " (\(code ?? ""): the session token is not valid for this key id)"
        case "AccessDenied"?: return " (AccessDenied: these credentials may not read this object)"
        case let code?: return " (\(code))"
        case nil: return " (403)"
        }
    }

    /// The path an error is about, for messages (a cache directory).
    package var path: [UInt8]? {
        if case .cache(_, let path) = self { return path }
        return nil
    }

    /// Every remote failure is an I/O error to a reader.
    package var errno: Int32 { EIO }
}
