import EncFSCore
import EncFSMount
import EncFSCLI

extension MountCommand {
    /// ``MountMode/background(_:)``, a local bundle with a key: the daemon is
    /// started before the header is unlocked, so that its start (loading
    /// the program, OpenSSL's tables) runs beside the unlock on another
    /// CPU instead of after it. It gets the key only once the header
    /// unlocked; a failed unlock ends it before it has done anything.
    ///
    /// Only the header is unlocked here; the daemon loads and checks the
    /// index (once, not in both processes) and reports a damaged one
    /// through its verdict pipe before anything is mounted.
    ///
    /// - Returns: the exit code.
    static func mountInBackground(_ request: MountRequest, diagnostics: Diagnostics) -> Int32 {
        let configuration = request.configuration
        let options = request.openOptions
        let materials: [KeyMaterial]
        switch startingMaterials(request, diagnostics: diagnostics) {
        case .success(let gathered): materials = gathered
        case .failure(let exit): return exit.code
        }
        let source: FileByteSource
        do {
            source = try FileByteSource(path: configuration.bundlePath)
        } catch {
            diagnostics.report(error, path: configuration.bundlePath)
            return ExitCode.failure
        }
        guard let prepared = preparedForServing(configuration, diagnostics: diagnostics) else { return ExitCode.failure }
        let daemon: MountDaemon.Launched
        do {
            daemon = try MountDaemon.launch(bundle: source.descriptor, arguments: MountDaemonCommandLine.arguments(for: prepared))
        } catch {
            diagnostics.report(error, path: prepared.mountpoint)
            return ExitCode.failure
        }
        let keys: BundleKeys
        do {
            keys = try BundleReader.unlock(source: source, materials: materials, options: options)
        } catch {
            daemon.abandon()
            diagnostics.report(error, path: configuration.bundlePath)
            if let hint = ReaderOptions.hint(for: error) { diagnostics.hint(hint) }
            return ExitCode.failure
        }
        do {
            try daemon.handOver(contentKey: keys.contentKey, mountpoint: prepared.mountpoint)
            return ExitCode.success
        } catch {
            diagnostics.report(error, path: prepared.mountpoint)
            if let hint = ReaderOptions.hint(for: error) { diagnostics.hint(hint) }
            return ExitCode.failure
        }
    }
}
