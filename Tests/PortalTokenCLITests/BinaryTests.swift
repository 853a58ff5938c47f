import Foundation
import PortalTokenTestSupport
import Testing

/// FoundationNetworking costs every invocation 6–12 ms; the binary must carry none of it.
@Suite("binary")
struct BinaryTests {
    private static var binaries: [String] {
        var paths = [ProcessRunner.portalTokenPath]
        if let release = ProcessInfo.processInfo.environment["PORTAL_TOKEN_RELEASE_BIN"] { paths.append(release) }
        return paths
    }

    @Test("the release binary is built by the test script")
    func releaseBinaryIsPresent() throws {
        let release = try #require(ProcessInfo.processInfo.environment["PORTAL_TOKEN_RELEASE_BIN"],
                                   "PORTAL_TOKEN_RELEASE_BIN is not set: run the suite through contrib/test.sh")
        #expect(FileManager.default.isExecutableFile(atPath: release))
    }

    @Test("no FoundationNetworking symbol or library in the binary", arguments: binaries)
    func noFoundationNetworking(binary: String) throws {
        let symbols = try ProcessRunner.run("/usr/bin/nm", [binary], timeout: 60)
        #expect(symbols.exitCode == 0)
        #expect(symbols.stdout.split(separator: "\n").count > 1000, "nm found too few symbols to be meaningful")
        #expect(!symbols.stdout.contains("FoundationNetworking"))
        #expect(!symbols.stdout.contains("URLSession"))
        let dynamic = try ProcessRunner.run("/usr/bin/readelf", ["--dynamic", binary], timeout: 30)
        #expect(!dynamic.stdout.contains("FoundationNetworking"))
    }

    @Test("libcurl is not linked: it is loaded only when a request is made", arguments: binaries)
    func libcurlIsNotLinked(binary: String) throws {
        let dynamic = try ProcessRunner.run("/usr/bin/readelf", ["--dynamic", binary], timeout: 30)
        #expect(dynamic.stdout.contains("(NEEDED)"))
        #expect(!dynamic.stdout.contains("libcurl"))
    }

    @Test("libqrencode is not linked: it is loaded only when a two-factor enrollment draws a code", arguments: binaries)
    func libqrencodeIsNotLinked(binary: String) throws {
        let dynamic = try ProcessRunner.run("/usr/bin/readelf", ["--dynamic", binary], timeout: 30)
        #expect(dynamic.stdout.contains("(NEEDED)"))
        #expect(!dynamic.stdout.contains("libqrencode"))
    }
}
