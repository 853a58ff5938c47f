import PortalTokenCore
import Testing

@Suite("a query for one path's slot")
struct CredentialExactPathTests {
    @Test("an exact path matches only that path; an absent or empty one only a credential without a path")
    func exactPath() {
        let host = CredentialHost(server: "forge.example", port: nil)
        let scoped = Credential(
            protocolName: "https", host: host, path: "team/app.git", username: "bob", password: Secret("b"))
        let hostWide = Credential(
            protocolName: "https", host: host, path: nil, username: "robot", password: Secret("r"))
        var query = CredentialQuery(protocolName: "https", host: host)
        #expect(query.matches(scoped) && query.matches(hostWide), "git's absent path matches every path")
        query.pathIsExact = true
        #expect(!query.matches(scoped) && query.matches(hostWide))
        query.path = ""
        #expect(!query.matches(scoped) && query.matches(hostWide))
        query.path = "team/app.git"
        #expect(query.matches(scoped) && !query.matches(hostWide))
    }
}
