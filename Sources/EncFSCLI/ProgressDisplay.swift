import Dispatch
import EncFSCore
#if canImport(Glibc)
import Glibc
#endif

/// A progress line on stderr for long commands (pack, verify, rekey):
/// files, bytes, rate and time left, redrawn in place at most 10 times a
/// second from a timer thread while the command works.
///
/// Shown only when stderr is a terminal, unless `--progress` forces it;
/// never with `--quiet`. Logs and pipes stay clean: nothing is written
/// when stderr is a file or a pipe. The first frame is drawn at once and
/// the last (with the final counts) when the work ends, followed by a
/// newline, so what the command prints next starts on a line of its own.
final class ProgressDisplay {
    /// Redraws per second, at most.
    static let framesPerSecond = 10

    /// What the command advances.
    let progress = WorkProgress()
    private let tool: String
    private let start: UInt64
    private let queue = DispatchQueue(label: "encfs.progress")
    private let timer: DispatchSourceTimer

    /// The display for `tool`, or nil when none should be shown.
    ///
    /// - Parameters:
    ///   - forced: `--progress` was given.
    ///   - quiet: `--quiet` was given (wins over `forced`).
    static func make(tool: String, forced: Bool, quiet: Bool) -> ProgressDisplay? {
        guard !quiet, forced || isatty(2) == 1 else { return nil }
        return ProgressDisplay(tool: tool)
    }

    private init(tool: String) {
        self.tool = tool
        start = Self.now()
        timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now(), repeating: .milliseconds(1000 / Self.framesPerSecond))
        // The handler captures only Sendable values, not the display.
        let (progress, start) = (progress, start)
        timer.setEventHandler { Self.draw(tool: tool, progress, start: start, final: false) }
        timer.resume()
    }

    /// Stops redrawing and draws the last frame; call once the work ends
    /// (successfully or not).
    func finish() {
        queue.sync {
            timer.cancel()
            Self.draw(tool: tool, progress, start: start, final: true)
        }
    }

    /// Runs `body` (which writes a line on stderr, e.g. a warning) with the
    /// progress line erased first, never in the middle of a redraw; the
    /// next frame draws the line again below it.
    func interrupting(_ body: () -> Void) {
        queue.sync {
            let erase = Array("\r\u{1b}[K".utf8)
            erase.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
            body()
        }
    }

    /// Writes one frame: `\r`, the line, erase to the end of the line.
    private static func draw(tool: String, _ progress: WorkProgress, start: UInt64, final: Bool) {
        let line = line(tool: tool, progress.snapshot, seconds: Double(now() - start) / 1e9, final: final)
        let frame = Array("\r\(line)\u{1b}[K\(final ? "\n" : "")".utf8)
        frame.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
    }

    /// `encfs-pack: 12/340 files, 1.2 GiB of 20.0 GiB (6%), 150.3 MiB/s, 2m10s left`.
    /// Before the totals are known (a source tree still being walked), `scanning`.
    static func line(tool: String, _ s: WorkProgress.Snapshot, seconds: Double, final: Bool = false) -> String {
        if !final, s.filesTotal == 0, s.bytesTotal == 0 { return "\(tool): scanning" }
        var text = "\(tool): \(s.filesDone)/\(s.filesTotal) files, \(formatBytes(s.bytesDone)) of \(formatBytes(s.bytesTotal))"
        let percent = s.bytesTotal == 0 ? 100 : Int(Double(s.bytesDone) / Double(s.bytesTotal) * 100)
        text += " (\(min(percent, 100))%)"
        guard seconds > 0.2, s.bytesDone > 0 else { return text }
        let rate = Double(s.bytesDone) / seconds
        text += ", \(formatBytes(UInt64(rate)))/s"
        if s.bytesDone < s.bytesTotal {
            text += ", \(duration(Double(s.bytesTotal - s.bytesDone) / rate)) left"
        }
        return text
    }

    /// `45s`, `2m10s`, `3h05m`.
    static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds < 1e7 else { return "--" }
        let total = Int(seconds.rounded(.up))
        if total < 60 { return "\(total)s" }
        if total < 3600 { return "\(total / 60)m\(String(total % 60).leftPadded(to: 2, with: "0"))s" }
        return "\(total / 3600)h\(String(total / 60 % 60).leftPadded(to: 2, with: "0"))m"
    }

    private static func now() -> UInt64 {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_nsec)
    }
}
