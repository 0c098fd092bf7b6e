import EncFSCore
import EncFSService

extension MountSession {
    /// Prepares a session with the serving settings the command parsed
    /// (``MountConfiguration``): the one place both the foreground command
    /// and the background daemon turn those settings into a session, so a
    /// new setting cannot reach one and miss the other.
    ///
    /// - Parameters:
    ///   - reader: the unlocked bundle (the session takes it over).
    ///   - source: the bundle's bytes, opened again at each unlock.
    ///   - options: how an unlock opens it (origin, symlinks).
    ///   - configuration: everything else, from the command line.
    ///   - logger: where the session logs.
    /// - Throws: `BundleError.io` when libfuse rejects the options.
    package convenience init(reader: ReaderHandoff, source: any ByteSource, options: OpenOptions,
                             configuration: MountConfiguration, logger: MountLogger) throws {
        try self.init(reader: reader, source: source, options: options, lock: configuration.lock,
                      bundlePath: configuration.bundlePath, mountpoint: configuration.mountpoint,
                      extraOptions: configuration.fuseOptions, logger: logger, threads: configuration.threads,
                      logNames: configuration.logNames, indexCacheBytes: configuration.indexCacheKB << 10,
                      accessRules: configuration.access, transport: configuration.transport,
                      waitsOnNetwork: configuration.waitsOnNetwork, pollMicroseconds: configuration.pollMicroseconds,
                      ringPollMicroseconds: configuration.pollMicrosecondsGiven ? configuration.pollMicroseconds : 0)
    }
}
