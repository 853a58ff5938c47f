import Basics
import PortalTokenCore
import Testing

/// docs/portal-api.md, "Base URL": apiHost → base URL.
@Suite("API host resolution")
struct PortalAPIBaseTests {
    @Test(
        "an API host resolves to its base URL",
        arguments: [
            ("api.portalhq.io", "https://api.portalhq.io"),
            ("localhost:3000", "http://localhost:3000"),
            ("127.0.0.1:3000", "http://127.0.0.1:3000"),
            ("localhost", "http://localhost"),
            ("10.0.2.2:3000", "https://10.0.2.2:3000"),
            ("http://staging.example.com", "http://staging.example.com"),
            ("https://staging.example.com", "https://staging.example.com"),
            ("api.portalhq.dev", "https://api.portalhq.dev"),
            ("localhost.attacker.com", "https://localhost.attacker.com"),
            ("127.0.0.1.attacker.com", "https://127.0.0.1.attacker.com"),
            ("api.portalhq.io/", "https://api.portalhq.io"),
            ("  api.portalhq.io//\n", "https://api.portalhq.io"),
            ("HTTPS://Staging.Example.com", "HTTPS://Staging.Example.com"),
        ])
    func resolves(apiHost: String, expected: String) throws {
        #expect(try PortalAPIBase(apiHost: apiHost).url == expected)
    }

    @Test("the default API host is Portal's production API")
    func defaultHost() throws {
        #expect(try PortalAPIBase().url == "https://api.portalhq.io")
    }

    @Test("request URLs are the base plus the path")
    func requestURLs() throws {
        #expect(
            try PortalAPIBase(apiHost: "api.portalhq.io/").url(path: "/api/v3/auth/methods")
                == "https://api.portalhq.io/api/v3/auth/methods")
        #expect(
            try PortalAPIBase(apiHost: "localhost:3000").url(path: "/api/v3/auth/magic-links/validations")
                == "http://localhost:3000/api/v3/auth/magic-links/validations")
    }

    @Test(
        "an empty or malformed API host is refused without repeating it",
        arguments: [
            "", "   ", "bad host with spaces", "https://", "https://user@api.portalhq.io", "api.portalhq.io?x=1",
            "api_portal.example", "https://api.portalhq.io%2f.evil", "localhost:", "api.portalhq.io:x", ":3000",
        ])
    func refuses(apiHost: String) {
        #expect(throws: InvalidAPIHostError()) { try PortalAPIBase(apiHost: apiHost) }
        #expect(!InvalidAPIHostError().message.contains(apiHost) || apiHost.trimmingWhitespace.isEmpty)
    }
}
