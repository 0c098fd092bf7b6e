import Foundation
import SharedTestSupport
import XCTest

/// Every saved fuzz input, run again without libFuzzer: the seed corpus
/// (Tests/Fuzz/Corpus), the minimized inputs earlier runs found
/// (Tests/Fuzz/Found) and every crash, hang or leak the fuzzer once found
/// (Tests/Fuzz/Reproducers), through the built `encfs-fuzz` replayer. A
/// regression traps, or throws an undocumented error, or breaks an
/// invariant, and the replayer dies naming the input.
///
/// The replayer is located like every binary the tests run (``Tools``):
/// `$ENCFS_BIN_DIR` (Scripts/test.sh sets it), else `.build/release`, else
/// `.build/debug`.
final class FuzzReplayTests: XCTestCase {
    func testReplay_Header() throws { try replay("header") }
    func testReplay_Index() throws { try replay("index") }
    func testReplay_Bundle() throws { try replay("bundle") }
    func testReplay_PEM() throws { try replay("pem") }
    func testReplay_ChunkFrame() throws { try replay("chunk-frame") }
    func testReplay_IndexPage() throws { try replay("index-page") }
    func testReplay_ServeRequest() throws { try replay("serve-request") }

    private func replay(_ target: String, file: StaticString = #filePath, line: UInt = #line) throws {
        // One line for the whole run when the replayer is missing or stale
        // (the first test to see it fails, the others skip).
        let replayer = try Tools.binary("encfs-fuzz")
        let fuzz = URL(fileURLWithPath: Tools.repositoryRoot).appendingPathComponent("Tests/Fuzz")
        let corpus = fuzz.appendingPathComponent("Corpus/\(target)").path
        var arguments = [target, corpus]
        for kept in ["Found", "Reproducers"] {
            let path = fuzz.appendingPathComponent("\(kept)/\(target)").path
            if FileManager.default.fileExists(atPath: path) { arguments.append(path) }
        }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: replayer)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()

        let how = process.terminationReason == .uncaughtSignal ? "died of signal" : "exited with"
        XCTAssertTrue(process.terminationReason == .exit && process.terminationStatus == 0,
                      "encfs-fuzz \(target) \(how) \(process.terminationStatus); replay one input with `encfs-fuzz \(target) FILE -v`:\n\(text.suffix(4000))",
                      file: file, line: line)
        XCTAssertTrue(text.contains("inputs passed"), "encfs-fuzz \(target) replayed nothing:\n\(text)", file: file, line: line)
    }
}
