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

    /// Checks `origin` with one request for the last bytes of the bundle
    /// (the first ones when none were pinned) after the check of a source
    /// before its first use (``verify(_:until:)``), bounded by one
    /// `--net-timeout` (60 s when that is 0) and made once: healthy again
    /// when they match; refused when another bundle answers; set aside
    /// with the next, doubled backoff and probed again otherwise.
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
        let offset = tail.isEmpty ? 0 : size - UInt64(tail.count)
        let got = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, expected.count), alignment: 16)
        defer { got.deallocate() }
        do throws(RemoteError) {
            try verify(origin, until: deadline)
            let slice = UnsafeMutableRawBufferPointer(rebasing: got[0..<expected.count])
            try origin.fetch(offset: offset, count: expected.count, size: size, into: slice, until: deadline,
                             policy: RemoteRetryPolicy(timeoutSeconds: policy.timeoutSeconds, retries: 0), priority: .background)
            guard expected.elementsEqual(slice) else { throw .notThisBundle("a mirror serves another bundle") }
            origin.health.withLock { $0.probing = false }
            origin.succeeded(bytes: expected.count)
        } catch {
            origin.failed(error, now: DispatchTime.now().uptimeNanoseconds)
            origin.health.withLock { $0.probing = false }
            scheduleProbe(origin)
        }
    }
}
