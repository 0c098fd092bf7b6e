import EncFSCore
@testable import EncFSCLI
import EncFSMount
import SharedTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
import EncFSService
#endif

/// Error meaning crosses the daemon's verdict pipe and the control socket
/// as an `ErrorCode`, and the command derives its hint and exit status
/// from the code through one table: every code survives both encodings,
/// the table answers for every code, and no source file recognizes an
/// error by its message again.
final class ErrorCodeTests: XCTestCase {
    func testReply_EveryCodeRoundTrips() {
        let replies = [ControlProtocol.Reply.ok("state=locked"), .ok("")]
            + ErrorCode.allCases.map { ControlProtocol.Reply.refused($0, "why: \($0)") }
        for reply in replies {
            XCTAssertEqual(ControlProtocol.Reply(decoding: reply.encoded), reply)
        }
        XCTAssertNil(ControlProtocol.Reply(decoding: []))
        XCTAssertFalse(ErrorCode.allCases.contains { $0.rawValue == 0 }, "0 says ok")
    }

    func testVerdict_EveryCodeRoundTrips() {
        var verdicts: [MountDaemon.Verdict] = [.mounted]
        for code in ErrorCode.allCases {
            verdicts.append(.failed(code, message: "why: \(code)", path: Array("dir/\u{1}name".utf8)))
            verdicts.append(.failed(code, message: "why: \(code)", path: nil))
        }
        for verdict in verdicts {
            XCTAssertEqual(MountDaemon.Verdict(decoding: verdict.encoded), verdict)
        }
        XCTAssertNil(MountDaemon.Verdict(decoding: []), "nothing: the daemon exited without a word")
    }

    /// A bundle error keeps its case, message and path through the pipe;
    /// the hint comes from the code alone.
    func testVerdict_BundleErrorKeepsItsCodeAndHint() throws {
        let error = BundleError.externalSymlink(path: Array("abs".utf8), target: Array("/etc/hostname".utf8))
        let verdict = MountDaemon.Verdict(failure: error, path: Array("bundle".utf8))
        XCTAssertEqual(verdict, .failed(.externalSymlink, message: "symlink points outside the bundle: /etc/hostname",
                                        path: Array("abs".utf8)))
        guard case .failed(let code, _, let path)? = MountDaemon.Verdict(decoding: verdict.encoded) else {
            return XCTFail("not a failure")
        }
        let reported = MountError.daemonFailed(code: code, message: "reworded entirely", path: path)
        XCTAssertEqual(ReaderOptions.hint(for: reported), ReaderOptions.hint(for: error))
        XCTAssertEqual(ReaderOptions.hint(for: reported),
                       "to accept such links (served as they are stored), add --allow-external-symlinks")
    }

    /// Every code has a row: an exit status of 1 (every one is a runtime
    /// failure), and the hints that name an option or a command.
    func testPresentation_EveryCodeHasARow() {
        for code in ErrorCode.allCases {
            XCTAssertEqual(code.presentation().exitCode, ExitCode.failure, "\(code)")
        }
        for code in [ErrorCode.externalSymlink, .notSigned, .untrustedSigner, .lockNeedsForce, .noControlSocket] {
            XCTAssertNotNil(code.presentation().hint, "\(code)")
        }
        XCTAssertEqual(ErrorCode.lockNeedsForce.presentation().hint, "encfs-ctl MOUNTPOINT lock --force")
        let scrypt = BundleError.scryptMemoryLimit(slot: 1, needs: 2 << 30, limit: 1 << 30)
        XCTAssertEqual(ReaderOptions.hint(for: scrypt),
                       "if you trust this bundle, allow more with --scrypt-max-memory SIZE (this slot needs 2G)")
        XCTAssertEqual(ErrorCode.hint(for: CommandError(.noControlSocket, "anything")),
                       "is it mounted with encfs-mount by this user? (root finds root's mounts in /run/encfs)")
        XCTAssertNil(ErrorCode.hint(for: CommandError("no control socket for this mountpoint")), "meaning by message")
    }

    /// Each refusal says what it is, with the errno of what it is.
    func testBundleError_CasesSayWhatHappened() {
        XCTAssertEqual(BundleError.invalidCompressionLevel(25).errno, EINVAL, "not EFBIG: nothing is too large")
        XCTAssertEqual(BundleError.invalidChunkSize(log2: 40).errno, EINVAL)
        XCTAssertEqual(BundleError.noKeyGiven.errno, EINVAL, "not a cryptographic failure")
        XCTAssertEqual(BundleError.noKeyGiven.message, "no key or recipient given")
        XCTAssertEqual(ErrorCode(BundleError.externalSymlink(path: [], target: [])), .externalSymlink)
        XCTAssertEqual(BundleError.externalSymlink(path: Array("a/b".utf8), target: []).message, "symlink points outside the bundle")
        XCTAssertEqual(BundleError.sourceUnreadable(errno: ENOENT, path: Array("src".utf8)).path, Array("src".utf8))
        XCTAssertEqual(ControlRefusal(BundleError.wrongKey(slotKinds: ["raw"])).code, .wrongKey)
    }

    /// Patterns that give an error meaning by its text: a message, a reply
    /// or an operation compared with, or searched for, a literal.
    private static let stringMatchedMeaning = [
        #"externalSymlinkMessage"#,
        #"\b(message|text|reason|description|errorDescription)\s*\.\s*(hasPrefix|hasSuffix|contains|starts\(with|range\(of)\s*\("#,
        #"\b(message|reason|operation)\s*==\s*""#,
        #""\\\(error\)"\s*\.\s*(hasPrefix|hasSuffix|contains)"#,
    ]

    /// Lines that match a pattern but parse input, not an error: (file,
    /// what the line holds). A new one is a deliberate addition here.
    private static let parsingNotMeaning: [(file: String, contains: String)] = [
        ("CryptCore/PEMArmor.swift", #"text.hasPrefix("DEK-INFO")"#),
        ("EncFSCLI/ArgumentParser+MountOptions.swift", #"text.hasPrefix("x-")"#),
        ("EncFSCLI/InspectCommand+JSON.swift", #"text.hasSuffix("Z")"#),
        ("EncFSRemote/HTTPConnection.swift", #"text.hasPrefix("bytes ")"#),
    ]

    /// No file under Sources recognizes an error by its words.
    func testSources_NoErrorMeaningByStringMatching() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources")
        let patterns = try Self.stringMatchedMeaning.map { try NSRegularExpression(pattern: $0) }
        guard let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil) else {
            return XCTFail("cannot list \(sources.path)")
        }
        var found: [String] = []
        var scanned = 0
        for case let file as URL in files where file.pathExtension == "swift" {
            scanned += 1
            let text = try String(contentsOf: file, encoding: .utf8)
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let line = String(line)
                let range = NSRange(line.startIndex..., in: line)
                let relative = String(file.path.dropFirst(sources.path.count + 1))
                guard patterns.contains(where: { $0.firstMatch(in: line, range: range) != nil }),
                      !Self.parsingNotMeaning.contains(where: { $0.file == relative && line.contains($0.contains) }) else { continue }
                found.append("\(relative):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))")
            }
        }
        XCTAssertGreaterThan(scanned, 100, "found too few sources under \(sources.path)")
        XCTAssertEqual(found, [], "error meaning by string matching: use an ErrorCode (or a typed error case)")
    }
}
