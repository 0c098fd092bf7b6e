import EncFSCore

/// What the server answers one request with, decided by
/// ``RequestHandler`` and sent by ``HTTPEndpoint`` (the only code that
/// speaks libmicrohttpd).
struct Reply {
    /// What follows the headers.
    enum Body {
        /// Nothing (304, 405, errors: the status says it).
        case empty
        /// A generated page (a directory listing).
        case bytes([UInt8])
        /// `length` bytes of a file from `start`, decrypted as they are
        /// sent (``BodyStream``).
        case file(IndexEntry, start: UInt64, length: UInt64)
    }

    var status: UInt32
    var headers: [(String, String)] = []
    var body: Body = .empty

    init(_ status: UInt32, headers: [(String, String)] = [], body: Body = .empty) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}
