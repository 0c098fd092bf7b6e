internal import CCurl
import CryptCore
#if canImport(Glibc)
import Glibc
#endif

/// One libcurl easy handle: one kept-alive connection (HTTP/1.1, or a
/// stream of a shared HTTP/2 connection when the server offers it) that
/// fetches one byte range per request into the caller's buffer.
///
/// Not safe from two threads at once: ``HTTPByteSource`` lends each
/// connection to one request at a time, handing it over through its
/// pool's mutex, hence `@unchecked Sendable`.
final class HTTPConnection: @unchecked Sendable {
    /// What one request got.
    struct Response {
        /// libcurl's result: 0 when an HTTP answer arrived.
        var curlCode: Int32
        /// libcurl's text for ``curlCode`` (no address in it).
        var curlMessage: String
        /// libcurl's own account of a failed transfer ("SSL certificate
        /// problem: …"), empty when it gave none. Shown for certificate
        /// failures only: other texts may name the host.
        var curlDetail: String
        /// The failure was the certificate's (not trusted, or the CA file
        /// unusable), which no retry changes.
        var certificateRefused: Bool {
            [CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM, CURLE_SSL_ISSUER_ERROR]
                .contains { Int32($0.rawValue) == curlCode }
        }
        var status: Int
        /// Body bytes written to the buffer.
        var bodyLength: Int
        /// The body was longer than the buffer (a 200 to a range request).
        var overflowed: Bool
        /// Total size from `Content-Range: bytes a-b/TOTAL`.
        var totalSize: UInt64?
        /// First byte of the range the server sent.
        var rangeStart: UInt64?
        var etag: [UInt8]?
        /// `Retry-After` in seconds.
        var retryAfter: Int?
        /// The S3 error code of an error answer (`<Code>…</Code>` in its
        /// body), letters only.
        var errorCode: String?
        /// The generation of the credentials the request was signed with
        /// (``AWSCredentialSource``), 0 when unsigned.
        var credentialsGeneration = 0
    }

    /// Bytes of response headers kept for parsing.
    private static let headerCapacity = 16 << 10
    private let curl: LibCurl
    private let handle: UnsafeMutableRawPointer
    private let sink: UnsafeMutablePointer<ccurl_sink>
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let headers: [[UInt8]]
    /// The ETag sent as `If-Match`.
    private var matchTag: [UInt8]?
    /// Signs each request (AWS Signature V4, ``AWSSignatureV4``) with
    /// these; nil for an unsigned address.
    private let credentials: AWSCredentialSource?
    /// The signer of an `s3://` address's requests; nil when unsigned.
    private let signer: AWSSignatureV4?
    /// `host[:port]` and the path of the address, as sent and signed.
    private let signedHost: [UInt8]
    private let signedPath: [UInt8]
    /// The header list of the request in flight (a signed request's own),
    /// freed at the next one.
    private var requestList: UnsafeMutablePointer<curl_slist>?

    /// Sets up a handle for `location` with the options every request
    /// shares.
    ///
    /// - Parameters:
    ///   - options: the extra request headers (secret: handed to libcurl
    ///     only), the CA file, the deadline that sets the stall window.
    ///   - ifMatch: the pinned ETag, sent as `If-Match` on every request.
    /// - Throws: `RemoteError.setup` when libcurl refuses.
    ///   - abandon: a flag another thread sets to end the transfer in
    ///     flight (its source was set aside); nil: never.
    init(location: RemoteLocation, options: RemoteOptions, ifMatch: [UInt8]?,
         abandon: UnsafePointer<Int32>? = nil) throws(RemoteError) {
        let curl = try LibCurl.shared()
        self.curl = curl
        guard let handle = curl.easyInit() else { throw .setup("curl_easy_init failed") }
        self.handle = handle
        sink = .allocate(capacity: 1)
        sink.initialize(to: ccurl_sink())
        ccurl_sink_init(sink)
        sink.pointee.headers = .allocate(capacity: Self.headerCapacity)
        sink.pointee.headers_capacity = Self.headerCapacity
        sink.pointee.abandon = abandon
        var ok = location.url.withCString { ccurl_setopt_string(curl.setopt, handle, CURLOPT_URL, $0) } == CURLE_OK
        ok = ok && ccurl_set_sink(curl.setopt, handle, sink) == CURLE_OK
        // No signals from libcurl in a multithreaded daemon; timeouts are
        // set per request.
        ok = ok && ccurl_setopt_long(curl.setopt, handle, CURLOPT_NOSIGNAL, 1) == CURLE_OK
        ok = ok && ccurl_setopt_long(curl.setopt, handle, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS)) == CURLE_OK
        ok = ok && ccurl_setopt_long(curl.setopt, handle, CURLOPT_TCP_KEEPALIVE, 1) == CURLE_OK
        ok = ok && ccurl_setopt_long(curl.setopt, handle, CURLOPT_PROTOCOLS, Int(CURLPROTO_HTTP | CURLPROTO_HTTPS)) == CURLE_OK
        // Bytes are compared to the header's sizes: no transfer encoding.
        ok = ok && ccurl_setopt_long(curl.setopt, handle, CURLOPT_HTTP_CONTENT_DECODING, 0) == CURLE_OK
        // A stall: less than 1 KiB/s for 10 s (a third of the read's
        // deadline when that is shorter, at least 1 s) ends the attempt,
        // which is then retried, so that one stalled connection does not
        // use up the whole deadline.
        let stallSeconds = options.netTimeout == 0 ? 10 : min(10, max(1, options.netTimeout / 3))
        ok = ok && ccurl_setopt_long(curl.setopt, handle, CURLOPT_LOW_SPEED_LIMIT, 1024) == CURLE_OK
        ok = ok && ccurl_setopt_long(curl.setopt, handle, CURLOPT_LOW_SPEED_TIME, stallSeconds) == CURLE_OK
        if let caFile = options.caFile {
            ok = ok && caFile.withCString { ccurl_setopt_string(curl.setopt, handle, CURLOPT_CAINFO, $0) } == CURLE_OK
        }
        headers = options.headers
        credentials = location.signingRegion == nil ? nil : options.s3.credentials
        signer = location.signingRegion.map { AWSSignatureV4(region: $0) }
        // scheme://host[:port]/path: an s3:// address's, made by
        // S3Settings (no user information, no query).
        let afterScheme = location.url.firstRange(of: Array("://".utf8)).map { location.url[$0.upperBound...] } ?? location.url[...]
        let slash = afterScheme.firstIndex(of: UInt8(ascii: "/")) ?? afterScheme.endIndex
        signedHost = Array(afterScheme[..<slash])
        signedPath = slash < afterScheme.endIndex ? Array(afterScheme[slash...]) : [UInt8(ascii: "/")]
        if signer != nil { ok = ok && credentials != nil }
        ok = ok && (try? requireMatch(ifMatch)) != nil
        guard ok else {
            Self.release(curl: curl, handle: handle, sink: sink, list: headerList)
            throw .setup("libcurl refused an option")
        }
    }

    /// Sends `If-Match: etag` with every request from now on (nothing
    /// when nil), besides the extra headers.
    ///
    /// - Throws: `RemoteError.setup` when libcurl refuses.
    func requireMatch(_ etag: [UInt8]?) throws(RemoteError) {
        matchTag = etag
        let list = try headerList(headers + (etag.map { [Array("If-Match: ".utf8) + $0] } ?? []))
        guard ccurl_setopt_pointer(curl.setopt, handle, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(list)) == CURLE_OK else {
            curl.freeHeaders(list)
            throw .setup("libcurl refused the request headers")
        }
        curl.freeHeaders(headerList)
        headerList = list
    }

    /// `lines` as a libcurl header list (which copies each line), made
    /// through one NUL-terminated scratch line wiped afterwards (the lines
    /// are secret).
    ///
    /// - Throws: `RemoteError.setup` when out of memory.
    private func headerList(_ lines: [[UInt8]]) throws(RemoteError) -> UnsafeMutablePointer<curl_slist>? {
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: (lines.map(\.count).max() ?? 0) + 1, alignment: 1)
        defer {
            SecureBytes.wipe(scratch)
            scratch.deallocate()
        }
        var list: UnsafeMutablePointer<curl_slist>?
        for line in lines {
            line.withUnsafeBytes { scratch.copyMemory(from: $0) }
            scratch[line.count] = 0
            guard let longer = curl.slistAppend(list, scratch.baseAddress?.assumingMemoryBound(to: CChar.self)) else {
                curl.freeHeaders(list)
                throw .setup("out of memory for request headers")
            }
            list = longer
        }
        return list
    }

    /// Signs the next request with the current credentials: its own
    /// header list, the extra headers and `If-Match` plus `Host`,
    /// `x-amz-content-sha256: UNSIGNED-PAYLOAD` (S3 refuses a GET whose
    /// payload hash is missing), `x-amz-date`, `x-amz-security-token` and
    /// `Authorization`. Our copies of the lines are wiped here, the list
    /// (libcurl's copies) once the request ends (``endRequest()``).
    ///
    /// - Returns: the generation the request is signed with; 0 unsigned.
    private func signRequest() -> Int {
        guard let credentials, let signer else { return 0 }
        let (current, generation) = credentials.current()
        let date = AWSSignatureV4.amzDate()
        let payload = Array("UNSIGNED-PAYLOAD".utf8)
        var token = current.sessionToken.map { $0.withUnsafeBytes { Array($0) } }
        var signed: [(name: [UInt8], value: [UInt8])] = [(Array("host".utf8), signedHost), (Array("x-amz-content-sha256".utf8), payload),
                                                         (Array("x-amz-date".utf8), date)]
        if let token { signed.append((Array("x-amz-security-token".utf8), token)) }
        var lines = headers + (matchTag.map { [Array("If-Match: ".utf8) + $0] } ?? [])
        lines += [Array("Host: ".utf8) + signedHost, Array("x-amz-content-sha256: ".utf8) + payload, Array("x-amz-date: ".utf8) + date]
        if let token { lines.append(Array("x-amz-security-token: ".utf8) + token) }
        defer {
            token?.withUnsafeMutableBytes { SecureBytes.wipe($0) }
            for index in signed.indices { signed[index].value.withUnsafeMutableBytes { SecureBytes.wipe($0) } }
            for index in lines.indices { lines[index].withUnsafeMutableBytes { SecureBytes.wipe($0) } }
        }
        // A failure sends the request unsigned: the server's refusal says so.
        guard var authorization = try? signer.authorization(method: "GET", path: signedPath, query: [], headers: signed,
                                                            payloadHash: payload, amzDate: date, credentials: current) else {
            return generation
        }
        lines.append(authorization)
        // Dropped, not wiped: its one buffer is now `lines`'s, wiped there.
        authorization = []
        guard let list = try? headerList(lines) else { return generation }
        guard ccurl_setopt_pointer(curl.setopt, handle, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(list)) == CURLE_OK else {
            curl.freeHeaders(list)
            return generation
        }
        requestList = list
        return generation
    }

    /// Wipes and frees the header list of the signed request that just
    /// ended (libcurl reads it only during the transfer), so that no past
    /// request's signature or session token stays in memory; the shared
    /// headers serve again until the next request is signed.
    private func endRequest() {
        guard let list = requestList else { return }
        _ = ccurl_setopt_pointer(curl.setopt, handle, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(headerList))
        curl.freeHeaders(list)
        requestList = nil
    }

    deinit {
        Self.release(curl: curl, handle: handle, sink: sink, list: headerList)
        curl.freeHeaders(requestList)
    }

    private static func release(curl: LibCurl, handle: UnsafeMutableRawPointer, sink: UnsafeMutablePointer<ccurl_sink>,
                                list: UnsafeMutablePointer<curl_slist>?) {
        curl.easyCleanup(handle)
        ccurl_sink_destroy(sink)
        curl.freeHeaders(list)
        sink.pointee.headers.deallocate()
        sink.deinitialize(count: 1)
        sink.deallocate()
    }

    /// Ends the request in flight now, from any thread (its socket is shut
    /// down: ``get(offset:count:into:timeoutMilliseconds:)`` returns a
    /// transfer error); nothing when none is.
    ///
    /// Why: the abandon flag is read by libcurl's progress callback, about
    /// once a second while no data flows, and a transfer stalled at a
    /// source set aside kept its read-ahead thread that long after the
    /// failover (docs/PERFORMANCE.md, "A fleet").
    func cut() { ccurl_sink_cut(sink) }

    /// GETs `count` bytes at `offset` into `buffer` (the body may not
    /// exceed it).
    ///
    /// - Parameter timeoutMilliseconds: the whole request's limit; 0 none.
    func get(offset: UInt64, count: Int, into buffer: UnsafeMutableRawBufferPointer, timeoutMilliseconds: Int) -> Response {
        precondition(count >= 1 && count <= buffer.count, "internal error: range of \(count) bytes")
        sink.pointee.body = buffer.baseAddress?.assumingMemoryBound(to: UInt8.self)
        sink.pointee.body_capacity = count
        sink.pointee.body_length = 0
        sink.pointee.body_overflow = 0
        sink.pointee.headers_length = 0
        sink.pointee.error.0 = 0
        let generation = signRequest()
        let range = "\(offset)-\(offset + UInt64(count) - 1)"
        _ = range.withCString { ccurl_setopt_string(curl.setopt, handle, CURLOPT_RANGE, $0) }
        _ = ccurl_setopt_long(curl.setopt, handle, CURLOPT_TIMEOUT_MS, timeoutMilliseconds)
        _ = ccurl_setopt_long(curl.setopt, handle, CURLOPT_CONNECTTIMEOUT_MS,
                              timeoutMilliseconds == 0 ? 10_000 : min(timeoutMilliseconds, 10_000))
        let code = curl.easyPerform(handle)
        endRequest()
        var status = 0
        _ = ccurl_getinfo_long(curl.getinfo, handle, CURLINFO_RESPONSE_CODE, &status)
        var response = Response(curlCode: Int32(code.rawValue), curlMessage: curl.easyStrerror(code).map { String(cString: $0) } ?? "libcurl error \(code.rawValue)",
                                curlDetail: String(cString: ccurl_sink_error(sink)),
                                status: status, bodyLength: sink.pointee.body_length,
                                overflowed: sink.pointee.body_overflow != 0)
        parseHeaders(into: &response)
        response.credentialsGeneration = generation
        if status >= 400, let body = sink.pointee.body {
            response.errorCode = Self.errorCode(in: UnsafeRawBufferPointer(start: body, count: sink.pointee.body_length))
        }
        sink.pointee.body = nil
        return response
    }

    /// Content-Range, ETag and Retry-After from the captured header block.
    private func parseHeaders(into response: inout Response) {
        let length = min(sink.pointee.headers_length, Self.headerCapacity)
        let block = Array(UnsafeRawBufferPointer(start: sink.pointee.headers, count: length))
        for line in block.split(separator: 0x0A) {
            var line = Array(line)
            if line.last == 0x0D { line.removeLast() }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
            let value = Array(line[(colon + 1)...].drop { $0 == 0x20 || $0 == 0x09 })
            switch name {
            case "content-range": Self.parseContentRange(value, into: &response)
            case "etag": response.etag = value
            case "retry-after": response.retryAfter = Int(String(decoding: value, as: UTF8.self))
            default: break
            }
        }
    }

    /// The `<Code>` of an S3 error document: up to 64 ASCII letters, nil
    /// otherwise (the text comes from the server).
    static func errorCode(in body: UnsafeRawBufferPointer) -> String? {
        let open = Array("<Code>".utf8)
        guard body.count > open.count,
              let at = (0...(body.count - open.count)).first(where: { i in open.indices.allSatisfy { body[i + $0] == open[$0] } }) else {
            return nil
        }
        let letters = body[(at + open.count)...].prefix { (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }
        guard !letters.isEmpty, letters.count <= 64 else { return nil }
        return String(decoding: letters, as: UTF8.self)
    }

    /// `bytes a-b/TOTAL` (or `bytes */TOTAL` with a 416).
    private static func parseContentRange(_ value: [UInt8], into response: inout Response) {
        let text = String(decoding: value, as: UTF8.self)
        guard text.hasPrefix("bytes "), let slash = text.lastIndex(of: "/") else { return }
        response.totalSize = UInt64(text[text.index(after: slash)...])
        let range = text[text.index(text.startIndex, offsetBy: 6)..<slash]
        if let dash = range.firstIndex(of: "-") { response.rangeStart = UInt64(range[..<dash]) }
    }
}
