import Foundation
import PortalTokenTestSupport
import Testing

/// Every scenario of git's own credential-helper test suite (t/lib-credential.sh), run with real
/// `git credential fill/approve/reject` against portal-token on each backend, with Debian 12's
/// git 2.39 and with a current git 2.47.
@Suite("git credential scenarios")
struct GitCredentialScenarioTests {
    /// Runs `git credential fill` and checks git's answer, and what askpass was asked.
    private func expectFill(
        _ git: GitHarness, _ input: String, stdout: String, askpass: [String] = [],
        config: [String] = [], sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let result = try git.credential("fill", input, config: config)
        #expect(result.exitCode == 0, "git credential fill failed: \(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stdout == stdout, sourceLocation: sourceLocation)
        let prompts = result.stderr.split(separator: "\n").map(String.init)
        #expect(prompts == askpass.map { "askpass: \($0)" }, sourceLocation: sourceLocation)
    }

    /// A fill nothing stored answers: git asks askpass for the username, then for the password.
    private func expectAskpassFill(
        _ git: GitHarness, host: String, protocol scheme: String = "https",
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        try expectFill(
            git, "protocol=\(scheme)\nhost=\(host)\n",
            stdout: "protocol=\(scheme)\nhost=\(host)\nusername=askpass-username\npassword=askpass-password\n",
            askpass: ["Username for '\(scheme)://\(host)':", "Password for '\(scheme)://askpass-username@\(host)':"],
            sourceLocation: sourceLocation)
    }

    private func approve(
        _ git: GitHarness, _ input: String, config: [String] = [],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let result = try git.credential("approve", input, config: config)
        #expect(
            result.exitCode == 0 && result.stdout.isEmpty && result.stderr.isEmpty,
            "approve: \(result.exitCode) \(result.stderr)", sourceLocation: sourceLocation)
    }

    private func reject(_ git: GitHarness, _ input: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let result = try git.credential("reject", input)
        #expect(
            result.exitCode == 0 && result.stdout.isEmpty && result.stderr.isEmpty,
            "reject: \(result.exitCode) \(result.stderr)", sourceLocation: sourceLocation)
    }

    @Test("a stored password is retrieved", arguments: TestBackend.allCases, RealGit.allCases)
    func storeThenRetrieve(backend: TestBackend, gitVersion: RealGit) throws {
        let git = try GitHarness(backend: backend, git: gitVersion)
        let host = GitHarness.uniqueHost("example")
        try expectAskpassFill(git, host: host)
        try approve(git, "protocol=https\nhost=\(host)\nusername=store-user\npassword=store-pass\n")
        try expectFill(
            git, "protocol=https\nhost=\(host)\n",
            stdout: "protocol=https\nhost=\(host)\nusername=store-user\npassword=store-pass\n")
    }

    @Test("protocol, host, username and path must each match", arguments: TestBackend.allCases, RealGit.allCases)
    func requiresMatchingAttributes(backend: TestBackend, gitVersion: RealGit) throws {
        let git = try GitHarness(backend: backend, git: gitVersion)
        let host = GitHarness.uniqueHost("example")
        try approve(git, "protocol=https\nhost=\(host)\nusername=store-user\npassword=store-pass\n")
        try expectAskpassFill(git, host: host, protocol: "http")
        let other = GitHarness.uniqueHost("other")
        try expectAskpassFill(git, host: other)
        try expectAskpassFill(git, host: "\(host):8443")
        try expectFill(
            git, "protocol=https\nhost=\(host)\nusername=other\n",
            stdout: "protocol=https\nhost=\(host)\nusername=other\npassword=askpass-password\n",
            askpass: ["Password for 'https://other@\(host)':"])

        let pathHost = GitHarness.uniqueHost("path")
        let useHttpPath = ["credential.usehttppath=true"]
        try approve(
            git, "protocol=http\nhost=\(pathHost)\npath=foo.git\nusername=user\npassword=pass\n", config: useHttpPath)
        try expectFill(
            git, "protocol=http\nhost=\(pathHost)\npath=bar.git\n",
            stdout:
                "protocol=http\nhost=\(pathHost)\npath=bar.git\nusername=askpass-username\npassword=askpass-password\n",
            askpass: [
                "Username for 'http://\(pathHost)/bar.git':",
                "Password for 'http://askpass-username@\(pathHost)/bar.git':",
            ],
            config: useHttpPath)
        try expectFill(
            git, "protocol=http\nhost=\(pathHost)\npath=foo.git\n",
            stdout: "protocol=http\nhost=\(pathHost)\npath=foo.git\nusername=user\npassword=pass\n",
            config: useHttpPath)
    }

    @Test("store overwrites the credential of the same user", arguments: TestBackend.allCases, RealGit.allCases)
    func overwriteOnStore(backend: TestBackend, gitVersion: RealGit) throws {
        let git = try GitHarness(backend: backend, git: gitVersion)
        let host = GitHarness.uniqueHost("example")
        try approve(git, "protocol=https\nhost=\(host)\nusername=user\npassword=old\n")
        try approve(git, "protocol=https\nhost=\(host)\nusername=user\npassword=new\n")
        try expectFill(
            git, "protocol=https\nhost=\(host)\n",
            stdout: "protocol=https\nhost=\(host)\nusername=user\npassword=new\n")
    }

    @Test("reject forgets a host", arguments: TestBackend.allCases, RealGit.allCases)
    func forgetHost(backend: TestBackend, gitVersion: RealGit) throws {
        let git = try GitHarness(backend: backend, git: gitVersion)
        let host = GitHarness.uniqueHost("example")
        try approve(git, "protocol=https\nhost=\(host)\nusername=store-user\npassword=store-pass\n")
        try reject(git, "protocol=https\nhost=\(host)\n")
        try expectAskpassFill(git, host: host)
    }

    @Test(
        "several users on one host; forgetting one keeps the other", arguments: TestBackend.allCases, RealGit.allCases)
    func multipleUsers(backend: TestBackend, gitVersion: RealGit) throws {
        let git = try GitHarness(backend: backend, git: gitVersion)
        let host = GitHarness.uniqueHost("example")
        try approve(git, "protocol=https\nhost=\(host)\nusername=user1\npassword=pass1\n")
        try approve(git, "protocol=https\nhost=\(host)\nusername=user2\npassword=pass2\n")
        try expectFill(
            git, "protocol=https\nhost=\(host)\nusername=user1\n",
            stdout: "protocol=https\nhost=\(host)\nusername=user1\npassword=pass1\n")
        try expectFill(
            git, "protocol=https\nhost=\(host)\nusername=user2\n",
            stdout: "protocol=https\nhost=\(host)\nusername=user2\npassword=pass2\n")
        try reject(git, "protocol=https\nhost=\(host)\nusername=user1\n")
        try expectFill(
            git, "protocol=https\nhost=\(host)\nusername=user1\n",
            stdout: "protocol=https\nhost=\(host)\nusername=user1\npassword=askpass-password\n",
            askpass: ["Password for 'https://user1@\(host)':"])
        try expectFill(
            git, "protocol=https\nhost=\(host)\nusername=user2\n",
            stdout: "protocol=https\nhost=\(host)\nusername=user2\npassword=pass2\n")
    }

    @Test(
        "an erase carrying a different password leaves the stored one", arguments: TestBackend.allCases,
        RealGit.allCases)
    func eraseWithDifferentPassword(backend: TestBackend, gitVersion: RealGit) throws {
        let git = try GitHarness(backend: backend, git: gitVersion)
        let host = GitHarness.uniqueHost("example")
        try approve(git, "protocol=https\nhost=\(host)\nusername=user\npassword=current\n")
        try reject(git, "protocol=https\nhost=\(host)\nusername=user\npassword=stale\n")
        try expectFill(
            git, "protocol=https\nhost=\(host)\n",
            stdout: "protocol=https\nhost=\(host)\nusername=user\npassword=current\n")
        try reject(git, "protocol=https\nhost=\(host)\nusername=user\npassword=current\n")
        let gone = try git.portalToken(["get"], stdin: "protocol=https\nhost=\(host)\n")
        #expect(gone.exitCode == 0 && gone.stdout.isEmpty)
    }

    @Test("an empty username and password are stored and returned", arguments: TestBackend.allCases, RealGit.allCases)
    func emptyUsernameAndPassword(backend: TestBackend, gitVersion: RealGit) throws {
        let git = try GitHarness(backend: backend, git: gitVersion)
        let host = GitHarness.uniqueHost("sso")
        try approve(git, "protocol=https\nhost=\(host)\nusername=\npassword=\n")
        try expectFill(
            git, "protocol=https\nhost=\(host)\n",
            stdout: "protocol=https\nhost=\(host)\nusername=\npassword=\n")
    }

    @Test("erase removes every match", arguments: TestBackend.allCases, RealGit.allCases)
    func eraseRemovesEveryMatch(backend: TestBackend, gitVersion: RealGit) throws {
        let git = try GitHarness(backend: backend, git: gitVersion)
        let host = GitHarness.uniqueHost("example")
        try approve(git, "protocol=https\nhost=\(host)\nusername=user1\npassword=pass1\n")
        try approve(git, "protocol=https\nhost=\(host)\nusername=user2\npassword=pass2\n")
        try reject(git, "protocol=https\nhost=\(host)\n")
        try expectAskpassFill(git, host: host)
    }

    @Test(
        "a 1 KiB wwwauth[] value that embeds host= does not confuse host matching", arguments: TestBackend.allCases,
        RealGit.allCases)
    func longWWWAuthenticate(backend: TestBackend, gitVersion: RealGit) throws {
        let git = try GitHarness(backend: backend, git: gitVersion)
        let host = GitHarness.uniqueHost("example")
        let decoy = GitHarness.uniqueHost("decoy")
        try approve(git, "protocol=https\nhost=\(decoy)\nusername=decoy\npassword=decoy-pass\n")
        let challenge = "Bearer realm=\"\nhost=\(decoy)\" " + String(repeating: "a", count: 1024)
        // git 2.39 does not forward wwwauth[] (git 2.47 does, through the fill below), so it is also
        // given to the helper as newer git sends it.
        let input =
            """
            capability[]=authtype\nprotocol=https\nhost=\(host)\n\
            wwwauth[]=\(challenge.replacingOccurrences(of: "\n", with: " "))\n
            """
        let direct = try git.portalToken(["get"], stdin: input)
        #expect(direct.exitCode == 0 && direct.stdout.isEmpty && direct.stderr.isEmpty)
        // git 2.47 hands the challenge back to its caller with the answer.
        let echoed = gitVersion == .current ? "wwwauth[]=\(challenge.replacingOccurrences(of: "\n", with: " "))\n" : ""
        try expectFill(
            git, input,
            stdout: "protocol=https\nhost=\(host)\nusername=askpass-username\npassword=askpass-password\n" + echoed,
            askpass: ["Username for 'https://\(host)':", "Password for 'https://askpass-username@\(host)':"])
    }

    @Test(
        "password_expiry_utc and oauth_refresh_token round-trip; an expired password is never returned",
        arguments: TestBackend.allCases, RealGit.allCases)
    func expiryAndRefreshToken(backend: TestBackend, gitVersion: RealGit) throws {
        let git = try GitHarness(backend: backend, git: gitVersion)
        let host = GitHarness.uniqueHost("oauth")
        let future = Int64(Date().timeIntervalSince1970) + 3600
        // git 2.39 drops these two attributes itself, so they are given to the helper directly,
        // exactly as git 2.41 and later send them.
        let stored = try git.portalToken(
            ["store"],
            stdin:
                """
                protocol=https\nhost=\(host)\nusername=u\npassword=live\npassword_expiry_utc=\(future)\n\
                oauth_refresh_token=refresh-1\n
                """
        )
        #expect(stored.exitCode == 0 && stored.stderr.isEmpty)
        let got = try git.portalToken(["get"], stdin: "protocol=https\nhost=\(host)\n")
        #expect(
            got.stdout == "username=u\npassword=live\npassword_expiry_utc=\(future)\noauth_refresh_token=refresh-1\n")

        let expired = GitHarness.uniqueHost("expired")
        let past = Int64(Date().timeIntervalSince1970) - 1
        try git.portalToken(
            ["store"],
            stdin:
                """
                protocol=https\nhost=\(expired)\nusername=u\npassword=old\npassword_expiry_utc=\(past)\n\
                oauth_refresh_token=refresh-2\n
                """
        )
        let none = try git.portalToken(["get"], stdin: "protocol=https\nhost=\(expired)\n")
        #expect(none.exitCode == 0 && none.stdout.isEmpty)
        try expectAskpassFill(git, host: expired)
        // What git itself makes of the stored attributes: git 2.47 hands both to its caller,
        // git 2.39 drops them.
        try expectFill(
            git, "protocol=https\nhost=\(host)\n",
            stdout: "protocol=https\nhost=\(host)\nusername=u\npassword=live\n"
                + (gitVersion == .current ? "oauth_refresh_token=refresh-1\npassword_expiry_utc=\(future)\n" : ""))
    }

    @Test(
        "a password's expiry is stored through git approve and returned by git fill; a new one overwrites",
        arguments: TestBackend.allCases, RealGit.allCases)
    func passwordExpiryThroughGit(backend: TestBackend, gitVersion: RealGit) throws {
        let git = try GitHarness(backend: backend, git: gitVersion)
        let host = GitHarness.uniqueHost("expiry")
        let origin = "protocol=https\nhost=\(host)\n"
        // git 2.39 drops password_expiry_utc on the way in and on the way out: the password alone
        // is stored and returned, as git's own helpers did before 2.41.
        let expiry = { (value: String) in gitVersion == .current ? "password_expiry_utc=\(value)\n" : "" }
        try approve(git, origin + "username=user-expiry\npassword=pass\npassword_expiry_utc=9999999999\n")
        try expectFill(
            git, origin + "username=user-expiry\n",
            stdout: origin + "username=user-expiry\npassword=pass\n" + expiry("9999999999"))
        if gitVersion == .debian12 {
            let stored = try git.portalToken(["get"], stdin: origin + "username=user-expiry\n")
            #expect(stored.stdout == "username=user-expiry\npassword=pass\n")
        }

        try approve(git, origin + "username=user-expiry-overwrite\npassword=pass1\npassword_expiry_utc=9999999998\n")
        try approve(git, origin + "username=user-expiry-overwrite\npassword=pass2\npassword_expiry_utc=9999999999\n")
        try expectFill(
            git, origin + "username=user-expiry-overwrite\n",
            stdout: origin + "username=user-expiry-overwrite\npassword=pass2\n" + expiry("9999999999"))
        try reject(git, origin + "username=user-expiry-overwrite\npassword=pass2\n")
        try expectFill(
            git, origin + "username=user-expiry-overwrite\n",
            stdout: origin + "username=user-expiry-overwrite\npassword=askpass-password\n",
            askpass: ["Password for 'https://user-expiry-overwrite@\(host)':"])
    }

    @Test(
        "an OAuth refresh token is stored through git approve and returned by git fill",
        arguments: TestBackend.allCases, RealGit.allCases)
    func refreshTokenThroughGit(backend: TestBackend, gitVersion: RealGit) throws {
        let git = try GitHarness(backend: backend, git: gitVersion)
        let origin = "protocol=https\nhost=\(GitHarness.uniqueHost("oauth"))\n"
        try approve(git, origin + "username=user4\npassword=pass\noauth_refresh_token=xyzzy\n")
        try expectFill(
            git, origin + "username=user4\n",
            stdout: origin + "username=user4\npassword=pass\n"
                + (gitVersion == .current ? "oauth_refresh_token=xyzzy\n" : ""))
        // git 2.39 never passed the refresh token to the helper: nothing of it was stored.
        let stored = try git.portalToken(["get"], stdin: origin + "username=user4\n")
        #expect(
            stored.stdout == "username=user4\npassword=pass\n"
                + (gitVersion == .current ? "oauth_refresh_token=xyzzy\n" : ""))
    }

    @Test(
        """
        authtype and credential are stored and returned only to a caller with the capability; ephemeral ones are \
        not stored
        """,
        arguments: TestBackend.allCases, RealGit.allCases)
    func authtypeThroughGit(backend: TestBackend, gitVersion: RealGit) throws {
        let git = try GitHarness(backend: backend, git: gitVersion)
        let host = GitHarness.uniqueHost("git")
        let origin = "protocol=https\nhost=\(host)\n"
        let asked = { (user: String?) -> (stdout: String, askpass: [String]) in
            guard let user else {
                return (
                    origin + "username=askpass-username\npassword=askpass-password\n",
                    ["Username for 'https://\(host)':", "Password for 'https://askpass-username@\(host)':"]
                )
            }
            return (
                origin + "username=\(user)\npassword=askpass-password\n", ["Password for 'https://\(user)@\(host)':"]
            )
        }
        let none = asked(nil)
        let barbaz = asked("barbaz")
        // In the order of git's own helper_test_authtype.
        try approve(git, "capability[]=authtype\nauthtype=Bearer\ncredential=random-token\n" + origin)
        if gitVersion == .current {
            try expectFill(
                git, "capability[]=authtype\n" + origin,
                stdout: "capability[]=authtype\nauthtype=Bearer\ncredential=random-token\n" + origin)
        } else {
            // git 2.39 knows neither the capability nor authtype and credential: its approve of a
            // credential without a username and password stores nothing, so fill asks.
            try expectFill(git, "capability[]=authtype\n" + origin, stdout: none.stdout, askpass: none.askpass)
        }
        try expectFill(git, origin, stdout: none.stdout, askpass: none.askpass)
        try approve(
            git, "capability[]=authtype\nauthtype=Bearer\ncredential=other-token\n" + origin + "username=foobar\n")
        if gitVersion == .current {
            try expectFill(
                git, "capability[]=authtype\n" + origin + "username=foobar\n",
                stdout: "capability[]=authtype\nauthtype=Bearer\ncredential=other-token\n" + origin
                    + "username=foobar\n")
        } else {
            try expectFill(
                git, "capability[]=authtype\n" + origin + "username=foobar\n",
                stdout: origin + "username=foobar\npassword=askpass-password\n",
                askpass: ["Password for 'https://foobar@\(host)':"])
        }
        try expectFill(
            git, "capability[]=authtype\n" + origin + "username=barbaz\n", stdout: barbaz.stdout,
            askpass: barbaz.askpass)

        if gitVersion == .current {
            // After a 401, git 2.47 rejects the credential it used, as fill gave it: it goes.
            let used = try git.credential("fill", "capability[]=authtype\n" + origin + "username=foobar\n").stdout
            try reject(git, used)
            let gone = asked("foobar")
            try expectFill(
                git, "capability[]=authtype\n" + origin + "username=foobar\n", stdout: gone.stdout,
                askpass: gone.askpass)
        }

        let other = GitHarness.uniqueHost("git2")
        let otherOrigin = "protocol=https\nhost=\(other)\n"
        let otherAsked = (
            origin: otherOrigin + "username=askpass-username\npassword=askpass-password\n",
            askpass: ["Username for 'https://\(other)':", "Password for 'https://askpass-username@\(other)':"]
        )
        try approve(
            git, "capability[]=authtype\nauthtype=Bearer\ncredential=git2-token\n" + otherOrigin + "ephemeral=1\n")
        try expectFill(
            git, "capability[]=authtype\n" + otherOrigin, stdout: otherAsked.origin, askpass: otherAsked.askpass)
        try approve(git, "capability[]=authtype\n" + otherOrigin + "username=barbaz\npassword=secret\nephemeral=1\n")
        if gitVersion == .current {
            try expectFill(
                git, "capability[]=authtype\n" + otherOrigin, stdout: otherAsked.origin, askpass: otherAsked.askpass)
        } else {
            // git 2.39 does not know ephemeral and hands the password on to be stored.
            try expectFill(
                git, "capability[]=authtype\n" + otherOrigin, stdout: otherOrigin + "username=barbaz\npassword=secret\n"
            )
        }
    }

    @Test(
        "what git fill gave, with every capability git has, is approved after a success and goes on a reject",
        arguments: TestBackend.allCases, RealGit.allCases)
    func fillApproveRejectCycle(backend: TestBackend, gitVersion: RealGit) throws {
        let git = try GitHarness(backend: backend, git: gitVersion)
        let host = GitHarness.uniqueHost("cycle")
        let origin = "protocol=https\nhost=\(host)\n"
        let ask = "capability[]=authtype\ncapability[]=state\n" + origin
        try approve(git, origin + "username=u\npassword=p1\n")
        // git 2.47 passes portal-token's state on, and only the capability portal-token answered
        // with; git 2.39 knows neither.
        let served =
            gitVersion == .current
            ? "capability[]=state\n" + origin + "username=u\npassword=p1\nstate[]=portal-token:served\n"
            : origin + "username=u\npassword=p1\n"
        try expectFill(git, ask, stdout: served)
        try approve(git, served)
        try expectFill(git, ask, stdout: served)
        try reject(git, served)
        try expectAskpassFill(git, host: host)
    }

    @Test(
        "git credential capability is git's own: git 2.47 lists authtype and state, git 2.39 has no such operation",
        arguments: RealGit.allCases)
    func gitCapability(gitVersion: RealGit) throws {
        let git = try GitHarness(backend: .secretService, git: gitVersion)
        let result = try git.credential("capability", "")
        switch gitVersion {
        case .current:
            #expect(result.exitCode == 0 && result.stderr.isEmpty)
            #expect(result.stdout == "version 0\ncapability authtype\ncapability state\n")
        case .debian12:
            #expect(result.exitCode != 0 && result.stdout.isEmpty)
        }
    }
}
