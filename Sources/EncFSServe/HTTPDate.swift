#if canImport(Glibc)
import Glibc
#endif

/// Times as HTTP writes them (IMF-fixdate, RFC 9110 §5.6.7):
/// `Sun, 06 Nov 1994 08:49:37 GMT`, for `Last-Modified` and
/// `If-Modified-Since`.
package enum HTTPDate {
    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// `seconds` since the epoch, in UTC.
    package static func format(_ seconds: Int64) -> String {
        var time = time_t(seconds)
        var parts = tm()
        guard gmtime_r(&time, &parts) != nil, parts.tm_year >= -1900, parts.tm_year <= 9999 - 1900 else {
            return "Thu, 01 Jan 1970 00:00:00 GMT"
        }
        // Written into a buffer on the stack, then one string: built by
        // interpolation it took a dozen allocations, on every request.
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 29) { text in
            func put(_ name: String, at offset: Int) {
                for (i, byte) in name.utf8.enumerated() { text[offset + i] = byte }
            }
            func put(_ n: Int32, digits: Int, at offset: Int) {
                var n = n
                for i in stride(from: digits - 1, through: 0, by: -1) {
                    text[offset + i] = UInt8(ascii: "0") + UInt8(n % 10)
                    n /= 10
                }
            }
            // "Sun, 06 Nov 1994 08:49:37 GMT"
            put(days[Int(parts.tm_wday)], at: 0)
            put(", ", at: 3)
            text[7] = 0x20
            put(months[Int(parts.tm_mon)], at: 8)
            text[11] = 0x20
            text[16] = 0x20
            text[19] = UInt8(ascii: ":")
            text[22] = UInt8(ascii: ":")
            put(" GMT", at: 25)
            put(parts.tm_mday, digits: 2, at: 5)
            put(parts.tm_year + 1900, digits: 4, at: 12)
            put(parts.tm_hour, digits: 2, at: 17)
            put(parts.tm_min, digits: 2, at: 20)
            put(parts.tm_sec, digits: 2, at: 23)
            return String(decoding: UnsafeBufferPointer(text), as: UTF8.self)
        }
    }

    /// Seconds since the epoch of an IMF-fixdate, nil for anything else
    /// (the obsolete formats are not accepted: a condition that cannot be
    /// read is ignored, which only costs a full response).
    package static func parse(_ text: [UInt8]) -> Int64? {
        // "Sun, 06 Nov 1994 08:49:37 GMT": fixed positions.
        guard text.count == 29, text[3] == UInt8(ascii: ","), text[4] == 0x20, text[7] == 0x20, text[11] == 0x20,
              text[16] == 0x20, text[19] == UInt8(ascii: ":"), text[22] == UInt8(ascii: ":"),
              text[25...].elementsEqual(Array(" GMT".utf8)) else { return nil }
        func number(_ range: Range<Int>) -> Int32? {
            var value: Int32 = 0
            for byte in text[range] {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int32(byte - UInt8(ascii: "0"))
            }
            return value
        }
        let monthName = String(decoding: text[8..<11], as: UTF8.self)
        guard let day = number(5..<7), let month = months.firstIndex(of: monthName), let year = number(12..<16),
              let hour = number(17..<19), let minute = number(20..<22), let second = number(23..<25),
              day >= 1, day <= 31, hour < 24, minute < 60, second < 61, year >= 1970 else { return nil }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = Int32(month)
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        return Int64(timegm(&parts))
    }
}
