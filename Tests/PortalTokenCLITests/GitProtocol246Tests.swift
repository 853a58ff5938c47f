import Foundation
import PortalTokenTestSupport
import Testing

/// git 2.46+'s side of the credential protocol, at the protocol level: these feed the binary the
/// exact lines a git 2.46+ client sends (git-credential(1), gitcredentials(7)) and check the exact
/// lines back. The same exchanges through a real git 2.47 are in GitCredentialScenarioTests and
/// in the "through real git" suite below.
@Suite("git 2.46+ protocol")
struct GitProtocol246CLITests {
    @Test("capability prints version 0 and the supported capabilities, under either name")
    func capability() throws {
        let expected = "version 0\ncapability authtype\ncapability state\n"
        let plain = try ProcessRunner.portalToken(["capability"])
        #expect(plain.exitCode == 0 && plain.stdout == expected && plain.stderr.isEmpty)
        let git = try GitHarness(backend: .secretService)
        let helper = git.directory.appendingPathComponent("bin/git-credential-portal-token").path
        let linked = try ProcessRunner.run(helper, ["capability"], stdin: "", environment: git.environment, timeout: 30)
        #expect(linked.exitCode == 0 && linked.stdout == expected && linked.stderr.isEmpty)
    }

    @Test(
        "a generic bearer credential round-trips with the capability and is withheld without it",
        arguments: TestBackend.allCases)
    func genericBearer(backend: TestBackend) throws {
        let git = try GitHarness(backend: backend)
        let origin = "protocol=https\nhost=\(GitHarness.uniqueHost("bearer"))\n"
        // git 2.46+ approving a credential another helper produced.
        let store = try git.portalToken(
            ["store"],
            stdin: "capability[]=authtype\ncapability[]=state\n" + origin
                + "authtype=Bearer\ncredential=generic-token\npassword_expiry_utc=9999999999\n")
        #expect(store.exitCode == 0 && store.stdout.isEmpty && store.stderr.isEmpty)

        let capable = try git.portalToken(["get"], stdin: "capability[]=authtype\n" + origin)
        #expect(capable.exitCode == 0)
        #expect(
            capable.stdout
                == "capability[]=authtype\nauthtype=Bearer\ncredential=generic-token\npassword_expiry_utc=9999999999\n")

        let withState = try git.portalToken(["get"], stdin: "capability[]=authtype\ncapability[]=state\n" + origin)
        #expect(
            withState.stdout
                == """
                capability[]=authtype\ncapability[]=state\nauthtype=Bearer\ncredential=generic-token\n\
                password_expiry_utc=9999999999\nstate[]=portal-token:served\n
                """
        )

        // git 2.39, or a 2.46+ caller without the capability: nothing, and git asks elsewhere.
        let plain = try git.portalToken(["get"], stdin: origin)
        #expect(plain.exitCode == 0 && plain.stdout.isEmpty)
        let fill = try git.credential("fill", origin)
        #expect(fill.stdout == origin + "username=askpass-username\npassword=askpass-password\n")

        // git 2.46+'s reject after a 401 sends the credential back: it goes.
        let erase = try git.portalToken(
            ["erase"], stdin: "capability[]=authtype\n" + origin + "authtype=Bearer\ncredential=generic-token\n")
        #expect(erase.exitCode == 0)
        #expect(try git.portalToken(["get"], stdin: "capability[]=authtype\n" + origin).stdout.isEmpty)
    }

    @Test("an ephemeral credential is never stored", arguments: TestBackend.allCases)
    func ephemeralNotStored(backend: TestBackend) throws {
        let git = try GitHarness(backend: backend)
        let origin = "protocol=https\nhost=\(GitHarness.uniqueHost("ephemeral"))\n"
        let store = try git.portalToken(
            ["store"],
            stdin: "capability[]=authtype\n" + origin
                + "authtype=Bearer\ncredential=short-lived\nephemeral=1\n")
        #expect(store.exitCode == 0 && store.stderr.isEmpty)
        #expect(try git.portalToken(["get"], stdin: "capability[]=authtype\n" + origin).stdout.isEmpty)
        #expect(
            try git.portalToken(["store"], stdin: origin + "username=u\npassword=pw\nephemeral=true\n").exitCode == 0)
        #expect(try git.portalToken(["get"], stdin: origin).stdout.isEmpty)
    }

    @Test("a CRLF request works for get, store and erase", arguments: TestBackend.allCases)
    func crlfRequests(backend: TestBackend) throws {
        let git = try GitHarness(backend: backend)
        let host = GitHarness.uniqueHost("crlf")
        let origin = "protocol=https\r\nhost=\(host)\r\n"
        #expect(
            try git.portalToken(["store"], stdin: origin + "username=alice\r\npassword=crlf-pw\r\n\r\n").exitCode == 0)
        let get = try git.portalToken(["get"], stdin: origin + "\r\n")
        #expect(get.exitCode == 0 && get.stdout == "username=alice\npassword=crlf-pw\n")
        // The stored password has no CR: a LF request finds the same item.
        #expect(
            try git.portalToken(["get"], stdin: "protocol=https\nhost=\(host)\n").stdout
                == "username=alice\npassword=crlf-pw\n")
        #expect(try git.portalToken(["erase"], stdin: origin + "password=crlf-pw\r\n").exitCode == 0)
        #expect(try git.portalToken(["get"], stdin: origin).stdout.isEmpty)
    }

    @Test("a url= request is split as git splits it, query kept out of the host", arguments: TestBackend.allCases)
    func urlRequest(backend: TestBackend) throws {
        let git = try GitHarness(backend: backend)
        let host = GitHarness.uniqueHost("url")
        #expect(
            try git.portalToken(["store"], stdin: "url=https://alice@\(host)/org/repo.git/\npassword=url-pw\n").exitCode
                == 0)
        let got = try git.portalToken(["get"], stdin: "protocol=https\nhost=\(host)\npath=org/repo.git\n")
        #expect(got.stdout == "username=alice\npassword=url-pw\n")
        // The query belongs to the path: the host alone finds the credential.
        let other = GitHarness.uniqueHost("url")
        #expect(
            try git.portalToken(["store"], stdin: "url=https://bob@\(other)?foo.git\npassword=query-pw\n").exitCode == 0
        )
        let query = try git.portalToken(["get"], stdin: "protocol=https\nhost=\(other)\n")
        #expect(query.exitCode == 0 && query.stdout == "username=bob\npassword=query-pw\n")
        #expect(
            try git.portalToken(["get"], stdin: "protocol=https\nhost=\(other)\npath=?foo.git\n").stdout == query.stdout
        )
    }

    @Test("portal-token's served state skips git's store of what it just served", arguments: TestBackend.allCases)
    func servedState(backend: TestBackend) throws {
        let git = try GitHarness(backend: backend)
        let origin = "protocol=https\nhost=\(GitHarness.uniqueHost("state"))\n"
        #expect(try git.portalToken(["store"], stdin: origin + "username=u\npassword=first\n").exitCode == 0)
        let get = try git.portalToken(["get"], stdin: "capability[]=state\n" + origin)
        #expect(get.stdout == "capability[]=state\nusername=u\npassword=first\nstate[]=portal-token:served\n")
        // git 2.46+ approves what it got, passing the state back: nothing changes.
        let approve = try git.portalToken(
            ["store"],
            stdin: "capability[]=state\n" + origin
                + "username=u\npassword=first\nstate[]=portal-token:served\nstate[]=other:x\n")
        #expect(approve.exitCode == 0 && approve.stderr.isEmpty)
        #expect(try git.portalToken(["get"], stdin: origin).stdout == "username=u\npassword=first\n")
        // The same state with another password is a new credential, and stored.
        #expect(
            try git.portalToken(
                ["store"],
                stdin: "capability[]=state\n" + origin
                    + "username=u\npassword=second\nstate[]=portal-token:served\n"
            ).exitCode == 0)
        #expect(try git.portalToken(["get"], stdin: origin).stdout == "username=u\npassword=second\n")
    }
}

/// Portal hosts answered from the session, as a git 2.46+ client sees them.
@Suite("git 2.46+ protocol: Portal hosts")
struct GitProtocol246PortalTests {
    @Test(
        "with capability[]=authtype the token is an ephemeral Bearer credential; without it, a password",
        arguments: TestBackend.allCases)
    func bearerAnswer(backend: TestBackend) throws {
        let portal = try PortalHarness(backend: backend)
        #expect(try portal.adopt(token: "token-B", endUserID: "U-1").exitCode == 0)
        let capable = try portal.git.portalToken(
            ["get"], stdin: "capability[]=authtype\ncapability[]=state\n" + portal.portalOrigin)
        #expect(capable.exitCode == 0)
        let lines = capable.stdout.split(separator: "\n").map(String.init)
        #expect(
            Array(lines.prefix(5)) == [
                "capability[]=authtype", "authtype=Bearer", "credential=token-B", "ephemeral=1", "username=U-1",
            ])
        #expect(lines.count == 6 && lines[5].wholeMatch(of: /password_expiry_utc=\d+/) != nil)
        #expect(!capable.stdout.contains("password="))

        let plain = try portal.git.portalToken(["get"], stdin: portal.portalOrigin)
        #expect(plain.stdout.hasPrefix("username=U-1\npassword=token-B\npassword_expiry_utc="))
        #expect(!plain.stdout.contains("capability") && !plain.stdout.contains("credential="))
    }

    @Test(
        "a store carrying the session's token as credential slides the expiry, ephemeral or not",
        arguments: TestBackend.allCases)
    func storeSlides(backend: TestBackend) throws {
        let portal = try PortalHarness(backend: backend)
        portal.server.registerLiveToken("token-S")
        #expect(try portal.adopt(token: "token-S").exitCode == 0)
        let before = try #require(
            passwordExpiry(try portal.git.portalToken(["get"], stdin: portal.portalOrigin).stdout))
        // Ten hours later, git 2.46+ approves the credential it used, without a username.
        let approve = try portal.portalToken(
            ["store"],
            stdin: "capability[]=authtype\n" + portal.portalOrigin
                + "authtype=Bearer\ncredential=token-S\nephemeral=1\n", clockShift: 10 * 3600)
        #expect(approve.exitCode == 0 && approve.stderr.isEmpty)
        let after = try #require(
            passwordExpiry(try portal.portalToken(["get"], stdin: portal.portalOrigin, clockShift: 10 * 3600).stdout))
        #expect(after >= before + 10 * 3600 - 120)
        #expect(portal.hookRuns.isEmpty)
        #expect(portal.requests(to: "/api/v3/clients/me").isEmpty)
    }

    @Test("an ephemeral token other than the session's is never adopted", arguments: TestBackend.allCases)
    func ephemeralNotAdopted(backend: TestBackend) throws {
        let portal = try PortalHarness(backend: backend)
        #expect(try portal.adopt(token: "token-kept", endUserID: "U-3").exitCode == 0)
        for extra in ["username=U-4\n", ""] {
            let store = try portal.git.portalToken(
                ["store"],
                stdin: "capability[]=authtype\n" + portal.portalOrigin
                    + extra + "authtype=Bearer\ncredential=other-helpers-token\nephemeral=1\n")
            #expect(store.exitCode == 0 && store.stderr.isEmpty)
        }
        #expect(try portal.git.portalToken(["get"]).stdout == "token-kept\n")
    }

    @Test(
        "an erase with the session's token as credential and no password is invalidation: hook once, exit 3",
        arguments: TestBackend.allCases)
    func eraseInvalidates(backend: TestBackend) throws {
        let portal = try PortalHarness(backend: backend)
        #expect(try portal.adopt(token: "token-R", endUserID: "U-2").exitCode == 0)
        let other = try portal.git.portalToken(
            ["erase"],
            stdin: "capability[]=authtype\n" + portal.portalOrigin
                + "authtype=Bearer\ncredential=older-token\n")
        #expect(other.exitCode == 0 && portal.hookRuns.isEmpty)
        let reject = try portal.git.portalToken(
            ["erase"],
            stdin: "capability[]=authtype\n" + portal.portalOrigin
                + "authtype=Bearer\ncredential=token-R\nephemeral=1\n")
        #expect(reject.exitCode == 3)
        #expect(reject.stderr.contains("portal-token: error: the Portal session of U-2 has ended"))
        #expect(!reject.stderr.contains("token-R"))
        #expect(portal.hookRuns == ["unauthorized U-2 \(portal.environmentID)"])
        let again = try portal.git.portalToken(
            ["erase"],
            stdin: "capability[]=authtype\n" + portal.portalOrigin
                + "authtype=Bearer\ncredential=token-R\n")
        #expect(again.exitCode == 0)
        #expect(portal.hookRuns.count == 1)
    }
}

/// Portal hosts through real `git credential fill/approve/reject`: git 2.47 asks with
/// capability[]=authtype and gets the session's token as an ephemeral Bearer credential; git 2.39
/// gets it as a password. Each git then hands back exactly what its fill gave, as it does after a
/// request succeeds (approve) or is refused (reject).
@Suite("git 2.46+ protocol: Portal hosts through real git")
struct GitProtocol246RealGitPortalTests {
    /// What `git credential fill` answers for the Portal origin, asked as each git's HTTP
    /// transport asks: git 2.47 announces every capability it has.
    private func fill(_ portal: PortalHarness, environment: [String: String]? = nil) throws -> ProcessResult {
        let ask = portal.git.git == .current ? "capability[]=authtype\ncapability[]=state\n" : ""
        return try portal.git.credential("fill", ask + portal.portalOrigin, environment: environment)
    }

    @Test(
        "git fill gets the token: from git 2.47 as an ephemeral Bearer credential, from git 2.39 as a password",
        arguments: TestBackend.allCases, RealGit.allCases)
    func fillAnswer(backend: TestBackend, gitVersion: RealGit) throws {
        let portal = try PortalHarness(backend: backend, git: gitVersion)
        #expect(try portal.adopt(token: "token-B", endUserID: "U-1").exitCode == 0)
        let result = try fill(portal)
        #expect(result.exitCode == 0 && result.stderr.isEmpty, "\(result.stderr)")
        switch gitVersion {
        case .current:
            let prefix =
                "capability[]=authtype\nauthtype=Bearer\ncredential=token-B\nephemeral=1\n" + portal.portalOrigin
                + "username=U-1\n"
            #expect(result.stdout.hasPrefix(prefix), "\(result.stdout)")
            #expect(
                result.stdout.dropFirst(prefix.count).wholeMatch(of: /password_expiry_utc=\d+\n/) != nil,
                "\(result.stdout)")
            #expect(!result.stdout.contains("password="))
            // Without the capability, git 2.47 gets a password, with its expiry.
            let plain = try portal.git.credential("fill", portal.portalOrigin)
            #expect(
                plain.stdout.hasPrefix(portal.portalOrigin + "username=U-1\npassword=token-B\npassword_expiry_utc="))
            #expect(!plain.stdout.contains("credential="))
        case .debian12:
            #expect(result.stdout == portal.portalOrigin + "username=U-1\npassword=token-B\n")
        }
        #expect(portal.hookRuns.isEmpty)
    }

    @Test(
        "23 h and 25 h after the last activity git fill gets the token, with an expiry git 2.47 accepts",
        arguments: TestBackend.allCases, RealGit.allCases)
    func fillAcrossIdleWindow(backend: TestBackend, gitVersion: RealGit) throws {
        let portal = try PortalHarness(backend: backend, git: gitVersion)
        portal.server.registerLiveToken("token-I")
        #expect(try portal.adopt(token: "token-I").exitCode == 0)
        let adopted = Int64(Date().timeIntervalSince1970)
        // git 2.47 drops a credential whose password_expiry_utc has passed by its own (here
        // shifted) clock and asks the user instead: the answer must hold a later expiry.
        for (hours, checks) in [(Int64(23), 0), (25, 1)] {
            let result = try fill(portal, environment: try portal.environment(clockShift: hours * 3600))
            #expect(result.exitCode == 0 && result.stderr.isEmpty, "\(hours) h: \(result.stderr)")
            #expect(
                result.stdout.contains("token-I") && !result.stdout.contains("askpass"), "\(hours) h: \(result.stdout)")
            #expect(portal.requests(to: "/api/v3/clients/me").count == checks)
            if gitVersion == .current {
                let expiry = try #require(passwordExpiry(result.stdout))
                #expect(expiry > adopted + hours * 3600)
            }
        }
        #expect(portal.hookRuns.isEmpty)
    }

    @Test(
        "git reject of what git fill gave ends the session: the hook once, the error on git's stderr",
        arguments: TestBackend.allCases, RealGit.allCases)
    func rejectEndsSession(backend: TestBackend, gitVersion: RealGit) throws {
        let portal = try PortalHarness(backend: backend, git: gitVersion)
        #expect(try portal.adopt(token: "token-R", endUserID: "U-2").exitCode == 0)
        let answer = try fill(portal).stdout
        #expect(answer.contains("token-R"))
        let reject = try portal.git.credential("reject", answer)
        // git reports nothing of a helper's failure on reject but what the helper printed, and
        // exits 0 itself.
        #expect(reject.exitCode == 0 && reject.stdout.isEmpty)
        #expect(reject.stderr.contains("portal-token: error: the Portal session of U-2 has ended"), "\(reject.stderr)")
        #expect(!reject.stderr.contains("token-R"))
        #expect(portal.hookRuns == ["unauthorized U-2 \(portal.environmentID)"])
        #expect(try portal.git.portalToken(["get"]).exitCode == 1)
        // A second reject of the same credential finds no session: no second hook run.
        let again = try portal.git.credential("reject", answer)
        #expect(again.exitCode == 0 && portal.hookRuns.count == 1)
    }

    @Test(
        "git approve of what git fill gave slides the session's expiry, with no request to Portal",
        arguments: TestBackend.allCases, RealGit.allCases)
    func approveSlides(backend: TestBackend, gitVersion: RealGit) throws {
        let portal = try PortalHarness(backend: backend, git: gitVersion)
        portal.server.registerLiveToken("token-S")
        #expect(try portal.adopt(token: "token-S").exitCode == 0)
        let before = try #require(
            passwordExpiry(try portal.git.portalToken(["get"], stdin: portal.portalOrigin).stdout))
        let answer = try fill(portal).stdout
        // Ten hours later, the request succeeded and git approves the credential it used.
        let approve = try portal.git.credential(
            "approve", answer, environment: try portal.environment(clockShift: 10 * 3600))
        #expect(approve.exitCode == 0 && approve.stdout.isEmpty && approve.stderr.isEmpty, "\(approve.stderr)")
        let after = try #require(
            passwordExpiry(try portal.portalToken(["get"], stdin: portal.portalOrigin, clockShift: 10 * 3600).stdout))
        #expect(after >= before + 10 * 3600 - 120)
        #expect(portal.hookRuns.isEmpty)
        #expect(portal.requests(to: "/api/v3/clients/me").isEmpty)
        #expect(try portal.git.portalToken(["get"]).stdout == "token-S\n")
    }
}

/// The `password_expiry_utc` of a credential-protocol answer.
private func passwordExpiry(_ output: String) -> Int64? {
    output.split(separator: "\n").first { $0.hasPrefix("password_expiry_utc=") }
        .flatMap { Int64($0.dropFirst("password_expiry_utc=".count)) }
}
