/// What a `Range` header asks of a file of known size (RFC 9110 §14):
/// the one parser, pure, fuzzed by `encfs-fuzz serve-request`.
///
/// Several ranges are answered with the whole file (200), which RFC 9110
/// allows, unless they come down to one range once overlapping and
/// adjacent ones are merged: a multipart body would cost a boundary
/// protocol for a case browsers do not send for pages and media.
package enum ByteRangeRequest: Equatable, Sendable {
    /// No range asked, or one to ignore (another unit, bad syntax, several
    /// disjoint ranges, more than ``maximumRanges``): 200, the whole file.
    case whole
    /// One range: 206 with `Content-Range`.
    case single(start: UInt64, length: UInt64)
    /// No range overlaps the file: 416 with `Content-Range: bytes */SIZE`.
    case unsatisfiable

    /// More ranges than this in one header are not looked at (the whole
    /// file is sent): a header of thousands of tiny ranges costs the
    /// server work for nothing a client needs.
    package static let maximumRanges = 64

    /// Parses `header` (the `Range` value, nil when absent) for a file of
    /// `size` bytes.
    package static func parse(_ header: [UInt8]?, size: UInt64) -> ByteRangeRequest {
        guard let header else { return .whole }
        let prefix = Array("bytes=".utf8)
        guard header.count > prefix.count,
              header[0..<prefix.count].elementsEqual(prefix, by: { lowercase($0) == $1 }) else { return .whole }
        var ranges: [(start: UInt64, end: UInt64)] = []  // end exclusive
        var specs = 0
        for raw in header[prefix.count...].split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
            let spec = trimmed(raw)
            if spec.isEmpty { continue }  // RFC 9110 list syntax allows empty elements
            specs += 1
            guard specs <= maximumRanges else { return .whole }
            guard let parsed = parseSpec(spec, size: size) else { return .whole }
            if let range = parsed { ranges.append(range) }
        }
        guard specs > 0 else { return .whole }
        guard !ranges.isEmpty else { return .unsatisfiable }
        ranges.sort { $0.start < $1.start }
        var merged = ranges[0]
        for range in ranges.dropFirst() {
            guard range.start <= merged.end else { return .whole }
            merged.end = max(merged.end, range.end)
        }
        return .single(start: merged.start, length: merged.end - merged.start)
    }

    /// One `first-last`, `first-` or `-suffix`: nil for bad syntax, `.some(nil)`
    /// for a valid range that does not overlap the file.
    private static func parseSpec(_ spec: ArraySlice<UInt8>, size: UInt64) -> (start: UInt64, end: UInt64)?? {
        guard let dash = spec.firstIndex(of: UInt8(ascii: "-")) else { return nil }
        let first = spec[spec.startIndex..<dash]
        let last = spec[(dash + 1)...]
        if first.isEmpty {
            guard let suffix = number(last) else { return nil }
            guard suffix > 0, size > 0 else { return .some(nil) }
            return .some((size - min(suffix, size), size))
        }
        guard let start = number(first) else { return nil }
        var end = UInt64.max
        if !last.isEmpty {
            guard let lastByte = number(last), lastByte >= start else { return nil }
            end = lastByte == .max ? .max : lastByte + 1
        }
        guard start < size else { return .some(nil) }
        return .some((start, min(end, size)))
    }

    /// A decimal number without sign, nil when empty, not digits, or past
    /// `UInt64.max`.
    private static func number(_ digits: ArraySlice<UInt8>) -> UInt64? {
        guard !digits.isEmpty else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else { return nil }
            value = sum
        }
        return value
    }

    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var slice = bytes
        while let first = slice.first, first == 0x20 || first == 0x09 { slice = slice.dropFirst() }
        while let last = slice.last, last == 0x20 || last == 0x09 { slice = slice.dropLast() }
        return slice
    }

    private static func lowercase(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
    }
}
