import Dispatch
@testable import EncFSRemote
import XCTest

/// A source's backoff counts outages, not the requests they failed:
/// requests already running when the source was set aside fail with the
/// same outage and leave its backoff as it was. Three transfers stalled
/// together used to double a 4 s backoff twice, and the source's probe
/// came 16 s later instead of 4.
final class RemoteOriginBackoffTests: XCTestCase {
    private func origin(netTimeout: Int) throws -> RemoteOrigin {
        var options = RemoteOptions()
        options.netTimeout = netTimeout
        return RemoteOrigin(location: try RemoteLocation(Array("http://127.0.0.1:9/bundle.encfs".utf8)), options: options,
                            state: .healthy, etag: nil, sendsIfMatch: false, hasAlternatives: true)
    }

    private func until(_ origin: RemoteOrigin) -> UInt64 { origin.health.withLock { $0.until } }

    func testRequestsOfOneOutage_SetTheBackoffOnce() throws {
        let source = try origin(netTimeout: 4)
        let began = source.setAsideCount
        source.failed(.gaveUp(last: "stalled"), now: 1_000, since: began)
        XCTAssertEqual(until(source), 1_000 + 4_000_000_000)
        // Two more requests that began with the first fail after it.
        source.failed(.gaveUp(last: "stalled"), now: 2_000, since: began)
        source.failed(.gaveUp(last: "stalled"), now: 3_000, since: began)
        XCTAssertEqual(until(source), 1_000 + 4_000_000_000, "a failure of the same outage doubled the backoff")
        XCTAssertEqual(source.health.withLock { $0.errors }, 3, "each failed request is an error")
        XCTAssertEqual(source.setAsideCount, began + 1)
    }

    func testRequestBegunAfterTheSetAside_OrAProbe_DoublesTheBackoff() throws {
        let source = try origin(netTimeout: 4)
        source.failed(.gaveUp(last: "stalled"), now: 0, since: source.setAsideCount)
        // A read that tried the source again (no other left), then its probe.
        source.failed(.gaveUp(last: "stalled"), now: 10, since: source.setAsideCount)
        XCTAssertEqual(until(source), 10 + 8_000_000_000)
        source.failed(.gaveUp(last: "stalled"), now: 20)
        XCTAssertEqual(until(source), 20 + 16_000_000_000)
    }

    func testServingAnotherBundle_RefusesWhateverTheOutage() throws {
        let source = try origin(netTimeout: 4)
        let began = source.setAsideCount
        source.failed(.gaveUp(last: "stalled"), now: 0, since: began)
        source.failed(.notThisBundle("another header"), now: 1, since: began)
        XCTAssertEqual(source.health.withLock { $0.state }, .refused)
    }
}
