import CryptCore
import EncFSRemote
#if canImport(Glibc)
import Glibc
#endif

/// Times the signing of one `s3://` request (``AWSSignatureV4``) in CPU
/// time, for Scripts/bench/bench_fleet.py (`--fleet-parts sigv4`): that
/// time, times the requests per second of a cold sequential read, bounds
/// the share of the read's time signing can take, however noisy the
/// machine's wall-clock figures are.
///
/// Usage: encfs-sigv4-bench [COUNT]  (default 20000 signatures; prints
/// one line, `sigv4 COUNT NANOSECONDS-PER-SIGNATURE`).
///
/// Each signature is made as a mount makes one: a session token, the four
/// signed headers, a fresh `x-amz-date`, the `Authorization` line wiped
/// afterwards. Not timed: building libcurl's header list (seven short
/// copies), the same for an unsigned request but for three lines.
@main
struct SigV4Timing {
    static func main() {
        let count = CommandLine.arguments.dropFirst().first.flatMap { Int($0) }.map { max(1, $0) } ?? 20_000
        let credentials = AWSCredentials(accessKeyID: Array("AKIABENCHMARKKEY0000".utf8),
                                         secretAccessKey: SecureBytes(copying: Array("bench/secret/access/key/of/40/characters".utf8)),
                                         sessionToken: SecureBytes(copying: [UInt8](repeating: UInt8(ascii: "T"), count: 800)))
        let signer = AWSSignatureV4(region: "us-east-1")
        let host = Array("127.0.0.1:9000".utf8)
        let path = Array("/fleet/app/bundle.encfs".utf8)
        let payload = Array("UNSIGNED-PAYLOAD".utf8)
        var sink = 0
        let started = cpuNanoseconds()
        for _ in 0..<count {
            let date = AWSSignatureV4.amzDate()
            var token = credentials.sessionToken.map { $0.withUnsafeBytes { Array($0) } } ?? []
            let headers: [(name: [UInt8], value: [UInt8])] = [(Array("host".utf8), host), (Array("x-amz-content-sha256".utf8), payload),
                                                              (Array("x-amz-date".utf8), date), (Array("x-amz-security-token".utf8), token)]
            guard var line = try? signer.authorization(method: "GET", path: path, query: [], headers: headers, payloadHash: payload,
                                                       amzDate: date, credentials: credentials) else {
                let message = "encfs-sigv4-bench: error: signing failed\n"
                _ = message.withCString { write(2, $0, strlen($0)) }
                exit(1)
            }
            sink &+= Int(line[line.count - 1])
            line.withUnsafeMutableBytes { SecureBytes.wipe($0) }
            token.withUnsafeMutableBytes { SecureBytes.wipe($0) }
        }
        let elapsed = cpuNanoseconds() - started
        // `sink` keeps the signatures from being optimized away.
        print("sigv4 \(count) \(elapsed / UInt64(count))" + (sink == Int.min ? " " : ""))
    }

    /// This process's CPU time (`clock_gettime(CLOCK_PROCESS_CPUTIME_ID)`).
    static func cpuNanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }
}
