@testable import EncFSCore

/// An index record built field by field, byte by byte from the layout in
/// docs/FORMAT.md (not through `IndexRecord`), for the record and rule
/// table tests.
struct RawIndexRecord {
    var parent: UInt32 = 0
    var kind: UInt8 = IndexEntry.Kind.file.rawValue
    var flags: UInt8 = 0
    var mode: UInt16 = 0o644
    var nameOffset: UInt32 = 0
    var nameLength: UInt16 = 1
    var reserved: UInt16 = 0
    var seconds: Int64 = 1_700_000_000
    var nanoseconds: UInt32 = 0
    var table: UInt32 = 0
    var count: UInt64 = 0
    var first: UInt64 = 0
    var id = [UInt8](repeating: 0, count: 16)

    var bytes: [UInt8] {
        var out: [UInt8] = []
        out.appendLE(parent)
        out.append(kind)
        out.append(flags)
        out.appendLE(mode)
        out.appendLE(nameOffset)
        out.appendLE(nameLength)
        out.appendLE(reserved)
        out.appendLE(seconds)
        out.appendLE(nanoseconds)
        out.appendLE(table)
        out.appendLE(count)
        out.appendLE(first)
        return out + id
    }

    /// Calls `body` with a view of the record's bytes.
    func withRecord<R>(_ body: (IndexRecord) throws -> R) rethrows -> R {
        try bytes.withUnsafeBytes { try body(IndexRecord($0)) }
    }
}

/// The violation a rule reports, nil when it passes.
func violation(_ rule: () throws -> Void) -> String? {
    do {
        try rule()
        return nil
    } catch let violation as IndexRules.Violation {
        return violation.why
    } catch {
        return "not a violation: \(error)"
    }
}
