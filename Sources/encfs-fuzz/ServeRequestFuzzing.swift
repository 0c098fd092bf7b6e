import EncFSServe

/// `serve-request`: encfs-serve's mapping of a request to bundle bytes,
/// the part of its HTTP that is its own (libmicrohttpd parses the rest):
/// the request target with its token and percent-decoding, the `Range`
/// header against a file size, and HTTP dates.
///
/// Input: byte 0 picks whether a token is required and whether a bearer
/// header carried it; bytes 1…8 are the file size; the rest up to the
/// first newline is the request target, after it the `Range` value.
enum ServeRequestFuzzing {
    static let token = Array("0123456789abcdef0123456789abcdef".utf8)

    static func run(_ input: UnsafeRawBufferPointer) {
        guard input.count >= 9 else { return }
        let bytes = Array(input)
        let flags = bytes[0]
        let size = bytes[1..<9].reduce(UInt64(0)) { $0 << 8 | UInt64($1) } >> (flags >> 2 & 0x3f)
        let rest = bytes[9...]
        let newline = rest.firstIndex(of: 0x0A) ?? rest.endIndex
        let target = Array(rest[rest.startIndex..<newline])
        let range = newline < rest.endIndex ? Array(rest[(newline + 1)...]) : nil

        let required = flags & 1 == 0 ? token : nil
        let bearer = flags & 2 != 0
        switch RequestTarget.map(target, token: required, bearer: bearer) {
        case .path(let path, _):
            FuzzTarget.require(!path.contains(0), "a mapped path holds NUL")
            if required != nil, !bearer {
                FuzzTarget.require(target.starts(with: [0x2F] + token + [0x2F]), "a path without the token was mapped")
            }
            let encoded = Array(RequestTarget.percentEncoded(path).utf8)
            FuzzTarget.require(RequestTarget.percentDecoded(encoded[...]) == path, "percent-encoding does not round-trip")
        case .tokenRoot:
            FuzzTarget.require(target == [0x2F] + token, "tokenRoot for another target")
        case .unauthorized:
            FuzzTarget.require(required != nil, "unauthorized without a token")
        case .malformed:
            break
        }

        switch ByteRangeRequest.parse(range, size: size) {
        case .single(let start, let length):
            FuzzTarget.require(length > 0 && start < size && length <= size - start, "range \(start)+\(length) outside \(size)")
        case .unsatisfiable:
            FuzzTarget.require(range != nil, "unsatisfiable without a Range header")
        case .whole:
            break
        }

        if let seconds = HTTPDate.parse(target) {
            FuzzTarget.require(HTTPDate.parse(Array(HTTPDate.format(seconds).utf8)) == seconds, "HTTP date does not round-trip")
        }
    }
}
