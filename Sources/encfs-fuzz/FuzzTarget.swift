import CryptCore
import EncFSCore

/// One parser of untrusted bytes under test.
///
/// Each target takes any byte string and must either succeed or throw one
/// of the documented error types (`BundleError`, `CryptError`,
/// `KeyInputError`). Anything else is a finding and traps, so libFuzzer
/// saves the input and the replayer fails: a trap, a sanitizer report, an
/// undocumented error, or a broken invariant checked by ``FuzzTarget/require(_:_:)``
/// (a lookup that does not find an entry by its own name, two reads of the
/// same bytes that disagree).
enum FuzzTarget: String, CaseIterable, Sendable {
    /// `BundleHeader.parse` and unlocking with every fixed secret.
    case header
    /// `BundleIndex(plaintext:layout:dataLength:)` on raw plaintext, then
    /// every accessor on every entry.
    case index
    /// A whole bundle file opened with the fixed raw key, every file read.
    case bundle
    /// `PublicKey(pem:)` and `PrivateKey(pem:)`, then every use of a key.
    case pem
    /// `ChunkDecompressor` on an arbitrary zstd frame into a chunk-sized
    /// buffer (bombs included), and compression round trips.
    case chunkFrame = "chunk-frame"
    /// One record page of a paged index checked as a reader checks it
    /// (`RecordPage`), plain or inflated from a zstd frame.
    case indexPage = "index-page"
    case serveRequest = "serve-request"

    /// Runs one input through the target.
    func run(_ input: UnsafeRawBufferPointer) {
        switch self {
        case .header: HeaderFuzzing.run(input)
        case .index: IndexFuzzing.run(input)
        case .bundle: BundleFuzzing.run(input)
        case .pem: PEMFuzzing.run(input)
        case .chunkFrame: ChunkFrameFuzzing.run(input)
        case .indexPage: IndexPageFuzzing.run(input)
        case .serveRequest: ServeRequestFuzzing.run(input)
        }
    }

    /// Runs `body`, swallowing the errors the code under test documents;
    /// anything else is a finding.
    ///
    /// - Returns: what `body` returns, or nil when it threw an allowed error.
    @discardableResult
    static func attempt<R>(_ what: @autoclosure () -> String, _ body: () throws -> R) -> R? {
        do {
            let result = try body()
            count(what(), "ok")
            return result
        } catch let error as BundleError {
            count(what(), error)
        } catch let error as CryptError {
            count(what(), error)
        } catch let error as KeyInputError {
            count(what(), error)
        } catch {
            finding("\(what()) threw \(type(of: error)), not a BundleError, CryptError or KeyInputError: \(error)")
        }
        return nil
    }

    /// How often each step ended each way ("BundleReader.open: ok",
    /// "…: corruptChunk"), when counting; nil otherwise. The replayer's
    /// `--stats` shows how deep a corpus reaches. Replay is single-threaded.
    nonisolated(unsafe) static var outcomes: [String: Int]?

    private static func count(_ what: @autoclosure () -> String, _ outcome: Any) {
        guard outcomes != nil else { return }
        // The enum case without its payload: "corruptChunk(entry: 1, chunk: 0)" → "corruptChunk".
        let name = String(describing: outcome).prefix { $0 != "(" }
        outcomes?["\(what()): \(name)", default: 0] += 1
    }

    /// Traps with `message` unless `condition` holds: a broken invariant
    /// of the code under test, reported like a crash.
    static func require(_ condition: Bool, _ message: @autoclosure () -> String) {
        if !condition { finding(message()) }
    }

    /// Reports a finding and traps (libFuzzer then saves the input as a
    /// crash; the replayer dies, naming the input).
    static func finding(_ message: String) -> Never {
        fatalError("encfs-fuzz finding: \(message)")
    }
}
