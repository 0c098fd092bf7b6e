@testable import EncFSCLI
@testable import EncFSCore
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The one UTC time formatter (`ls -l`, `info`, every `--json` time, the
/// mount's log file): exact text at the edges of the calendar, and the same
/// fields as the C library's gmtime_r wherever that one answers.
final class RFC3339Tests: XCTestCase {
    private func json(_ seconds: Int64, _ nanoseconds: UInt32?) -> String { RFC3339.format(seconds: seconds, nanoseconds: nanoseconds) }
    private func readable(_ seconds: Int64) -> String { RFC3339.format(seconds: seconds, separator: .space) }
    private func column(_ seconds: Int64, _ nanoseconds: UInt32) -> String {
        RFC3339.format(seconds: seconds, nanoseconds: nanoseconds, separator: .space, zone: false)
    }

    func testFormat_Table() {
        let rows: [(seconds: Int64, nanoseconds: UInt32?, text: String, line: UInt)] = [
            (0, nil, "1970-01-01T00:00:00Z", #line),                            // the epoch
            (0, 0, "1970-01-01T00:00:00.000000000Z", #line),                    // nanoseconds present, zero
            (1_700_000_000, 5, "2023-11-14T22:13:20.000000005Z", #line),        // leading zeros kept
            (1_700_000_000, 999_999_999, "2023-11-14T22:13:20.999999999Z", #line),
            (-1, nil, "1969-12-31T23:59:59Z", #line),                           // negative: the second before
            (-1, 500_000_000, "1969-12-31T23:59:59.500000000Z", #line),         // nanoseconds count forward from it
            (-86_401, nil, "1969-12-30T23:59:59Z", #line),
            (951_782_400, nil, "2000-02-29T00:00:00Z", #line),                  // leap day of a leap century
            (1_709_164_800, nil, "2024-02-29T00:00:00Z", #line),                // leap day
            (4_107_542_399, nil, "2100-02-28T23:59:59Z", #line),                // 2100 is not a leap year
            (4_107_542_400, nil, "2100-03-01T00:00:00Z", #line),
            (-2_203_891_200, nil, "1900-03-01T00:00:00Z", #line),               // nor is 1900
            (-62_135_596_800, nil, "0001-01-01T00:00:00Z", #line),
            (-62_167_219_200, nil, "0000-01-01T00:00:00Z", #line),              // year 0 (ISO 8601's 1 BC)
            (-62_167_219_201, nil, "-0001-12-31T23:59:59Z", #line),             // before it: a signed year
            (253_402_300_799, nil, "9999-12-31T23:59:59Z", #line),              // RFC 3339's last second
            (253_402_300_800, nil, "10000-01-01T00:00:00Z", #line),             // beyond: the year grows
            (Int64.max, 999_999_999, "292277026596-12-04T15:30:07.999999999Z", #line), // beyond gmtime_r's int year
        ]
        for row in rows {
            XCTAssertEqual(json(row.seconds, row.nanoseconds), row.text, line: row.line)
        }
    }

    /// The human-readable forms: `info` puts a space for the `T` (RFC 3339
    /// allows it for readability), `ls -l`'s column also leaves the `Z` off.
    func testFormat_ReadableAndListingForms() {
        XCTAssertEqual(readable(0), "1970-01-01 00:00:00Z")
        XCTAssertEqual(readable(1_709_164_800), "2024-02-29 00:00:00Z")
        XCTAssertEqual(column(-1, 5), "1969-12-31 23:59:59.000000005")
        XCTAssertEqual(column(0, 0), "1970-01-01 00:00:00.000000000")
    }

    /// Every field as gmtime_r gives it, over seeded times spread across
    /// the years gmtime_r can represent (its year is an int).
    func testFormat_AgreesWithGmtime() {
        var generator = SeededGenerator(seed: 0x52_46_43_33_33_33_39)
        let limit: Int64 = 67_767_976_233_316_800 // about year 2^31 - 1: gmtime_r's last year
        var samples: [Int64] = [0, -1, 1, 86_399, 86_400, Int64(Int32.max), Int64(Int32.min)]
        for _ in 0..<20_000 { samples.append(Int64.random(in: -limit...limit, using: &generator)) }
        for _ in 0..<20_000 { samples.append(Int64.random(in: -20_000_000_000...20_000_000_000, using: &generator)) }
        for seconds in samples {
            var t = time_t(seconds)
            var parts = tm()
            guard gmtime_r(&t, &parts) != nil else { continue }
            let year = Int(parts.tm_year) + 1900
            let yearText = year < 0 ? "-" + String(-year).leftPadded(to: 4, with: "0") : String(year).leftPadded(to: 4, with: "0")
            func two(_ v: Int32) -> String { String(v).leftPadded(to: 2, with: "0") }
            let expected = "\(yearText)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))"
                + "T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
            XCTAssertEqual(json(seconds, nil), expected, "\(seconds)")
            if json(seconds, nil) != expected { return } // one failure says it; 40,000 would bury it
        }
    }
}
