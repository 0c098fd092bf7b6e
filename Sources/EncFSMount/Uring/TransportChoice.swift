/// Which transport carries a mount's FUSE requests (`--transport`).
///
/// `uring`: per-CPU io_uring queues (FUSE over io_uring, Linux 6.14+),
/// requests served on the CPU that issued them and replies committed with
/// the next fetch. `classic`: libfuse's loop reading and writing
/// /dev/fuse. Mounting, INIT and unmounting go through libfuse either way.
package enum TransportChoice: String, Sendable, Equatable, CaseIterable {
    case uring
    case classic
}

/// What the user asked for: a transport, or the default.
package enum TransportRequest: Sendable, Equatable {
    /// classic (the rings are opt-in: docs/PERFORMANCE.md,
    /// "Transports").
    case automatic
    /// Exactly this transport; uring unavailable is an error.
    case required(TransportChoice)
}
