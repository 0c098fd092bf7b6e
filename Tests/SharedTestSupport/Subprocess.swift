import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What a finished child process left behind.
public struct ProcessResult: Sendable {
    /// The command line, for failure messages.
    public let command: [String]
    /// Exit code, or `128 + signal` when a signal ended the process.
    public let status: Int32
    /// The signal that ended the process, if one did.
    public let signal: Int32?
    /// Whether the deadline passed and the process was killed.
    public let timedOut: Bool
    public let stdout: [UInt8]
    public let stderr: [UInt8]

    /// stdout decoded as UTF-8 (invalid bytes become U+FFFD).
    public var output: String { String(decoding: stdout, as: UTF8.self) }
    /// stderr decoded as UTF-8.
    public var errorOutput: String { String(decoding: stderr, as: UTF8.self) }
    /// Non-empty stderr lines.
    public var errorLines: [String] { errorOutput.split(separator: "\n").map(String.init) }
    /// stdout split into lines of raw bytes, without the newlines.
    public var outputLines: [[UInt8]] { stdout.split(separator: 0x0A, omittingEmptySubsequences: false).map(Array.init).dropLastIfEmpty() }

    /// One line for assertion messages: the command, its status and stderr.
    public var summary: String {
        var text = "`\(command.joined(separator: " "))` exited \(status)"
        if timedOut { text += " (killed at its deadline)" }
        let err = errorOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        if !err.isEmpty { text += "; stderr: \(err.prefix(2000))" }
        return text
    }
}

extension Array where Element == [UInt8] {
    fileprivate func dropLastIfEmpty() -> [[UInt8]] {
        if let last, last.isEmpty { return Array(dropLast()) }
        return self
    }
}

/// A failure to start a process, or a helper's precondition that did not hold.
public struct SubprocessError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Starts programs with `posix_spawnp` and collects their output in memory.
///
/// Output stays in memory on purpose: `NoPlaintextTests` searches the
/// scratch directory for plaintext, so captured output must never be spooled
/// to disk. Every child gets stdin from /dev/null unless told otherwise,
/// `LC_ALL=C` and `TZ=UTC` (stable `ls`, `stat`, `sort` output), and no file
/// descriptor of the test process other than 0, 1, 2.
public enum Subprocess {
    /// Deadline for one tool run unless a test asks for another.
    public static let defaultTimeout: Double = 120

    /// Runs `tool` to completion.
    ///
    /// - Parameters:
    ///   - tool: a path, or a name looked up in `PATH`.
    ///   - arguments: argv[1...].
    ///   - environment: variables to set (or, with `nil`, remove) on top of
    ///     the test process's environment.
    ///   - timeout: seconds until the child is killed with SIGKILL.
    /// - Returns: status and output.
    /// - Throws: `SubprocessError` when the program cannot be started.
    public static func run(_ tool: String, _ arguments: [String], environment: [String: String?] = [:],
                    timeout: Double = defaultTimeout) throws -> ProcessResult {
        let process = try SpawnedProcess(tool, arguments, environment: environment, captureStandardError: true)
        let deadline = Deadline(seconds: timeout)
        let (out, err, timedOut) = process.drain(deadline: deadline)
        if timedOut { process.signal(SIGKILL) }
        var ended = process.wait(deadline: timedOut ? Deadline(seconds: 10) : deadline)
        if ended == nil {
            process.signal(SIGKILL)
            ended = process.wait(deadline: Deadline(seconds: 10))
        }
        let status = ended ?? ExitStatus(code: -1, signal: nil)
        return ProcessResult(command: [tool] + arguments, status: status.code, signal: status.signal,
                             timedOut: timedOut || ended == nil, stdout: out, stderr: err)
    }

    /// Runs `tool` to completion and requires exit status 0.
    ///
    /// - Throws: `SubprocessError` with the command's summary when it
    ///   fails or cannot be started.
    @discardableResult
    public static func check(_ tool: String, _ arguments: [String], environment: [String: String?] = [:],
                             timeout: Double = defaultTimeout) throws -> ProcessResult {
        let result = try run(tool, arguments, environment: environment, timeout: timeout)
        guard result.status == 0 else { throw SubprocessError(result.summary) }
        return result
    }

    /// The environment a child starts with: ours, plus `LC_ALL=C`, `TZ=UTC`,
    /// minus every `ENCFS_*` secret, plus `overrides`.
    public static func environment(_ overrides: [String: String?]) -> [String] {
        var variables: [String: String] = [:]
        for (name, value) in ProcessInfo.processInfo.environment where !name.hasPrefix("ENCFS_") || name == "ENCFS_BIN_DIR" {
            variables[name] = value
        }
        variables["LC_ALL"] = "C"
        variables["TZ"] = "UTC"
        for (name, value) in overrides { variables[name] = value }
        return variables.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
    }
}

/// A point in time on the monotonic clock.
public struct Deadline: Sendable {
    public let instant: ContinuousClock.Instant

    public init(seconds: Double) { instant = .now + .milliseconds(Int(seconds * 1000)) }

    public var hasPassed: Bool { ContinuousClock.now >= instant }

    /// Milliseconds left, at least 0, at most `cap`.
    public func remainingMilliseconds(cap: Int = 1000) -> Int32 {
        let left = instant - .now
        let ms = left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000
        return Int32(max(0, min(Int64(cap), ms)))
    }

    /// Polls `condition` every `interval` seconds until it holds or the
    /// deadline passes.
    ///
    /// - Returns: whether the condition held.
    public static func poll(seconds: Double, interval: Double = 0.02, _ condition: () -> Bool) -> Bool {
        let deadline = Deadline(seconds: seconds)
        while true {
            if condition() { return true }
            if deadline.hasPassed { return false }
            usleep(useconds_t(interval * 1_000_000))
        }
    }
}

/// How a process ended.
public struct ExitStatus: Sendable, Equatable {
    /// Exit code, or `128 + signal`.
    public let code: Int32
    /// The terminating signal, if any.
    public let signal: Int32?

    public init(code: Int32, signal: Int32?) {
        self.code = code
        self.signal = signal
    }
}

/// A child process that keeps running while the test talks to it.
///
/// stdout is a pipe the test reads (``readLine(deadline:)``, ``drain(deadline:)``);
/// stderr goes to a pipe too when `captureStandardError`, else to
/// `standardErrorFile` (or /dev/null). stdin is a pipe the test can write to
/// (``write(_:)``) when `feedStandardInput`, else /dev/null.
public final class SpawnedProcess: Sendable {
    public let pid: pid_t
    public let command: [String]
    private let stdoutFD: Int32
    private let stderrFD: Int32?
    private let stdinFD = Mutex<Int32?>(nil)
    private let pendingOutput = Mutex<[UInt8]>([])
    private let exitStatus = Mutex<ExitStatus?>(nil)

    /// Starts `tool`.
    ///
    /// - Throws: `SubprocessError` when a pipe or the spawn fails.
    public init(_ tool: String, _ arguments: [String], environment: [String: String?] = [:],
         captureStandardError: Bool = false, standardErrorFile: String? = nil, feedStandardInput: Bool = false) throws {
        command = [tool] + arguments
        let out = try Self.makePipe()
        let err = captureStandardError ? try Self.makePipe() : nil
        let input = feedStandardInput ? try Self.makePipe() : nil

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let input {
            posix_spawn_file_actions_adddup2(&actions, input.read, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_adddup2(&actions, out.write, 1)
        if let err {
            posix_spawn_file_actions_adddup2(&actions, err.write, 2)
        } else {
            posix_spawn_file_actions_addopen(&actions, 2, standardErrorFile ?? "/dev/null",
                                             O_WRONLY | O_CREAT | O_APPEND, 0o600)
        }

        let argv = ([tool] + arguments).map { strdup($0) }
        let envp = Subprocess.environment(environment).map { strdup($0) }
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        // Children start with the default action for the signals tests send
        // (SIGINT, SIGTERM, SIGHUP, SIGQUIT), even when the test runner was
        // started with them ignored, as a shell does for background jobs:
        // ignored dispositions are inherited, libfuse then installs no
        // handler, and a SIGINT sent by a test would do nothing.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGINT, SIGTERM, SIGHUP, SIGQUIT] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        // POSIX_SPAWN_SETSIGDEF is a macro Swift does not import (glibc: 0x04).
        posix_spawnattr_setflags(&attributes, 0x04)
        var child: pid_t = 0
        let rc = (argv + [nil]).withUnsafeBufferPointer { a -> Int32 in
            (envp + [nil]).withUnsafeBufferPointer { e -> Int32 in
                guard let a = a.baseAddress, let e = e.baseAddress else { return EINVAL }
                return posix_spawnp(&child, tool, &actions, &attributes, a, e)
            }
        }
        close(out.write)
        if let err { close(err.write) }
        if let input { close(input.read) }
        guard rc == 0 else {
            close(out.read)
            if let err { close(err.read) }
            if let input { close(input.write) }
            throw SubprocessError("cannot start \(tool): \(String(cString: strerror(rc)))")
        }
        pid = child
        stdoutFD = out.read
        stderrFD = err?.read
        stdinFD.withLock { $0 = input?.write }
    }

    deinit {
        close(stdoutFD)
        if let stderrFD { close(stderrFD) }
        if let fd = stdinFD.withLock({ $0 }) { close(fd) }
        // Never leave a zombie or an orphan behind.
        if exitStatus.withLock({ $0 }) == nil {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
    }

    /// A close-on-exec pipe: no child but the one it is meant for inherits
    /// it (a leaked write end would keep a reader of ours from seeing EOF).
    private static func makePipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw SubprocessError("pipe: \(String(cString: strerror(errno)))") }
        // pipe2(O_CLOEXEC) is not exported to Swift; tests spawn from one
        // thread at a time, so setting the flag afterwards is race-free here.
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        return (fds[0], fds[1])
    }

    /// Reads stdout and stderr to EOF or to the deadline.
    ///
    /// - Returns: both outputs, and whether the deadline passed first.
    public func drain(deadline: Deadline) -> (stdout: [UInt8], stderr: [UInt8], timedOut: Bool) {
        var out = pendingOutput.withLock { buffer in
            defer { buffer = [] }
            return buffer
        }
        var err: [UInt8] = []
        var open: [Int32] = [stdoutFD] + (stderrFD.map { [$0] } ?? [])
        var chunk = [UInt8](repeating: 0, count: 65536)
        while !open.isEmpty {
            if deadline.hasPassed { return (out, err, true) }
            var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let ready = Glibc.poll(&fds, nfds_t(fds.count), deadline.remainingMilliseconds(cap: 200))
            if ready < 0 && errno == EINTR { continue }
            if ready <= 0 { continue }
            for p in fds where p.revents != 0 {
                let n = chunk.withUnsafeMutableBytes { read(p.fd, $0.baseAddress, $0.count) }
                if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
                if n <= 0 {
                    open.removeAll { $0 == p.fd }
                } else if p.fd == stdoutFD {
                    out += chunk[0..<n]
                } else {
                    err += chunk[0..<n]
                }
            }
        }
        return (out, err, false)
    }

    /// Reads one line of stdout (without its newline), or `nil` at EOF or
    /// when the deadline passes.
    public func readLine(deadline: Deadline) -> String? {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let line: [UInt8]? = pendingOutput.withLock { buffer in
                guard let newline = buffer.firstIndex(of: 0x0A) else { return nil }
                let line = Array(buffer[..<newline])
                buffer.removeSubrange(...newline)
                return line
            }
            if let line { return String(decoding: line, as: UTF8.self) }
            if deadline.hasPassed { return nil }
            var p = pollfd(fd: stdoutFD, events: Int16(POLLIN), revents: 0)
            let ready = Glibc.poll(&p, 1, deadline.remainingMilliseconds(cap: 200))
            if ready <= 0 { continue }
            let n = chunk.withUnsafeMutableBytes { read(stdoutFD, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            pendingOutput.withLock { $0 += chunk[0..<n] }
        }
    }

    /// Writes `text` to the child's stdin (a pipe when `feedStandardInput`).
    public func write(_ text: String) {
        guard let fd = stdinFD.withLock({ $0 }) else { return }
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    }

    /// Closes the child's stdin.
    public func closeStandardInput() {
        if let fd = stdinFD.withLock({ value -> Int32? in defer { value = nil }; return value }) { close(fd) }
    }

    /// Sends `signal` unless the process has been reaped already.
    public func signal(_ signal: Int32) {
        if exitStatus.withLock({ $0 }) == nil { kill(pid, signal) }
    }

    /// Whether the process has not been reaped yet and is still running.
    public var isRunning: Bool { reap() == nil }

    /// Reaps the process if it has ended.
    public func reap() -> ExitStatus? {
        exitStatus.withLock { state in
            if let state { return state }
            var status: Int32 = 0
            let rc = waitpid(pid, &status, WNOHANG)
            guard rc == pid else { return nil }
            state = Self.decode(status)
            return state
        }
    }

    /// Waits for the process to end.
    ///
    /// - Returns: how it ended, or `nil` if it still runs at the deadline.
    public func wait(deadline: Deadline) -> ExitStatus? {
        while true {
            if let status = reap() { return status }
            if deadline.hasPassed { return nil }
            usleep(10_000)
        }
    }

    private static func decode(_ status: Int32) -> ExitStatus {
        let signal = status & 0x7f
        if signal == 0 { return ExitStatus(code: (status >> 8) & 0xff, signal: nil) }
        return ExitStatus(code: 128 + signal, signal: signal)
    }
}
