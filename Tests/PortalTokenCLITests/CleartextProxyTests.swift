import Foundation
import PortalTokenTestSupport
import Testing

/// A request carrying the token over cleartext http:// never goes through a proxy, whichever
/// way the loopback host is spelled (docs/security.md, "Hardening rules").
@Suite("cleartext requests and proxies")
struct CleartextProxyTests {
    @Test("refresh and api over http:// reach Portal directly; the proxy sink receives nothing")
    func noProxyForCleartext() throws {
        let portal = try PortalHarness(backend: .file)
        let sink = try FakePortalServer(strict: false)
        defer { sink.stop() }
        portal.server.registerLiveToken("token-proxy")
        #expect(try portal.adopt(token: "token-proxy").exitCode == 0)
        let proxy = "http://127.0.0.1:\(sink.port)"
        let port = portal.server.port
        for host in [
            "http://127.1:\(port)", "http://127.0.0.1:\(port)", "http://localhost:\(port)", "127.0.0.1:\(port)",
            "http://2130706433:\(port)", "http://127.000.000.001:\(port)",
        ] {
            var environment = portal.git.environment
            for name in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"] {
                environment[name] = proxy
            }
            environment["no_proxy"] = nil
            environment["NO_PROXY"] = nil
            environment["PORTAL_API_HOST"] = host
            let refresh = try ProcessRunner.portalToken(["refresh"], environment: environment)
            #expect(refresh.exitCode == 0, "\(host): \(refresh.stderr)")
            let api = try ProcessRunner.portalToken(["api", "/api/v3/clients/me"], environment: environment)
            #expect(api.exitCode == 0, "\(host): \(api.stderr)")
        }
        #expect(portal.requests(to: "/api/v3/clients/me").count == 12)
        #expect(sink.requests.isEmpty && sink.violations.isEmpty, "\(sink.requests)")

        // The control: an https request does use the proxy, and the sink sees its CONNECT.
        var environment = portal.git.environment
        environment["HTTPS_PROXY"] = proxy
        environment["https_proxy"] = proxy
        environment["PORTAL_API_HOST"] = "https://api.portalhq.io"
        _ = try ProcessRunner.portalToken(["refresh"], environment: environment)
        #expect(!sink.requests.isEmpty || !sink.violations.isEmpty)
    }
}
