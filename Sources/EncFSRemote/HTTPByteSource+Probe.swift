import Dispatch
#if canImport(Glibc)
import Glibc
#endif

// Set-aside sources come back without an application read: each is
// probed in the background when its backoff ends. Without a probe, a
// source stayed set aside (and shown so by `encfs-ctl MNT status`) until a
// read happened to try it, and that read paid for the attempt.
extension HTTPByteSource {
    /// Schedules one probe of `origin` for when its backoff ends, if it is
    /// set aside and none is scheduled yet (one per source at a time); only
    /// with mirrors (a single source is never set aside).
    func scheduleProbe(_ origin: RemoteOrigin) {
        guard origins.count > 1 else { return }
        let until = origin.health.withLock { health -> UInt64? in
            guard health.state == .setAside, !health.probing else { return nil }
            health.probing = true
            return health.until
        }
        guard let until else { return }
        // Weak: a bundle closed meanwhile is not kept open for its probe.
        probes.asyncAfter(deadline: DispatchTime(uptimeNanoseconds: until)) { [weak self] in
            self?.probe(origin)
        }
    }

    /// Checks `origin` with one request for the last fetch unit of the
    /// bundle (`--fetch-size` bytes ending with its last ``tailLength``;
    /// the first bytes when no tail was pinned) after the check of a
    /// source before its first use (``verify(_:until:)``), bounded by one
    /// `--net-timeout` (60 s when that is 0) and made once: healthy again
    /// when the last bytes match; refused when another bundle answers; set
    /// aside with the next, doubled backoff and probed again otherwise.
    ///
    /// Why a unit: a source that answers small requests but stalls long
    /// bodies (a saturated or half-broken server) passed a 16-byte probe,
    /// and the next read then waited out its share of the deadline there
    /// again, once per backoff.
    private func probe(_ origin: RemoteOrigin) {
        // `probing` stays set while the probe runs: reads keep away.
        let state = origin.health.withLock { $0.state }
        // A read brought it back meanwhile, or found it serves another bundle.
        guard state == .setAside else {
            origin.health.withLock { $0.probing = false }
            return
        }
        let deadline = DispatchTime.now() + .seconds(policy.timeoutSeconds > 0 ? policy.timeoutSeconds : 60)
        let expected = tail.isEmpty ? Array(head.prefix(Self.tailLength)) : tail
        let count = tail.isEmpty ? expected.count : Int(min(UInt64(max(options.fetchSize, expected.count)), size))
        let offset = tail.isEmpty ? 0 : size - UInt64(count)
        let got = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, count), alignment: 16)
        defer { got.deallocate() }
        do throws(RemoteError) {
            try verify(origin, until: deadline)
            let slice = UnsafeMutableRawBufferPointer(rebasing: got[0..<count])
            try origin.fetch(offset: offset, count: count, size: size, into: slice, until: deadline,
                             policy: RemoteRetryPolicy(timeoutSeconds: policy.timeoutSeconds, retries: 0), priority: .background)
            let last = UnsafeRawBufferPointer(rebasing: got[(tail.isEmpty ? 0 : count - expected.count)..<count])
            guard expected.elementsEqual(last) else { throw .notThisBundle("a mirror serves another bundle") }
            origin.health.withLock { $0.probing = false }
            origin.succeeded(bytes: count)
        } catch {
            origin.failed(error, now: DispatchTime.now().uptimeNanoseconds)
            origin.health.withLock { $0.probing = false }
            scheduleProbe(origin)
        }
    }
}
