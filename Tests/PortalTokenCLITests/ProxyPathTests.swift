import Foundation
import PortalTokenTestSupport
import Testing

/// Paths a server behind the proxy could read as another: refused by the proxy itself, with no
/// request upstream and so no bearer sent anywhere.
@Suite("the proxy's path filter")
struct ProxyPathTests {
    @Test("';' in a segment, '%25', overlong UTF-8 and every escape of a byte of 0x80 or more: 403, nothing upstream")
    func encodedPaths() throws {
        let (portal, token) = try ProxyTests.signedIn()
        let before = portal.server.connectionCount
        let paths = [
            "/api/v3/clients/me/..;/..;/auth/methods", "/api/v3/clients/me;jsessionid=x",
            "/api/v3/clients/me/%252e%252e/%252e%252e/auth/methods", "/api/v3/clients/me/%25",
            "/api/v3/clients/me/%c0%ae%c0%ae/%c0%ae%c0%ae/auth/methods", "/api/v3/clients/me/%C0%AF",
            "/api/v3/clients/me/%e0%80%ae", "/api/v3/clients/me/%80", "/api/v3/clients/me/%ff",
            "/api/v3/clients/me/%3b", "/api/v3/clients/me/%zz", "/api/v3/clients/me/%2",
        ]
        let script = paths.enumerated().map { index, path in
            "c -o /dev/null -w 'p\(index)=%{http_code}\\n' -H \"$H\" $J --path-as-is \"http://$PORTAL_API_HOST\(path)\""
        }.joined(separator: "\n")
        let result = try ProxyTests.exec(portal, script)
        #expect(result.exitCode == 0, "\(result.stderr)")
        for index in paths.indices {
            #expect(result.stdout.contains("p\(index)=403\n"), "\(paths[index]): \(result.stdout)")
        }
        #expect(portal.server.connectionCount == before)
        #expect(portal.server.requests.isEmpty, "\(portal.server.requests)")
        #expect(!result.stdout.contains(token) && !result.stderr.contains(token))
    }
}
