import Foundation
import PortalTokenTestSupport
import Testing

/// `api` against the fake Portal server: `-H` headers arrive, the output ends with a newline,
/// and a body on a real stdin is bounded (its argument checks run in-process).
@Suite("api")
struct APICommandTests {
    @Test("-H adds repeatable headers; the output ends with a newline")
    func headersAndNewline() throws {
        let portal = try PortalHarness(backend: .file)
        portal.server.registerLiveToken("token-api")
        #expect(try portal.adopt(token: "token-api").exitCode == 0)
        let result = try portal.git.portalToken([
            "api", "-H", "X-Request-Id: 42", "-H", "x-other:  two words ", "/api/v3/clients/me",
        ])
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("{") && result.stdout.hasSuffix("}\n"))
        let request = try #require(portal.requests(to: "/api/v3/clients/me").first)
        #expect(request.header("X-Request-Id") == "42")
        #expect(request.header("X-Other") == "two words")
        #expect(request.headerCount("Accept") == 1)
        #expect(request.bearerToken == "token-api")
    }

    @Test(
        "a request body on stdin (--data @-) past 8 MiB is a usage error (exit 2), as from a file, and nothing is sent")
    func oversizedBodyOnStdin() throws {
        let portal = try PortalHarness(backend: .file)
        portal.server.registerLiveToken("token-api")
        #expect(try portal.adopt(token: "token-api").exitCode == 0)
        // Valid JSON, so only the bound can refuse it.
        let body = #"{"a":""# + String(repeating: "x", count: 9 << 20) + #""}"#
        let result = try portal.git.portalToken(["api", "-d", "@-", "/api/v3/clients/me"], stdin: body)
        #expect(result.exitCode == 2, "\(result.stderr)")
        #expect(
            result.stderr.hasPrefix("portal-token: error: cannot read the request body from stdin: larger than 8 MiB"))
        #expect(portal.requests(to: "/api/v3/clients/me").isEmpty)
        // One within the bound goes through.
        let small = try portal.git.portalToken(
            ["api", "-X", "GET", "-d", "@-", "/api/v3/clients/me"], stdin: #"{"a":1}"#)
        #expect(small.exitCode == 0, "\(small.stderr)")
    }

    @Test("a PATH without its leading slash is the same path; a refused connection names the port")
    func relativePathAndRefusedPort() throws {
        let portal = try PortalHarness(backend: .file)
        portal.server.registerLiveToken("token-api-relative")
        #expect(try portal.adopt(token: "token-api-relative").exitCode == 0)
        let result = try portal.git.portalToken(["api", "api/v3/clients/me"])
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("{"))
        #expect(try #require(portal.requests(to: "/api/v3/clients/me").first).bearerToken == "token-api-relative")
        // A port nothing listens on: the message says which one.
        let closed = freeLoopbackPort()
        var environment = portal.git.environment
        environment["PORTAL_API_HOST"] = "127.0.0.1:\(closed)"
        let refused = try ProcessRunner.portalToken(["api", "/api/v3/clients/me"], environment: environment)
        #expect(refused.exitCode == 5, "\(refused.stderr)")
        #expect(refused.stderr.contains("could not connect to 127.0.0.1:\(closed)"), "\(refused.stderr)")
    }
}
