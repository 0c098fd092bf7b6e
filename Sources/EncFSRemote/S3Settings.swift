/// How an `s3://BUCKET/KEY` address becomes signed HTTP requests
/// (`--s3-endpoint`, `--s3-region`, `--s3-path-style`,
/// `--s3-virtual-hosted`, the credentials).
package struct S3Settings: Sendable, Equatable {
    /// Where the bucket's name goes.
    package enum Addressing: Sendable, Equatable {
        /// Virtual-hosted on AWS (path-style for a bucket name with a dot,
        /// which no wildcard certificate covers); path-style with a custom
        /// endpoint (MinIO, Ceph RGW and most others serve no bucket
        /// subdomains by default).
        case automatic
        /// `https://ENDPOINT/BUCKET/KEY`.
        case pathStyle
        /// `https://BUCKET.ENDPOINT/KEY`.
        case virtualHosted
    }

    /// `http(s)://host[:port]` of the service; nil: `AWS_ENDPOINT_URL_S3`,
    /// `AWS_ENDPOINT_URL`, else AWS's regional one.
    package var endpoint: [UInt8]?
    /// The region requests are signed for; nil: `AWS_REGION`,
    /// `AWS_DEFAULT_REGION`, the config file, else `us-east-1`.
    package var region: String?
    package var addressing: Addressing = .automatic
    /// The credentials; nil: found by ``AWSCredentialChain`` from the
    /// process's environment when the bundle is opened.
    package var credentials: AWSCredentialSource?

    package init() {}

    /// The region to sign for.
    var resolvedRegion: String { region ?? AWSCredentialChain.region(.current()) ?? "us-east-1" }

    /// The https (or the endpoint's http) address of `key` in `bucket`.
    ///
    /// - Throws: `RemoteError.invalidURL` for an endpoint that is not
    ///   `http(s)://host[:port]`.
    func address(bucket: [UInt8], key: [UInt8], region: String) throws(RemoteError) -> [UInt8] {
        let path = Self.encoded(key)
        guard let endpoint = endpoint ?? AWSCredentialChain.Environment.current().endpoint else {
            let host = Array("s3.\(region).amazonaws.com".utf8)
            if addressing == .pathStyle || (addressing == .automatic && bucket.contains(UInt8(ascii: "."))) {
                return Array("https://".utf8) + host + [UInt8(ascii: "/")] + bucket + [UInt8(ascii: "/")] + path
            }
            return Array("https://".utf8) + bucket + [UInt8(ascii: ".")] + host + [UInt8(ascii: "/")] + path
        }
        let lower = endpoint.map { $0 | ($0 >= 0x41 && $0 <= 0x5A ? 0x20 : 0) }
        let scheme = lower.starts(with: Array("https://".utf8)) ? 8 : lower.starts(with: Array("http://".utf8)) ? 7 : 0
        var host = Array(endpoint.dropFirst(scheme))
        while host.last == UInt8(ascii: "/") { host.removeLast() }
        guard scheme > 0, !host.isEmpty, host.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "/")
            && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") && $0 != UInt8(ascii: "@") }) else {
            throw .invalidURL("--s3-endpoint must be http://HOST[:PORT] or https://HOST[:PORT]")
        }
        let prefix = Array(endpoint.prefix(scheme))
        if addressing == .virtualHosted {
            return prefix + bucket + [UInt8(ascii: ".")] + host + [UInt8(ascii: "/")] + path
        }
        return prefix + host + [UInt8(ascii: "/")] + bucket + [UInt8(ascii: "/")] + path
    }

    /// `key` percent-encoded as Signature V4's canonical URI has it:
    /// unreserved bytes and `/` as they are, every other byte `%XX`.
    static func encoded(_ key: [UInt8]) -> [UInt8] {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for byte in key {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"), UInt8(ascii: "/"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            }
        }
        return out
    }
}
