import Foundation
import SharedTestSupport
import XCTest

/// Headless Chromium renders examples/site from encfs-serve exactly as it
/// renders the source directory from file://: the page's relative CSS and
/// image load through the token prefix.
final class ServeRenderingTests: ServeTestCase {
    static let chromium = "/usr/bin/chromium"

    /// A screenshot of `url`, 800×900, in a fresh profile (nothing cached).
    func screenshot(_ url: String, _ name: String) throws -> Data {
        let png = work + "/\(name).png"
        let result = try execute(Self.chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                                             "--user-data-dir=\(work)/profile-\(name)", "--window-size=800,900",
                                             "--screenshot=\(png)", url], timeout: 120)
        guard let data = FileManager.default.contents(atPath: png), !data.isEmpty else {
            throw XCTSkip("chromium cannot start here (status \(result.status)): \(result.errorLines.suffix(3))")
        }
        return data
    }

    func testSite_RendersPixelIdenticalToTheSourceDirectory() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.chromium) else { throw XCTSkip("chromium is not installed") }
        let site = BuiltBinaries.repositoryRoot + "/examples/site"
        let key = try makeKey()
        let bundle = try pack(site, key: key)
        let server = try serve([bundle, "--key-file", key])
        let served = try screenshot(server.url + "index.html", "served")
        let direct = try screenshot("file://\(site)/index.html", "direct")
        XCTAssertEqual(served, direct, "the served page renders differently from the source directory")

        // The comparison sees a missing stylesheet and image: the same page
        // without them renders differently.
        let bare = work + "/bare"
        try FileManager.default.createDirectory(atPath: bare, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: site + "/index.html", toPath: bare + "/index.html")
        let bareServer = try serve([try pack(bare, key: key, name: "bare.encfs"), "--key-file", key])
        XCTAssertNotEqual(try screenshot(bareServer.url + "index.html", "bare"), direct)
    }
}
