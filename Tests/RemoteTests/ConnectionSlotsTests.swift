import Dispatch
import Foundation
@testable import EncFSRemote
import Synchronization
import XCTest

/// A source's connection slots go to a read that waits before any
/// background request (prefetch list, `--prefetch all`, probes), whatever
/// came first; background work still gets every slot no read wants.
final class ConnectionSlotsTests: XCTestCase {
    func testWaitingRead_GetsTheSlotBeforeEarlierBackgroundWaiter() {
        let slots = ConnectionSlots(count: 1)
        XCTAssertTrue(slots.acquire(.read, until: .now() + 10))
        let order = Mutex<[String]>([])
        let done = DispatchGroup()
        func waiter(_ priority: ConnectionSlots.Priority, _ name: String) {
            done.enter()
            Thread.detachNewThread {
                if slots.acquire(priority, until: .now() + 30) {
                    order.withLock { $0.append(name) }
                    slots.release()
                }
                done.leave()
            }
        }
        // The background request waits first; the read comes later. The
        // pauses only order the arrivals; nothing is timed.
        waiter(.background, "background")
        usleep(200_000)
        waiter(.read, "read")
        usleep(200_000)
        slots.release()
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(order.withLock { $0 }, ["read", "background"])
    }

    func testBackground_TakesFreeSlots_AndGivesUpAtItsDeadline() {
        let slots = ConnectionSlots(count: 2)
        XCTAssertTrue(slots.acquire(.background, until: .now() + 10))
        XCTAssertTrue(slots.acquire(.background, until: .distantFuture))
        XCTAssertFalse(slots.acquire(.background, until: .now() + .milliseconds(100)), "a third slot out of two")
        XCTAssertFalse(slots.acquire(.read, until: .now() + .milliseconds(100)))
        slots.release()
        XCTAssertTrue(slots.acquire(.read, until: .now() + 10))
    }
}
