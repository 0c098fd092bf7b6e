/// Times as text, in UTC: the one formatter behind `encfs-inspect ls -l`
/// and `info`, every `--json` time, and the mount's log file.
///
/// `2026-01-31T12:00:00Z`, `2026-01-31T12:00:00.000000001Z` with
/// nanoseconds: RFC 3339's date-time (section 5.6), which JSON readers
/// parse. The date is computed from the seconds alone (days to a
/// proleptic Gregorian date, Howard Hinnant's `civil_from_days`), not with
/// `gmtime_r`: that one fails for a year past its `int`, and a bundle's
/// mtime is whatever its packer wrote. Every `Int64` has a text: a year
/// past 9999 (which RFC 3339 cannot write) grows digits, a year before 0
/// gets a sign (`-0001-12-31T23:59:59Z`).
package enum RFC3339 {
    /// What stands between the date and the time.
    package enum Separator: String, Sendable {
        /// `T`: RFC 3339's own, for machines.
        case t = "T"
        /// A space, which RFC 3339 allows "for the sake of readability".
        case space = " "
    }

    /// `seconds` since the epoch (and `nanoseconds` into that second, shown
    /// as nine digits when given) as text.
    ///
    /// - Parameters:
    ///   - separator: `T`, or a space for people.
    ///   - zone: whether `Z` ends the text. Only `ls -l`'s column leaves it
    ///     off, as it always has: scripts cut that column.
    package static func format(seconds: Int64, nanoseconds: UInt32? = nil, separator: Separator = .t,
                               zone: Bool = true) -> String {
        var (days, second) = seconds.quotientAndRemainder(dividingBy: 86_400)
        if second < 0 { // floored: the second before the epoch is 23:59:59 of the day before
            days -= 1
            second += 86_400
        }
        let date = civilDate(fromDays: days)
        var text = yearText(date.year) + "-" + digits(date.month, 2) + "-" + digits(date.day, 2) + separator.rawValue
        text += digits(second / 3600, 2) + ":" + digits(second / 60 % 60, 2) + ":" + digits(second % 60, 2)
        if let nanoseconds { text += "." + digits(Int64(nanoseconds), 9) }
        return zone ? text + "Z" : text
    }

    /// The proleptic Gregorian date `days` after 1970-01-01 (Hinnant,
    /// "chrono-Compatible Low-Level Date Algorithms"): days are counted in
    /// 400-year eras from 0000-03-01, so the leap day ends a year. No
    /// step overflows for any `Int64` day count derived from seconds.
    static func civilDate(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468 // days since 0000-03-01
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097 // 0...146096
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365 // 0...399
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100) // 0...365, from March 1
        let shiftedMonth = (5 * dayOfYear + 2) / 153 // 0 is March
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// At least four digits; a sign before a year below 0.
    private static func yearText(_ year: Int64) -> String {
        year < 0 ? "-" + digits(-year, 4) : digits(year, 4)
    }

    /// `value` (not negative) with leading zeros up to `width`.
    private static func digits(_ value: Int64, _ width: Int) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }
}
