import EncFSCore
import EncFSService

/// What `encfs-ctl --name NAME` controls in a running encfs-serve: lock,
/// unlock and status, through the mount's ``ControlServer``.
///
/// A lock takes the reader away (``LockableBundle/takeReader()``: it waits
/// for the requests being answered, then the reader and its content key,
/// derived keys and index pages are wiped as the last reference goes) and
/// wipes every response body being sent (``BodyStream``), except under
/// `--protection unless-open`, where bodies already being sent finish
/// and their keys go with them. While locked every request that passes
/// the Host and token checks gets 503 with no body and no hint.
final class ServeControl: ControlledService {
    let bundle: LockableBundle
    let lockSettings: LockSettings
    let name: [UInt8]
    let endpoints: [HTTPEndpoint]
    private let logger: ServeLog

    init(bundle: LockableBundle, lockSettings: LockSettings, name: [UInt8], endpoints: [HTTPEndpoint], log: ServeLog) {
        self.bundle = bundle
        self.lockSettings = lockSettings
        self.name = name
        self.endpoints = endpoints
        logger = log
    }

    var kind: String { "server" }

    func log(_ level: String, _ message: String) {
        logger.log(level, message)
    }

    func lock(force: Bool, reason: String) throws -> Int {
        guard force || lockSettings.protection != .untilUnmount else {
            throw ControlRefusal(.lockNeedsForce,
                                 "the server's protection is until-unmount: lock it with --force, or start it with --protection complete")
        }
        // The reader taken is the last reference: it is wiped as it goes.
        if bundle.takeReader() != nil { log("info", "locked (\(reason))") }
        return 0
    }

    func unlock(with secrets: UnsafeRawBufferPointer, locksBefore: Int, stillWanted: () -> Bool) throws -> String {
        try unlockBundle(with: secrets, locksBefore: locksBefore, stillWanted: stillWanted)
    }

    var accessLog: String { sourceAccessLog }

    /// The `status` reply: ``ControlProtocol/StatusField`` lines, one per
    /// field (a newline in a unix socket's path becomes `?`).
    var status: String {
        typealias Field = ControlProtocol.StatusField
        let served = endpoints.reduce(0) { $0 + $1.requestsServed.load(ordering: .relaxed) }
        var fields: [(String, String)] = [
            (Field.kind, kind),
            (Field.name, String(decoding: name, as: UTF8.self)),
            (Field.state, bundle.isLocked ? "locked" : "unlocked"),
            (Field.protection, lockSettings.protection.rawValue),
            (Field.idleLock, String(lockSettings.idleLockSeconds ?? 0)),
            (Field.idleSeconds, String(bundle.activity.idleSeconds)),
            (Field.requestsServed, String(served)),
            (Field.listenCount, String(endpoints.count)),
        ]
        for (index, endpoint) in endpoints.enumerated() {
            fields.append((Field.listen(index), String(endpoint.listener.display.map { $0 == "\n" ? "?" : $0 })))
        }
        fields += (bundle.source as? StatusReportingSource)?.statusFields ?? []
        return fields.map { "\($0.0)=\($0.1)\n" }.joined()
    }
}
