import PortalTokenCore
import Testing

/// Which credential requests the Portal session answers (docs/sessions.md, "Portal origins in the credential
/// protocol").
@Suite("Credential routing")
struct CredentialRoutingTests {
    static func request(_ text: String) throws -> CredentialRequest {
        try CredentialProtocol.parse(Array((text + "\n\n").utf8))
    }

    @Test(
        "Portal's API host over https goes to the session; github.com goes to storage",
        arguments: [
            ("protocol=https\nhost=api.portalhq.io", CredentialRouting.Route.portalSession),
            ("protocol=https\nhost=mpc-client.portalhq.io", .portalSession),
            ("protocol=https\nhost=github.com", .storage),
            ("protocol=http\nhost=api.portalhq.io", .storage),
            ("protocol=ssh\nhost=api.portalhq.io", .storage),
            ("host=api.portalhq.io", .storage),
            ("protocol=https", .storage),
        ])
    func defaultHost(text: String, route: CredentialRouting.Route) throws {
        #expect(try CredentialRouting.route(Self.request(text), apiHost: nil) == route)
    }

    @Test("a configured loopback API host is a Portal origin only on its own port")
    func configuredLoopback() throws {
        let host = "http://localhost:3000"
        #expect(
            try CredentialRouting.route(Self.request("protocol=http\nhost=localhost:3000"), apiHost: host)
                == .portalSession)
        #expect(
            try CredentialRouting.route(Self.request("protocol=http\nhost=localhost:3001"), apiHost: host) == .storage)
        #expect(try CredentialRouting.route(Self.request("protocol=http\nhost=localhost"), apiHost: host) == .storage)
    }

    @Test("an unreadable API host leaves a request for another host to storage")
    func unreadableHostOtherRequest() throws {
        #expect(
            try CredentialRouting.route(Self.request("protocol=https\nhost=github.com"), apiHost: "bad host/?x")
                == .storage)
    }

    @Test("an unreadable API host is an error for a request it could be about")
    func unreadableHostPortalRequest() throws {
        #expect(throws: InvalidAPIHostError.self) {
            try CredentialRouting.route(Self.request("protocol=https\nhost=api.portalhq.io"), apiHost: "bad host/?x")
        }
        #expect(throws: InvalidAPIHostError.self) {
            try CredentialRouting.route(Self.request("protocol=https\nhost=example.test"), apiHost: "example.test/?q")
        }
    }
}
