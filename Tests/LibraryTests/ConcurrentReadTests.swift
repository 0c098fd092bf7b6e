import Dispatch
import EncFS
import Foundation
import Synchronization
import XCTest
import SharedTestSupport

/// One `EncryptedBundle` shared by eight threads that read every file at
/// once, by every read call, compared byte for byte with the source tree.
final class ConcurrentReadTests: XCTestCase {
    func testConcurrentReads_EightThreadsMatchSourceTree() throws {
        let fixture = try LibraryFixture.shared()
        let bundle = try EncryptedBundle(path: fixture.appBundle, unlock: .keyFile(fixture.keyFile))
        // Stable order, so thread t's run can be replayed.
        let files = fixture.files.sorted { $0.key.lexicographicallyPrecedes($1.key) }
        let failures = Mutex<[String]>([])
        let bytesCompared = Atomic<Int>(0)

        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            var generator = SeededGenerator(seed: 0x7468_7265_6164 + UInt64(thread))
            func fail(_ what: String) { failures.withLock { $0.append("thread \(thread): \(what)") } }
            do {
                for round in 0..<3 {
                    // Each thread starts at another file, so different files
                    // and chunks are decrypted at the same moment.
                    for k in 0..<files.count {
                        let (path, expected) = files[(k + thread + round) % files.count]
                        let name = String(decoding: path, as: UTF8.self)
                        switch (thread + k) % 3 {
                        case 0:
                            let whole = try bundle.contents(atBytePath: path, limit: 2 << 20)
                            if Array(whole) != expected { fail("contents of \(name)") }
                        case 1:
                            // Odd steps cross chunk boundaries at ever other places.
                            let file = try bundle.openFile(atBytePath: path)
                            let step = 1000 + 517 * thread
                            var offset = 0
                            var copy: [UInt8] = []
                            while true {
                                let part = try file.read(upToCount: step, atOffset: UInt64(offset))
                                if part.isEmpty { break }
                                copy += part
                                offset += part.count
                            }
                            if copy != expected { fail("parts of \(name)") }
                        default:
                            // Random ranges into the caller's buffer.
                            let file = try bundle.openFile(atBytePath: path)
                            var buffer = [UInt8](repeating: 0, count: 9000)
                            for _ in 0..<8 {
                                let offset = Int.random(in: 0...expected.count, using: &generator)
                                let count = Int.random(in: 0...buffer.count, using: &generator)
                                let n = try buffer.withUnsafeMutableBytes {
                                    try file.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<count]), atOffset: UInt64(offset))
                                }
                                let want = expected[offset..<min(expected.count, offset + count)]
                                if n != want.count || Array(buffer[0..<n]) != Array(want) { fail("range \(offset)+\(count) of \(name)") }
                            }
                        }
                        bytesCompared.add(expected.count, ordering: .relaxed)
                    }
                }
            } catch {
                fail("\(error)")
            }
        }

        XCTAssertEqual(failures.withLock { $0 }, [])
        // Every thread went through every file three times.
        let total = files.reduce(0) { $0 + $1.value.count }
        XCTAssertEqual(bytesCompared.load(ordering: .relaxed), 8 * 3 * total)
    }
}
