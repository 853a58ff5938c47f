import Foundation
import PortalTokenTestSupport
import Testing

/// Every scenario of git's own credential-helper test suite (t/lib-credential.sh), run with real
/// `git credential fill/approve/reject` against portal-token on each backend.
@Suite("git credential scenarios")
struct GitCredentialScenarioTests {
    /// Runs `git credential fill` and checks git's answer, and what askpass was asked.
    private func expectFill(_ git: GitHarness, _ input: String, stdout: String, askpass: [String] = [],
                            config: [String] = [], sourceLocation: SourceLocation = #_sourceLocation) throws {
        let result = try git.credential("fill", input, config: config)
        #expect(result.exitCode == 0, "git credential fill failed: \(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stdout == stdout, sourceLocation: sourceLocation)
        let prompts = result.stderr.split(separator: "\n").map(String.init)
        #expect(prompts == askpass.map { "askpass: \($0)" }, sourceLocation: sourceLocation)
    }

    private func approve(_ git: GitHarness, _ input: String, config: [String] = [],
                         sourceLocation: SourceLocation = #_sourceLocation) throws {
        let result = try git.credential("approve", input, config: config)
        #expect(result.exitCode == 0 && result.stdout.isEmpty && result.stderr.isEmpty,
                "approve: \(result.exitCode) \(result.stderr)", sourceLocation: sourceLocation)
    }

    private func reject(_ git: GitHarness, _ input: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let result = try git.credential("reject", input)
        #expect(result.exitCode == 0 && result.stdout.isEmpty && result.stderr.isEmpty,
                "reject: \(result.exitCode) \(result.stderr)", sourceLocation: sourceLocation)
    }

    @Test("a stored password is retrieved", arguments: TestBackend.allCases)
    func storeThenRetrieve(backend: TestBackend) throws {
        let git = try GitHarness(backend: backend)
        let host = GitHarness.uniqueHost("example")
        try expectFill(git, "protocol=https\nhost=\(host)\n",
                       stdout: "protocol=https\nhost=\(host)\nusername=askpass-username\npassword=askpass-password\n",
                       askpass: ["Username for 'https://\(host)':", "Password for 'https://askpass-username@\(host)':"])
        try approve(git, "protocol=https\nhost=\(host)\nusername=store-user\npassword=store-pass\n")
        try expectFill(git, "protocol=https\nhost=\(host)\n",
                       stdout: "protocol=https\nhost=\(host)\nusername=store-user\npassword=store-pass\n")
    }

    @Test("protocol, host, username and path must each match", arguments: TestBackend.allCases)
    func requiresMatchingAttributes(backend: TestBackend) throws {
        let git = try GitHarness(backend: backend)
        let host = GitHarness.uniqueHost("example")
        try approve(git, "protocol=https\nhost=\(host)\nusername=store-user\npassword=store-pass\n")
        try expectFill(git, "protocol=http\nhost=\(host)\n",
                       stdout: "protocol=http\nhost=\(host)\nusername=askpass-username\npassword=askpass-password\n",
                       askpass: ["Username for 'http://\(host)':", "Password for 'http://askpass-username@\(host)':"])
        let other = GitHarness.uniqueHost("other")
        try expectFill(git, "protocol=https\nhost=\(other)\n",
                       stdout: "protocol=https\nhost=\(other)\nusername=askpass-username\npassword=askpass-password\n",
                       askpass: ["Username for 'https://\(other)':", "Password for 'https://askpass-username@\(other)':"])
        try expectFill(git, "protocol=https\nhost=\(host):8443\n",
                       stdout: "protocol=https\nhost=\(host):8443\nusername=askpass-username\npassword=askpass-password\n",
                       askpass: ["Username for 'https://\(host):8443':", "Password for 'https://askpass-username@\(host):8443':"])
        try expectFill(git, "protocol=https\nhost=\(host)\nusername=other\n",
                       stdout: "protocol=https\nhost=\(host)\nusername=other\npassword=askpass-password\n",
                       askpass: ["Password for 'https://other@\(host)':"])

        let pathHost = GitHarness.uniqueHost("path")
        let useHttpPath = ["credential.usehttppath=true"]
        try approve(git, "protocol=http\nhost=\(pathHost)\npath=foo.git\nusername=user\npassword=pass\n", config: useHttpPath)
        try expectFill(git, "protocol=http\nhost=\(pathHost)\npath=bar.git\n",
                       stdout: "protocol=http\nhost=\(pathHost)\npath=bar.git\nusername=askpass-username\npassword=askpass-password\n",
                       askpass: ["Username for 'http://\(pathHost)/bar.git':", "Password for 'http://askpass-username@\(pathHost)/bar.git':"],
                       config: useHttpPath)
        try expectFill(git, "protocol=http\nhost=\(pathHost)\npath=foo.git\n",
                       stdout: "protocol=http\nhost=\(pathHost)\npath=foo.git\nusername=user\npassword=pass\n",
                       config: useHttpPath)
    }

    @Test("store overwrites the credential of the same user", arguments: TestBackend.allCases)
    func overwriteOnStore(backend: TestBackend) throws {
        let git = try GitHarness(backend: backend)
        let host = GitHarness.uniqueHost("example")
        try approve(git, "protocol=https\nhost=\(host)\nusername=user\npassword=old\n")
        try approve(git, "protocol=https\nhost=\(host)\nusername=user\npassword=new\n")
        try expectFill(git, "protocol=https\nhost=\(host)\n",
                       stdout: "protocol=https\nhost=\(host)\nusername=user\npassword=new\n")
    }

    @Test("reject forgets a host", arguments: TestBackend.allCases)
    func forgetHost(backend: TestBackend) throws {
        let git = try GitHarness(backend: backend)
        let host = GitHarness.uniqueHost("example")
        try approve(git, "protocol=https\nhost=\(host)\nusername=store-user\npassword=store-pass\n")
        try reject(git, "protocol=https\nhost=\(host)\n")
        try expectFill(git, "protocol=https\nhost=\(host)\n",
                       stdout: "protocol=https\nhost=\(host)\nusername=askpass-username\npassword=askpass-password\n",
                       askpass: ["Username for 'https://\(host)':", "Password for 'https://askpass-username@\(host)':"])
    }

    @Test("several users on one host; forgetting one keeps the other", arguments: TestBackend.allCases)
    func multipleUsers(backend: TestBackend) throws {
        let git = try GitHarness(backend: backend)
        let host = GitHarness.uniqueHost("example")
        try approve(git, "protocol=https\nhost=\(host)\nusername=user1\npassword=pass1\n")
        try approve(git, "protocol=https\nhost=\(host)\nusername=user2\npassword=pass2\n")
        try expectFill(git, "protocol=https\nhost=\(host)\nusername=user1\n",
                       stdout: "protocol=https\nhost=\(host)\nusername=user1\npassword=pass1\n")
        try expectFill(git, "protocol=https\nhost=\(host)\nusername=user2\n",
                       stdout: "protocol=https\nhost=\(host)\nusername=user2\npassword=pass2\n")
        try reject(git, "protocol=https\nhost=\(host)\nusername=user1\n")
        try expectFill(git, "protocol=https\nhost=\(host)\nusername=user1\n",
                       stdout: "protocol=https\nhost=\(host)\nusername=user1\npassword=askpass-password\n",
                       askpass: ["Password for 'https://user1@\(host)':"])
        try expectFill(git, "protocol=https\nhost=\(host)\nusername=user2\n",
                       stdout: "protocol=https\nhost=\(host)\nusername=user2\npassword=pass2\n")
    }

    @Test("an erase carrying a different password leaves the stored one", arguments: TestBackend.allCases)
    func eraseWithDifferentPassword(backend: TestBackend) throws {
        let git = try GitHarness(backend: backend)
        let host = GitHarness.uniqueHost("example")
        try approve(git, "protocol=https\nhost=\(host)\nusername=user\npassword=current\n")
        try reject(git, "protocol=https\nhost=\(host)\nusername=user\npassword=stale\n")
        try expectFill(git, "protocol=https\nhost=\(host)\n",
                       stdout: "protocol=https\nhost=\(host)\nusername=user\npassword=current\n")
        try reject(git, "protocol=https\nhost=\(host)\nusername=user\npassword=current\n")
        let gone = try git.portalToken(["get"], stdin: "protocol=https\nhost=\(host)\n")
        #expect(gone.exitCode == 0 && gone.stdout.isEmpty)
    }

    @Test("an empty username and password are stored and returned", arguments: TestBackend.allCases)
    func emptyUsernameAndPassword(backend: TestBackend) throws {
        let git = try GitHarness(backend: backend)
        let host = GitHarness.uniqueHost("sso")
        try approve(git, "protocol=https\nhost=\(host)\nusername=\npassword=\n")
        try expectFill(git, "protocol=https\nhost=\(host)\n",
                       stdout: "protocol=https\nhost=\(host)\nusername=\npassword=\n")
    }

    @Test("erase removes every match", arguments: TestBackend.allCases)
    func eraseRemovesEveryMatch(backend: TestBackend) throws {
        let git = try GitHarness(backend: backend)
        let host = GitHarness.uniqueHost("example")
        try approve(git, "protocol=https\nhost=\(host)\nusername=user1\npassword=pass1\n")
        try approve(git, "protocol=https\nhost=\(host)\nusername=user2\npassword=pass2\n")
        try reject(git, "protocol=https\nhost=\(host)\n")
        try expectFill(git, "protocol=https\nhost=\(host)\n",
                       stdout: "protocol=https\nhost=\(host)\nusername=askpass-username\npassword=askpass-password\n",
                       askpass: ["Username for 'https://\(host)':", "Password for 'https://askpass-username@\(host)':"])
    }

    @Test("a 1 KiB wwwauth[] value that embeds host= does not confuse host matching", arguments: TestBackend.allCases)
    func longWWWAuthenticate(backend: TestBackend) throws {
        let git = try GitHarness(backend: backend)
        let host = GitHarness.uniqueHost("example")
        let decoy = GitHarness.uniqueHost("decoy")
        try approve(git, "protocol=https\nhost=\(decoy)\nusername=decoy\npassword=decoy-pass\n")
        let challenge = "Bearer realm=\"\nhost=\(decoy)\" " + String(repeating: "a", count: 1024)
        // git 2.39 does not forward wwwauth[] yet, so it is given to the helper as newer git sends it.
        let input = "capability[]=authtype\nprotocol=https\nhost=\(host)\nwwwauth[]=\(challenge.replacingOccurrences(of: "\n", with: " "))\n"
        let direct = try git.portalToken(["get"], stdin: input)
        #expect(direct.exitCode == 0 && direct.stdout.isEmpty && direct.stderr.isEmpty)
        try expectFill(git, input,
                       stdout: "protocol=https\nhost=\(host)\nusername=askpass-username\npassword=askpass-password\n",
                       askpass: ["Username for 'https://\(host)':", "Password for 'https://askpass-username@\(host)':"])
    }

    @Test("password_expiry_utc and oauth_refresh_token round-trip; an expired password is never returned",
          arguments: TestBackend.allCases)
    func expiryAndRefreshToken(backend: TestBackend) throws {
        let git = try GitHarness(backend: backend)
        let host = GitHarness.uniqueHost("oauth")
        let future = Int64(Date().timeIntervalSince1970) + 3600
        // git 2.39 drops these two attributes itself, so they are given to the helper directly,
        // exactly as git 2.41 and later send them.
        let stored = try git.portalToken(["store"], stdin: "protocol=https\nhost=\(host)\nusername=u\npassword=live\npassword_expiry_utc=\(future)\noauth_refresh_token=refresh-1\n")
        #expect(stored.exitCode == 0 && stored.stderr.isEmpty)
        let got = try git.portalToken(["get"], stdin: "protocol=https\nhost=\(host)\n")
        #expect(got.stdout == "username=u\npassword=live\npassword_expiry_utc=\(future)\noauth_refresh_token=refresh-1\n")

        let expired = GitHarness.uniqueHost("expired")
        let past = Int64(Date().timeIntervalSince1970) - 1
        try git.portalToken(["store"], stdin: "protocol=https\nhost=\(expired)\nusername=u\npassword=old\npassword_expiry_utc=\(past)\noauth_refresh_token=refresh-2\n")
        let none = try git.portalToken(["get"], stdin: "protocol=https\nhost=\(expired)\n")
        #expect(none.exitCode == 0 && none.stdout.isEmpty)
        try expectFill(git, "protocol=https\nhost=\(expired)\n",
                       stdout: "protocol=https\nhost=\(expired)\nusername=askpass-username\npassword=askpass-password\n",
                       askpass: ["Username for 'https://\(expired)':", "Password for 'https://askpass-username@\(expired)':"])
    }
}
