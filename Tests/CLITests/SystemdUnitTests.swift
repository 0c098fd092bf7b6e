import Foundation
import SharedTestSupport
import XCTest

/// The units in examples/systemd pass `systemd-analyze verify`, with the
/// binary they name pointing at the build under test.
final class SystemdUnitTests: ToolTestCase {
    static let units = ["encfs-assets.service", "srv-assets.mount", "srv-assets.automount"]

    func testExampleUnits_PassSystemdAnalyzeVerify() throws {
        let directory = try scratch.makeDirectory("units")
        for unit in Self.units {
            let text = try String(contentsOfFile: "\(Tools.repositoryRoot)/examples/systemd/\(unit)", encoding: .utf8)
            if unit.hasSuffix(".service") {
                // Readiness comes from encfs-mount -f itself.
                XCTAssertTrue(text.contains("\nType=notify\n") && text.contains(" -f"), unit)
            }
            // verify checks that ExecStart's program exists: point it at the build.
            let runnable = text.replacingOccurrences(of: "/usr/local/bin/encfs-mount", with: try Tools.mount())
                .replacingOccurrences(of: "/usr/bin/encfs-mount", with: try Tools.mount())
            _ = try scratch.write("units/\(unit)", Array(runnable.utf8))
        }
        let result = try run("/usr/bin/systemd-analyze", ["verify"] + Self.units.map { "\(directory)/\($0)" }, timeout: 60)
        assertSuccess(result)
        XCTAssertEqual(result.errorOutput, "", result.summary)
    }
}
