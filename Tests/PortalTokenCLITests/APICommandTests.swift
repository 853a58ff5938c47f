import Foundation
import PortalTokenTestSupport
import Testing

/// `api`: paths that could split a request line are usage errors, `-H` adds headers but never
/// the ones portal-token owns, and the output ends with a newline (product contract §3).
@Suite("api")
struct APICommandTests {
    @Test("a path with a space or a control character is a usage error (exit 2), and nothing is sent")
    func pathsWithSpaces() throws {
        let portal = try PortalHarness(backend: .file)
        portal.server.registerLiveToken("token-api")
        #expect(try portal.adopt(token: "token-api").exitCode == 0)
        for path in ["/api/v3/clients/me HTTP/1.0", "/api/v3/clients/me\r\nX-Injected: 1", "/api/v3/\u{1b}[31m", "/api/v3/\tx", "/api/v3/\u{7f}"] {
            let result = try portal.git.portalToken(["api", path])
            #expect(result.exitCode == 2, "\(result.stderr)")
            #expect(result.stderr.hasPrefix("portal-token: error: the API path holds a space or a control character"))
            #expect(result.stderr.contains("hint: percent-encode it"))
        }
        #expect(portal.server.requests.isEmpty)
    }

    @Test("'--' before PATH ends the options and is not read as the path")
    func doubleDash() throws {
        let portal = try PortalHarness(backend: .file)
        portal.server.registerLiveToken("token-api")
        #expect(try portal.adopt(token: "token-api").exitCode == 0)
        for arguments in [["api", "--", "/api/v3/clients/me"], ["api", "-X", "GET", "--", "/api/v3/clients/me"]] {
            let result = try portal.git.portalToken(arguments)
            #expect(result.exitCode == 0, "\(arguments): \(result.stderr)")
            #expect(result.stdout.hasPrefix("{"))
        }
        #expect(portal.requests(to: "/api/v3/clients/me").count == 2)
        let missing = try portal.git.portalToken(["api", "--"])
        #expect(missing.exitCode == 2)
        #expect(missing.stderr.hasPrefix("portal-token: error: 'api' needs a PATH"))
    }

    @Test("-H adds repeatable headers; the output ends with a newline")
    func headersAndNewline() throws {
        let portal = try PortalHarness(backend: .file)
        portal.server.registerLiveToken("token-api")
        #expect(try portal.adopt(token: "token-api").exitCode == 0)
        let result = try portal.git.portalToken(["api", "-H", "X-Request-Id: 42", "-H", "x-other:  two words ", "/api/v3/clients/me"])
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("{") && result.stdout.hasSuffix("}\n"))
        let request = try #require(portal.requests(to: "/api/v3/clients/me").first)
        #expect(request.header("X-Request-Id") == "42")
        #expect(request.header("X-Other") == "two words")
        #expect(request.headerCount("Accept") == 1)
        #expect(request.bearerToken == "token-api")
    }

    @Test("a request body on stdin (--data @-) past 8 MiB is a usage error (exit 2), as from a file, and nothing is sent")
    func oversizedBodyOnStdin() throws {
        let portal = try PortalHarness(backend: .file)
        portal.server.registerLiveToken("token-api")
        #expect(try portal.adopt(token: "token-api").exitCode == 0)
        // Valid JSON, so only the bound can refuse it.
        let body = #"{"a":""# + String(repeating: "x", count: 9 << 20) + #""}"#
        let result = try portal.git.portalToken(["api", "-d", "@-", "/api/v3/clients/me"], stdin: body)
        #expect(result.exitCode == 2, "\(result.stderr)")
        #expect(result.stderr.hasPrefix("portal-token: error: cannot read the request body from stdin: larger than 8 MiB"))
        #expect(portal.requests(to: "/api/v3/clients/me").isEmpty)
        // One within the bound goes through.
        let small = try portal.git.portalToken(["api", "-X", "GET", "-d", "@-", "/api/v3/clients/me"], stdin: #"{"a":1}"#)
        #expect(small.exitCode == 0, "\(small.stderr)")
    }

    @Test("-H refuses Authorization, Host and malformed headers before anything is sent", arguments: [
        "Authorization: Bearer other", "host: evil.example", "HOST:x", "Content-Length: 5", "accept: text/html", "X-Portal-Trace-Id: 1", "no colon here", ": empty name",
        "Bad Name: x", "X-Split: a\r\nX-Injected: 1",
    ])
    func refusedHeaders(header: String) throws {
        let portal = try PortalHarness(backend: .file)
        portal.server.registerLiveToken("token-api")
        #expect(try portal.adopt(token: "token-api").exitCode == 0)
        let result = try portal.git.portalToken(["api", "-H", header, "/api/v3/clients/me"])
        #expect(result.exitCode == 2, "\(result.stderr)")
        #expect(result.stderr.hasPrefix("portal-token: error: -H"))
        #expect(!result.stderr.contains("Bearer other") && !result.stderr.contains("evil.example"))
        #expect(portal.server.requests.isEmpty)
    }
}
