import Dispatch
@testable import EncFSRemote
import SharedTestSupport
import XCTest

/// How transient failures are retried: within the retry budget and the
/// read's deadline, each attempt told the time left, and a `Retry-After`
/// that outlasts the deadline not waited for.
final class RemoteRetryPolicyTests: XCTestCase {
    func testRetries_StopAfterTheBudgetWithTheLastReason() {
        let policy = RemoteRetryPolicy(timeoutSeconds: 0, retries: 3)
        var attempts = 0
        XCTAssertThrowsError(try policy.run { (_) throws(RemoteError) -> RemoteRetryPolicy.Outcome<Int> in
            attempts += 1
            return .retry("status \(500 + attempts)", after: nil)
        }) { error in
            guard case RemoteError.gaveUp(let last)? = error as? RemoteError else { return XCTFail("\(error)") }
            XCTAssertEqual(last, "status 504")
        }
        XCTAssertEqual(attempts, 4, "the first attempt and three retries")
    }

    func testAttempts_GetTheTimeLeftAndStopAtTheDeadline() {
        let policy = RemoteRetryPolicy(timeoutSeconds: 1, retries: 1000)
        var left: [Int] = []
        XCTAssertThrowsError(try policy.run { (milliseconds) throws(RemoteError) -> RemoteRetryPolicy.Outcome<Int> in
            left.append(milliseconds)
            return .retry("stalled", after: nil)
        }) { error in
            guard case RemoteError.gaveUp? = error as? RemoteError else { return XCTFail("\(error)") }
        }
        XCTAssertFalse(left.isEmpty)
        XCTAssertLessThan(left.count, 1001, "stopped by the deadline, not by the retry budget")
        XCTAssertTrue(left.allSatisfy { $0 > 0 && $0 <= 1000 }, "\(left)")
        XCTAssertEqual(left, left.sorted(by: >), "the time left only shrinks")
    }

    func testNoDeadline_AttemptsAreUnbounded_SuccessEndsTheLoop() throws {
        let policy = RemoteRetryPolicy(timeoutSeconds: 0, retries: 2)
        var left: [Int] = []
        let value = try policy.run { (milliseconds) throws(RemoteError) -> RemoteRetryPolicy.Outcome<String> in
            left.append(milliseconds)
            return left.count < 3 ? .retry("reset", after: nil) : .done("body")
        }
        XCTAssertEqual(value, "body")
        XCTAssertEqual(left, [0, 0, 0], "0: the attempt has no time limit")
    }

    func testRetryAfterBeyondTheDeadline_GivesUpAtOnce() {
        let policy = RemoteRetryPolicy(timeoutSeconds: 2, retries: 10)
        var attempts = 0
        XCTAssertThrowsError(try policy.run { (_) throws(RemoteError) -> RemoteRetryPolicy.Outcome<Int> in
            attempts += 1
            return .retry("status 429", after: 30)
        }) { error in
            guard case RemoteError.gaveUp(let last)? = error as? RemoteError else { return XCTFail("\(error)") }
            XCTAssertEqual(last, "status 429")
        }
        XCTAssertEqual(attempts, 1, "a 30 s Retry-After cannot be honoured within 2 s")
    }

    func testErrorsThatAreNotTransient_EndTheLoopAtOnce() {
        let policy = RemoteRetryPolicy(timeoutSeconds: 0, retries: 10)
        var attempts = 0
        XCTAssertThrowsError(try policy.run { (_) throws(RemoteError) -> RemoteRetryPolicy.Outcome<Int> in
            attempts += 1
            throw .forbidden
        }) { error in
            guard case RemoteError.forbidden? = error as? RemoteError else { return XCTFail("\(error)") }
        }
        XCTAssertEqual(attempts, 1)
    }
}
