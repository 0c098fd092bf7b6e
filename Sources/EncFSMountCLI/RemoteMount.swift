import EncFSCore
import EncFSService
import EncFSMount
import EncFSRemote
import CryptCore
#if canImport(Glibc)
import Glibc
import EncFSCLI
#endif

/// `encfs-mount URL MOUNTPOINT`: a bundle served from an HTTP server.
///
/// In the background the command makes the opening request itself (size,
/// ETag, header), unlocks the key, and hands the daemon the address, the
/// headers and what it pinned through a pipe on fd 5; the daemon fetches
/// the index (the mount's second and last request) and serves. With `-f`
/// this process does both.
enum RemoteMount {
    /// Worker threads for a remote mount unless `--threads` is given.
    static let defaultThreads = 16

    /// Mounts the bundle at `url` as `configuration` says.
    ///
    /// - Returns: the exit code.
    static func run(url: [UInt8], options: RemoteOptions, configuration: MountConfiguration, args: ArgumentParser.Result,
                    openOptions: OpenOptions, diagnostics: Diagnostics) -> Int32 {
        var configuration = configuration
        var options = options
        // Before anything else: no AWS_* variable reaches the daemon.
        let environment = RemoteCommandLine.takeAWSEnvironment()
        let materials: [KeyMaterial]
        do {
            materials = try KeyOptions.gather(from: args, confirm: false)
        } catch {
            diagnostics.report(error)
            return ExitCode.code(for: error)
        }
        guard let prepared = MountCommand.preparedForServing(configuration, diagnostics: diagnostics) else {
            return ExitCode.failure
        }
        configuration = prepared
        do {
            options.cacheDirectory = try options.cacheDirectory.map(absolute)
            options.caFile = try options.caFile.map(absolute)
        } catch {
            diagnostics.report(error)
            return ExitCode.failure
        }
        do {
            if RemoteLocation.isS3(url) || options.mirrors.contains(where: RemoteLocation.isS3) {
                try RemoteCommandLine.resolveS3(&options, environment: environment, args: args)
                if args.has("--foreground") {
                    // This process serves: the line goes to the mount's log.
                    let log = configuration.logFile.flatMap { try? MountLogger.appending(to: $0) } ?? MountLogger(sink: .syslog)
                    options.s3.credentials?.logRotations { log.log("info", $0) }
                }
            }
            let location = try RemoteLocation(url, s3: options.s3)
            if args.has("--foreground") {
                let source = try RemoteBundleSource(location: location, options: options)
                // Handed over, not kept: a lock must drop the last reference.
                let reader = ReaderHandoff(try BundleReader.open(source: source, materials: materials,
                                                                 indexCacheBytes: configuration.indexCacheKB << 10, options: openOptions))
                return MountCommand.serveInForeground(reader, source: source, configuration, options: openOptions,
                                                      diagnostics: diagnostics)
            }
            let http = try HTTPByteSource(location: location, options: options)
            let keys = try BundleReader.unlock(source: http, materials: materials, options: openOptions)
            let handOver = try RemoteCommandLine.secretHandOver(url, options: options, opened: http)
            try MountDaemon.start(bundle: handOver, contentKey: keys.contentKey,
                                  arguments: MountDaemonCommandLine.arguments(for: configuration, remote: options),
                                  mountpoint: configuration.mountpoint)
            return ExitCode.success
        } catch {
            diagnostics.report(error, path: configuration.bundlePath)
            if let hint = ReaderOptions.hint(for: error) { diagnostics.hint(hint) }
            return ExitCode.failure
        }
    }

    /// The daemon's side: the source from what the command handed over on
    /// `descriptor`.
    ///
    /// - Throws: `RemoteError`, `BundleError`.
    static func receive(from descriptor: FileDescriptor, options: RemoteOptions, logFile: [UInt8]?) throws -> any ByteSource {
        var bytes = [UInt8](repeating: 0, count: 512 << 10)
        defer { bytes.withUnsafeMutableBytes { SecureBytes.wipe($0) } }
        let n = try bytes.withUnsafeMutableBytes { try descriptor.read(into: $0) }
        let handOver = try RemoteHandOver(decoding: Array(bytes.prefix(n)))
        var options = options
        options.headers = handOver.headers
        options.mirrors = handOver.mirrors
        options.prefetchList = handOver.prefetchList
        if let credentials = handOver.credentials {
            let source = AWSCredentialSource(origin: handOver.credentialOrigin, credentials: credentials)
            // The daemon's log, as MountDaemon.serve opens it.
            let log = logFile.flatMap { try? MountLogger.appending(to: $0) } ?? MountLogger(sink: .syslog)
            source.logRotations { log.log("info", $0) }
            options.s3.credentials = source
        }
        let http = try HTTPByteSource(location: try RemoteLocation(handOver.url, s3: options.s3), options: options,
                                      pinned: handOver.pinned)
        return try RemoteBundleSource(http: http, options: options)
    }

    /// `path` made absolute against the working directory (the daemon
    /// works from "/"); the directory need not exist yet.
    private static func absolute(_ path: [UInt8]) throws -> [UInt8] {
        guard path.first != UInt8(ascii: "/") else { return path }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { throw CommandError("cannot resolve path", path: path) }
        let directory = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return directory + [UInt8(ascii: "/")] + path
    }
}
