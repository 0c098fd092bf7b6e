@testable import EncFSCore
import XCTest

/// A `BundleError` with its free-text reasons dropped, so tests can compare
/// the case and the values that matter (chunk index, version, lengths,
/// errno) with `==`. Built by an exhaustive switch: a new `BundleError` case
/// does not compile here until the tests know about it.
enum ExpectedBundleError: Equatable, CustomStringConvertible {
    case notABundle
    case unsupportedVersion(UInt16)
    case corruptHeader
    case headerAuthenticationFailed
    case wrongKey(slotKinds: [String])
    case corruptIndex
    case lengthMismatch(expected: UInt64, actual: UInt64)
    case corruptChunk(entry: Int, chunk: UInt64)
    case notFound
    case notADirectory
    case isADirectory
    case io(errno: Int32)
    case sourceChanged(path: [UInt8])
    case limitExceeded
    case crypto
    case noKeyGiven
    case invalidCompressionLevel(Int)
    case invalidChunkSize(log2: Int)
    case sourceUnreadable(errno: Int32)
    case unknownSlot(fingerprint: String)
    case lastSlotRemoved
    case removedSlotKeyGiven(fingerprint: String)
    case bundleReplaced
    case slotsNotCarriedOver([String])
    case externalSymlink(path: [UInt8], target: [UInt8])
    case scryptMemoryLimit(slot: Int, needs: UInt64, limit: UInt64)
    case notSigned
    case untrustedSigner(fingerprint: String)
    case badSignature
    case unsupportedSignature(version: UInt8)
    case unexpectedBundleID(expected: [UInt8], actual: [UInt8])

    init(_ error: BundleError) {
        switch error {
        case .notABundle: self = .notABundle
        case .unsupportedVersion(let v): self = .unsupportedVersion(v)
        case .corruptHeader: self = .corruptHeader
        case .headerAuthenticationFailed: self = .headerAuthenticationFailed
        case .wrongKey(let kinds): self = .wrongKey(slotKinds: kinds)
        case .corruptIndex: self = .corruptIndex
        case .lengthMismatch(let expected, let actual): self = .lengthMismatch(expected: expected, actual: actual)
        case .corruptChunk(let entry, let chunk): self = .corruptChunk(entry: entry, chunk: chunk)
        case .notFound: self = .notFound
        case .notADirectory: self = .notADirectory
        case .isADirectory: self = .isADirectory
        case .io(let code, _, _): self = .io(errno: code)
        case .sourceChanged(let path, _): self = .sourceChanged(path: path)
        case .limitExceeded: self = .limitExceeded
        case .crypto: self = .crypto
        case .noKeyGiven: self = .noKeyGiven
        case .invalidCompressionLevel(let level): self = .invalidCompressionLevel(level)
        case .invalidChunkSize(let log2): self = .invalidChunkSize(log2: log2)
        case .sourceUnreadable(let code, _): self = .sourceUnreadable(errno: code)
        case .unknownSlot(let fingerprint): self = .unknownSlot(fingerprint: fingerprint)
        case .lastSlotRemoved: self = .lastSlotRemoved
        case .removedSlotKeyGiven(_, let fingerprint): self = .removedSlotKeyGiven(fingerprint: fingerprint)
        case .bundleReplaced: self = .bundleReplaced
        case .slotsNotCarriedOver(let slots): self = .slotsNotCarriedOver(slots)
        case .externalSymlink(let path, let target): self = .externalSymlink(path: path, target: target)
        case .scryptMemoryLimit(let slot, let needs, let limit): self = .scryptMemoryLimit(slot: slot, needs: needs, limit: limit)
        case .notSigned: self = .notSigned
        case .untrustedSigner(let fingerprint): self = .untrustedSigner(fingerprint: fingerprint)
        case .badSignature: self = .badSignature
        case .unsupportedSignature(let version): self = .unsupportedSignature(version: version)
        case .unexpectedBundleID(let expected, let actual): self = .unexpectedBundleID(expected: expected, actual: actual)
        }
    }

    var description: String {
        switch self {
        case .notABundle: return "notABundle"
        case .unsupportedVersion(let v): return "unsupportedVersion(\(v))"
        case .corruptHeader: return "corruptHeader"
        case .headerAuthenticationFailed: return "headerAuthenticationFailed"
        case .wrongKey(let kinds): return "wrongKey(slotKinds: \(kinds))"
        case .corruptIndex: return "corruptIndex"
        case .lengthMismatch(let expected, let actual): return "lengthMismatch(expected: \(expected), actual: \(actual))"
        case .corruptChunk(let entry, let chunk): return "corruptChunk(entry: \(entry), chunk: \(chunk))"
        case .notFound: return "notFound"
        case .notADirectory: return "notADirectory"
        case .isADirectory: return "isADirectory"
        case .io(let code): return "io(errno: \(code))"
        case .sourceChanged(let path): return "sourceChanged(path: \(path.debugPath))"
        case .limitExceeded: return "limitExceeded"
        case .crypto: return "crypto"
        case .noKeyGiven: return "noKeyGiven"
        case .invalidCompressionLevel(let level): return "invalidCompressionLevel(\(level))"
        case .invalidChunkSize(let log2): return "invalidChunkSize(log2: \(log2))"
        case .sourceUnreadable(let code): return "sourceUnreadable(errno: \(code))"
        case .unknownSlot(let fingerprint): return "unknownSlot(fingerprint: \(fingerprint))"
        case .lastSlotRemoved: return "lastSlotRemoved"
        case .removedSlotKeyGiven(let fingerprint): return "removedSlotKeyGiven(fingerprint: \(fingerprint))"
        case .bundleReplaced: return "bundleReplaced"
        case .slotsNotCarriedOver(let slots): return "slotsNotCarriedOver(\(slots))"
        case .externalSymlink(let path, let target): return "externalSymlink(path: \(path.debugPath), target: \(target.debugPath))"
        case .scryptMemoryLimit(let slot, let needs, let limit): return "scryptMemoryLimit(slot: \(slot), needs: \(needs), limit: \(limit))"
        case .notSigned: return "notSigned"
        case .untrustedSigner(let fingerprint): return "untrustedSigner(fingerprint: \(fingerprint))"
        case .badSignature: return "badSignature"
        case .unsupportedSignature(let version): return "unsupportedSignature(version: \(version))"
        case .unexpectedBundleID(let expected, let actual): return "unexpectedBundleID(expected: \(expected.hexString), actual: \(actual.hexString))"
        }
    }
}

/// Fails unless `body` throws a `BundleError` equal to `expected` once its
/// free-text reasons are dropped.
///
/// - Returns: the error thrown, for further checks (nil when the check failed).
@discardableResult
func XCTAssertThrowsBundleError<T>(_ expected: ExpectedBundleError, _ message: @autoclosure () -> String = "",
                                   file: StaticString = #filePath, line: UInt = #line,
                                   _ body: () throws -> T) -> BundleError? {
    do {
        _ = try body()
        XCTFail("expected \(expected), nothing was thrown. \(message())", file: file, line: line)
        return nil
    } catch let error as BundleError {
        let got = ExpectedBundleError(error)
        XCTAssertEqual(got, expected, "\(error.message). \(message())", file: file, line: line)
        return got == expected ? error : nil
    } catch {
        XCTFail("expected \(expected), got a non-BundleError \(error). \(message())", file: file, line: line)
        return nil
    }
}
