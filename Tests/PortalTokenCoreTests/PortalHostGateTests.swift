import PortalTokenCore
import Testing

/// Every vector (docs/portal-api.md, "Portal hosts"), as tables.
@Suite("Portal host gates")
struct PortalHostGateTests {
    static let noRegisteredHosts = PortalHostRegistry()

    // MARK: (docs/portal-api.md, "Portal hosts") isPortalOwnedUrl

    static let ownedURLs = [
        "https://api.portalhq.io/api/v3/clients/me", "https://mpc-client.portalhq.io/v1/sign",
        "https://portalhq.io/x", "https://api.portalhq.dev/x", "https://portalhq.dev/x", "https://web.portalhq.io/",
        "wss://connect.portalhq.io", "http://localhost:3001/x", "http://127.0.0.1:3001/x", "http://[::1]:3001/x",
        "http://[::1]/x", "http://app.localhost/x", "https://API.PortalHQ.IO/x", "https://API.PORTALHQ.IO/",
        "HTTPS://api.portalhq.io/", "https://api.portalhq.io./x", "https://portalhq.io./x",
        "https://api.portalhq.io.../x", "https://api.portalhq.io:443/x", "https://api.portalhq.io:8443/x",
        "http://localhost:65535/", "https://user:pass@api.portalhq.io/", "https://a1-b2.portalhq.dev/",
        "ws://api.portalhq.io", "http://api.portalhq.io", "ftp://api.portalhq.io",
    ]

    static let unownedURLs = [
        "https://www.googleapis.com/drive/v3/files", "https://min-api.cryptocompare.com/data/price",
        "https://eth.llamarpc.com", "https://api.portalhq.io@attacker.com/rpc",
        "https://api.portalhq.io:x@attacker.com/",
        "https://api.portalhq.attacker.com/rpc", "https://api.portalhq.io.attacker.com/rpc",
        "https://portalhq.io.attacker.com/rpc",
        "https://evil-portalhq.com/rpc", "https://notportalhq.io/rpc", "https://portalhq.io.evil.dev/rpc",
        "https://portalhq.io.evil.com/", "https://xportalhq.io/", "https://portalhq.iox/",
        "https://portalhq.dev.evil.com/",
        "https://myportalhq.io/", "https://api-portalhq.io/", "https://apiportalhq.dev/",
        "https://localhost.attacker.com/rpc", "https://127.0.0.1.attacker.com/", "https://127.0.0.10/",
        "https://localhostx/",
        "https://notlocalhost/", "https://10.0.2.2.attacker.com/rpc", "https://attacker.com/api.portalhq.io/rpc",
        "https://attacker.com/?u=https://api.portalhq.io", "https://attacker.com/#api.portalhq.io",
        "https://attacker.com%2f.portalhq.io/rpc", "https://attacker.com%2F.portalhq.io/rpc",
        "https://a%2eportalhq%2eio/", "https://a%2Eportalhq%2Eio/",
        "https://api%2eportalhq.io/", "https://api.portalhq.io%2e/", "https://attacker.com%23.portalhq.io/",
        "https://attacker.com%3f.portalhq.io/", "https://attacker.com%40api.portalhq.io/", "http://[fe80::1%25en0]/",
        "//api.portalhq.io/api", "api.portalhq.io/api/v3/clients/me", "api.portalhq.io", "localhost:3001",
        "", "   ", "\n", "not-a-url", "::::", "https://", "https:///path", "https://?x=1", "https://#frag",
        "https:// api.portalhq.io", "https://api.portalhq.io\u{0000}", "https://xn--portalhq-x0a.io/",
        "https://p\u{043E}rtalhq.io/", "https://api.portalhq.io\u{FF0E}attacker.com/", "http://[fe80::1]/",
        "http://[::1].attacker.com/", "http://[/", "https://api.portalhq.io:x/", "https://api:portalhq.io/",
        "https://_api.portalhq.io/", "https://-api.portalhq.io/", "https://api..portalhq.io/", "https://.portalhq.io/",
    ]

    @Test("a Portal, loopback or apex URL is Portal-owned", arguments: ownedURLs)
    func owned(url: String) {
        #expect(PortalHostGate.isPortalOwnedURL(url, registeredHosts: Self.noRegisteredHosts))
    }

    @Test("a look-alike, a userinfo trick, a percent trick or a non-URL is not Portal-owned", arguments: unownedURLs)
    func notOwned(url: String) {
        #expect(!PortalHostGate.isPortalOwnedURL(url, registeredHosts: Self.noRegisteredHosts))
    }

    static let custodianRegistry = PortalHostRegistry(["api.custodian.example"])

    @Test(
        "a registered host is owned exactly, with any case and a trailing dot",
        arguments: [
            "https://api.custodian.example/api/v3/clients/me", "https://API.Custodian.Example/api/v3/clients/me",
            "https://api.custodian.example./api/v3/clients/me",
        ])
    func registeredHostOwned(url: String) {
        #expect(PortalHostGate.isPortalOwnedURL(url, registeredHosts: Self.custodianRegistry))
        #expect(!PortalHostGate.isPortalOwnedURL(url, registeredHosts: Self.noRegisteredHosts))
    }

    @Test(
        "a subdomain, suffix or path look-alike of a registered host is not owned",
        arguments: [
            "https://rpc.api.custodian.example/rpc", "https://api.custodian.example.attacker.com/rpc",
            "https://notapi.custodian.example/rpc", "https://custodian.example/rpc",
            "https://attacker.com/api.custodian.example",
            "https://api.custodian.example@attacker.com/rpc",
        ])
    func registeredHostLookAlikes(url: String) {
        #expect(!PortalHostGate.isPortalOwnedURL(url, registeredHosts: Self.custodianRegistry))
    }

    static let mixedRegistry = PortalHostRegistry([
        "https://proxy.custodian.example:8443/some/path?x=1", "mpc.custodian.example:9000", "   ",
        "attacker.com%2f.portalhq.io", "[2001:db8::1]", "user@evil.example",
    ])

    @Test("registration keeps hosts of URLs and host:port values and ignores blanks, percent, IPv6 and userinfo")
    func registration() {
        #expect(Self.mixedRegistry.hosts == ["proxy.custodian.example", "mpc.custodian.example"])
    }

    @Test(
        "registered hosts are owned on any scheme and port",
        arguments: [
            "https://proxy.custodian.example/x", "wss://mpc.custodian.example/v1/sign",
        ])
    func registeredFromMixedValues(url: String) {
        #expect(PortalHostGate.isPortalOwnedURL(url, registeredHosts: Self.mixedRegistry))
    }

    @Test(
        "values that registration ignored stay unowned",
        arguments: [
            "https://evil.example/x", "https://attacker.com/x", "http://[2001:db8::1]/x",
        ])
    func ignoredRegistrations(url: String) {
        #expect(!PortalHostGate.isPortalOwnedURL(url, registeredHosts: Self.mixedRegistry))
    }

    // MARK: Long inputs

    static let longUnownedURLs: [(name: String, url: String)] = [
        (
            "an 8192-byte URL with an 8 KB label under .portalhq.io",
            "https://" + String(repeating: "a", count: 8192 - 8 - 13) + ".portalhq.io/"
        ),
        ("200 000 slashes", String(repeating: "/", count: 200_000)),
        ("https:// and 200 000 letters", "https://" + String(repeating: "a", count: 200_000) + "/"),
        ("https:// and 200 000 %2f", "https://" + String(repeating: "%2f", count: 200_000) + "/"),
        (
            "attacker.com, 200 000 %2f, then .portalhq.io",
            "https://attacker.com" + String(repeating: "%2f", count: 200_000) + ".portalhq.io/"
        ),
    ]

    @Test("long inputs are refused by both gates in well under a second each")
    func longInputs() {
        #expect(Self.longUnownedURLs[0].url.utf8.count == 8192)
        let endpoints = PortalEndpoint.normalize(["api.portalhq.io"])
        for (name, url) in Self.longUnownedURLs {
            let elapsed = ContinuousClock().measure {
                #expect(!PortalHostGate.isPortalOwnedURL(url, registeredHosts: Self.noRegisteredHosts), "\(name)")
                #expect(!PortalHostGate.allowsBearer(url, configuredEndpoints: endpoints), "\(name)")
            }
            #expect(elapsed < .seconds(1), "\(name)")
        }
    }

    @Test("1024 trailing dots after a Portal host still read as that host, quickly")
    func manyTrailingDots() {
        let url = "https://api.portalhq.io" + String(repeating: ".", count: 1024) + "/x"
        let elapsed = ContinuousClock().measure {
            #expect(PortalHostGate.isPortalOwnedURL(url, registeredHosts: Self.noRegisteredHosts))
        }
        #expect(elapsed < .seconds(1))
    }

    // MARK: (docs/portal-api.md, "Portal hosts") the bearer gate

    static let mineEndpoints = PortalEndpoint.normalize([
        "API.Mine.Example.", "https://mpc.mine.example:8443/path", "not a host%",
    ])

    @Test("normalising endpoints keeps host and port and drops what is not a host")
    func normalizesEndpoints() {
        #expect(Self.mineEndpoints.map(\.host) == ["api.mine.example", "mpc.mine.example"])
        #expect(Self.mineEndpoints.map(\.port) == [nil, 8443])
        #expect(PortalEndpoint.normalize(["[::1]:3001", "http://[::1]:3001"]).isEmpty)
    }

    struct BearerCase: Sendable, CustomTestStringConvertible {
        var configured: [String]
        var url: String
        var allowed: Bool
        var testDescription: String { "\(url) with \(configured) → \(allowed ? "bearer" : "no bearer")" }
    }

    static let mine = ["API.Mine.Example.", "https://mpc.mine.example:8443/path", "not a host%"]

    static let bearerCases: [BearerCase] = [
        // Configured endpoints and look-alikes.
        .init(configured: mine, url: "https://api.mine.example/rpc", allowed: true),
        .init(configured: mine, url: "https://API.Mine.Example./rpc", allowed: true),
        .init(configured: mine, url: "https://mpc.mine.example:8443/rpc", allowed: true),
        .init(configured: mine, url: "https://rpc.mpc.mine.example/rpc", allowed: false),
        .init(configured: mine, url: "https://api.mine.example.attacker.com/rpc", allowed: false),
        .init(configured: mine, url: "https://notapi.mine.example/rpc", allowed: false),
        .init(configured: mine, url: "https://rpc.api.custodian.example/rpc", allowed: false),
        .init(configured: [], url: "https://api.portalhq.io/rpc", allowed: true),
        .init(configured: mine, url: "https://api.portalhq.io/rpc", allowed: true),
        .init(configured: mine, url: "https://API.PORTALHQ.IO./rpc", allowed: true),
        .init(configured: mine, url: "https://attacker.com%2f.portalhq.io/rpc", allowed: false),
        .init(configured: mine, url: "https://api.mine.example@attacker.com/rpc", allowed: false),
        .init(configured: mine, url: "//api.portalhq.io/rpc", allowed: false),
        // Ports.
        .init(configured: ["api.mine.example"], url: "https://api.mine.example/rpc", allowed: true),
        .init(configured: ["api.mine.example"], url: "https://api.mine.example:443/rpc", allowed: true),
        .init(configured: ["api.mine.example"], url: "https://api.mine.example:8443/rpc", allowed: false),
        .init(configured: ["api.mine.example:8443"], url: "https://api.mine.example:8443/rpc", allowed: true),
        .init(configured: ["api.mine.example:8443"], url: "https://api.mine.example/rpc", allowed: false),
        .init(configured: ["api.mine.example:8443"], url: "https://api.mine.example:443/rpc", allowed: false),
        .init(configured: [], url: "https://api.portalhq.io:8443/rpc", allowed: true),
        // Cleartext and other schemes.
        .init(configured: mine, url: "http://api.portalhq.io/rpc", allowed: false),
        .init(configured: mine, url: "http://web.portalhq.io/rpc", allowed: false),
        .init(configured: mine, url: "http://api.portalhq.dev/rpc", allowed: false),
        .init(configured: mine, url: "http://api.mine.example/rpc", allowed: false),
        .init(configured: mine, url: "HTTP://api.mine.example/rpc", allowed: false),
        .init(configured: mine, url: "HTTPS://api.mine.example/rpc", allowed: true),
        .init(configured: mine, url: "wss://api.portalhq.io/rpc", allowed: false),
        .init(configured: mine, url: "ftp://api.mine.example/rpc", allowed: false),
        // Loopback.
        .init(configured: [], url: "http://localhost:8545", allowed: false),
        .init(configured: ["localhost:3001"], url: "http://localhost:8545", allowed: false),
        .init(configured: ["localhost:3001"], url: "http://127.0.0.1:3001/rpc", allowed: false),
        .init(configured: ["localhost:3001"], url: "http://api.localhost:3001/rpc", allowed: false),
        .init(configured: ["localhost:3001"], url: "http://localhost:3001/rpc/v1/eip155/1", allowed: true),
        .init(configured: ["localhost:3001"], url: "https://localhost:3001/rpc/v1/eip155/1", allowed: true),
        .init(configured: ["localhost:3001"], url: "http://LOCALHOST.:3001/rpc", allowed: true),
        .init(configured: ["localhost"], url: "http://localhost/rpc", allowed: true),
        .init(configured: ["localhost"], url: "http://localhost:80/rpc", allowed: true),
        .init(configured: ["localhost"], url: "https://localhost/rpc", allowed: true),
        .init(configured: ["localhost"], url: "http://localhost:8545/rpc", allowed: false),
        .init(configured: ["127.0.0.1:3001", "api.localhost:3001"], url: "http://127.0.0.1:3001/rpc", allowed: true),
        .init(
            configured: ["127.0.0.1:3001", "api.localhost:3001"], url: "http://api.localhost:3001/rpc", allowed: true),
        .init(configured: ["127.0.0.1:3001", "api.localhost:3001"], url: "http://127.0.0.1:3002/rpc", allowed: false),
        .init(configured: ["127.0.0.1:3001", "api.localhost:3001"], url: "http://localhost:3001/rpc", allowed: false),
        .init(configured: ["[::1]:3001", "http://[::1]:3001"], url: "http://[::1]:3001/rpc", allowed: false),
        .init(configured: [], url: "http://[::1]:3001/rpc", allowed: false),
        .init(configured: [], url: "https://api.portalhq.io/rpc/v1/eip155/1", allowed: true),
        // An API host configured with an explicit http:// is the one cleartext non-loopback endpoint.
        .init(
            configured: ["http://staging.example.com"], url: "http://staging.example.com/api/v3/clients/me",
            allowed: true),
        .init(
            configured: ["http://staging.example.com"], url: "https://staging.example.com/api/v3/clients/me",
            allowed: true),
        .init(configured: ["http://staging.example.com"], url: "http://staging.example.com:8080/x", allowed: false),
        .init(configured: ["http://staging.example.com"], url: "http://other.example.com/x", allowed: false),
        .init(configured: ["staging.example.com"], url: "http://staging.example.com/x", allowed: false),
    ]

    @Test("the bearer goes only to https Portal domains or exactly a configured host and port", arguments: bearerCases)
    func bearerGate(testCase: BearerCase) {
        let endpoints = PortalEndpoint.normalize(testCase.configured)
        #expect(PortalHostGate.allowsBearer(testCase.url, configuredEndpoints: endpoints) == testCase.allowed)
    }

    @Test("[::1] is owned for the trace id yet never receives the bearer")
    func ipv6LoopbackOwnedButNeverBearer() {
        #expect(PortalHostGate.isPortalOwnedURL("http://[::1]:3001/rpc", registeredHosts: Self.noRegisteredHosts))
        #expect(
            !PortalHostGate.allowsBearer(
                "http://[::1]:3001/rpc",
                configuredEndpoints: PortalEndpoint.normalize(["[::1]:3001"])))
    }

    @Test(
        "every URL the bearer gate allows is also Portal-owned for the gate built from the API host",
        arguments: [
            "api.portalhq.io", "localhost:3000", "127.0.0.1:3000", "https://api.mine.example:8443",
            "http://staging.example.com",
        ])
    func bearerImpliesOwned(apiHost: String) throws {
        let base = try PortalAPIBase(apiHost: apiHost)
        let gate = PortalHostGate(apiBase: base)
        let url = base.url(path: "/api/v3/clients/me")
        #expect(gate.allowsBearer(url))
        #expect(gate.isPortalOwned(url))
    }

    // MARK: Credential-protocol origins

    struct OriginCase: Sendable, CustomTestStringConvertible {
        var apiHost: String
        var protocolName: String
        var host: String
        var isPortal: Bool
        var testDescription: String { "\(protocolName)://\(host) with API host \(apiHost) → \(isPortal)" }
    }

    @Test(
        "git's protocol and host name a Portal origin by the bearer rule",
        arguments: [
            OriginCase(apiHost: "api.portalhq.io", protocolName: "https", host: "api.portalhq.io", isPortal: true),
            OriginCase(apiHost: "api.portalhq.io", protocolName: "HTTPS", host: "API.PortalHQ.io", isPortal: true),
            OriginCase(
                apiHost: "api.portalhq.io", protocolName: "https", host: "web.portalhq.dev:8443", isPortal: true),
            OriginCase(apiHost: "api.portalhq.io", protocolName: "http", host: "api.portalhq.io", isPortal: false),
            OriginCase(
                apiHost: "api.portalhq.io", protocolName: "https", host: "api.portalhq.io.attacker.com", isPortal: false
            ),
            OriginCase(
                apiHost: "api.portalhq.io", protocolName: "https", host: "attacker.com/.portalhq.io", isPortal: false),
            OriginCase(
                apiHost: "api.portalhq.io", protocolName: "https", host: "attacker.com@api.portalhq.io", isPortal: false
            ),
            OriginCase(apiHost: "api.portalhq.io", protocolName: "https", host: "api.portalhq.io%2f", isPortal: false),
            OriginCase(apiHost: "api.portalhq.io", protocolName: "https", host: "api.portalhq.io\\x", isPortal: false),
            OriginCase(apiHost: "api.portalhq.io", protocolName: "https", host: "", isPortal: false),
            OriginCase(apiHost: "api.portalhq.io", protocolName: "ssh", host: "api.portalhq.io", isPortal: false),
            OriginCase(apiHost: "api.portalhq.io", protocolName: "https", host: "github.com", isPortal: false),
            OriginCase(apiHost: "localhost:3000", protocolName: "http", host: "localhost:3000", isPortal: true),
            OriginCase(apiHost: "localhost:3000", protocolName: "http", host: "localhost:3001", isPortal: false),
            OriginCase(apiHost: "localhost:3000", protocolName: "http", host: "localhost", isPortal: false),
            OriginCase(apiHost: "localhost:3000", protocolName: "http", host: "127.0.0.1:3000", isPortal: false),
            OriginCase(apiHost: "localhost:3000", protocolName: "http", host: "[::1]:3000", isPortal: false),
            OriginCase(apiHost: "api.mine.example", protocolName: "https", host: "api.mine.example", isPortal: true),
            OriginCase(apiHost: "api.mine.example", protocolName: "http", host: "api.mine.example", isPortal: false),
        ])
    func portalOrigin(testCase: OriginCase) throws {
        let gate = PortalHostGate(apiBase: try PortalAPIBase(apiHost: testCase.apiHost))
        #expect(gate.isPortalOrigin(protocolName: testCase.protocolName, host: testCase.host) == testCase.isPortal)
    }
}

@Suite("routing with an unreadable API host")
struct UnreadableAPIHostRoutingTests {
    @Test(
        "Portal's own domains, loopback and a host the bad value names may be Portal's; other hosts are not",
        arguments: [
            ("https", "api.portalhq.io", true),
            ("https", "mpc-client.portalhq.io", true),
            ("https", "mine.example", true),
            ("https", "MINE.example:8443", true),
            ("https", "github.com", false),
            ("https", "gitlab.example.com", false),
            ("ssh", "api.portalhq.io", false),
        ])
    func routing(protocolName: String, host: String, mayBePortal: Bool) {
        #expect(
            PortalHostGate.mayBePortalOrigin(
                protocolName: protocolName, host: host,
                unreadableAPIHost: "https://mine.example/ bad") == mayBePortal)
    }
}
