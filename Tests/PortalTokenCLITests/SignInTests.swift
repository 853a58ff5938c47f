import Foundation
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// Signing in end to end: the built binary, a real store (both backends), the fake Portal's six
/// Client Auth endpoints, and the test as the browser and as the person at the terminal.
@Suite("signing in")
struct SignInTests {
    static let email = "  New.User@Example.COM "

    /// Every request kept to the rules of docs/portal-api.md; none carried a bearer but the two-factor one.
    static func expectClean(_ harness: SignInHarness, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(harness.portal.server.violations.map(\.description) == [], sourceLocation: sourceLocation)
        for request in harness.portal.server.requests where request.path.hasPrefix("/api/v3/auth/") {
            #expect(
                (request.header("Authorization") != nil) == (request.path == ClientAuthEndpoint.totpValidations.path),
                "\(request)", sourceLocation: sourceLocation)
        }
    }

    @Test(
        """
        a new user signs in with a magic link through the loopback listener, then get prints the token and status \
        shows the end user
        """,
        arguments: TestBackend.allCases)
    func newUserMagicLink(backend: TestBackend) throws {
        let harness = try SignInHarness(backend: backend)
        let login = try harness.start(["login", "--email", Self.email])
        try login.waitForStderr(containing: "waiting for the browser")
        let sent = try #require(harness.auth.sentLinks.first)
        #expect(sent.email == "new.user@example.com")
        // Requests that are not the redirect are answered and ignored.
        #expect(
            try SimulatedBrowser.get(harness.redirectURL.replacingOccurrences(of: "/callback", with: "/favicon.ico"))
                .status == 404)
        let page = try SimulatedBrowser.get(sent.link)
        #expect(page.status == 200 && page.body.contains("Signed in"))
        let result = try login.finish()
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(result.stderr.contains("signed in as end-user-1"))
        #expect(result.stdout.isEmpty)
        // No live line without a terminal.
        #expect(!result.stderr.contains("\r") && !result.stderr.contains("Ctrl-C"))
        #expect(!result.stderr.lowercased().contains("new.user@example.com"))

        let token = try #require(harness.auth.issuedTokens.first)
        let get = try harness.run(["get"])
        #expect(get.exitCode == 0 && get.stdout == token + "\n")
        let status = try harness.run(["status"])
        #expect(status.exitCode == 0 && status.stdout.contains("signed in as end-user-1"))
        #expect(!status.stdout.contains(token))
        #expect(harness.auth.acceptedExchanges == 1)
        Self.expectClean(harness)
    }

    @Test(
        "Google and Apple: a browser follows the provider back to the listener",
        arguments: [
            (TestBackend.secretService, AuthMethod.google, true), (.file, .google, false),
            (.secretService, .apple, false), (.file, .apple, true),
        ])
    func oauth(backend: TestBackend, provider: AuthMethod, withDisplay: Bool) throws {
        let harness = try SignInHarness(backend: backend, extraEnvironment: withDisplay ? ["DISPLAY": ":99"] : [:])
        let flag = provider == .google ? "--google" : "--apple"
        let login = try harness.start(["login", flag])
        let authorizeURL: String
        if withDisplay {
            // Opened with xdg-open, and not shown on stderr.
            authorizeURL = try harness.openedURL()
            let stderr = try login.waitForStderr(containing: "waiting for the browser")
            #expect(!stderr.contains(authorizeURL))
        } else {
            let stderr = try login.waitForStderr(containing: "waiting for the browser")
            authorizeURL = try #require(
                stderr.split(separator: "\n").first { $0.hasPrefix("http://") }.map(String.init))
            #expect(harness.launched("xdg-open").isEmpty)
        }
        #expect(authorizeURL.contains("provider=\(provider.rawValue)"))
        let back = try SimulatedBrowser.followProvider(authorizeURL)
        #expect(back.hasPrefix(harness.redirectURL + "?token=") && back.hasSuffix("login_type=\(provider.rawValue)"))
        #expect(try SimulatedBrowser.get(back).status == 200)
        let result = try login.finish()
        #expect(result.exitCode == 0, "\(result.stderr)")
        let got = try harness.run(["get"])
        #expect(
            got.stdout == harness.auth.issuedTokens.first.map { $0 + "\n" },
            "get: exit \(got.exitCode), stdout \(got.stdout.count) bytes, stderr: \(got.stderr)")
        #expect(harness.requests(to: .oauthURLs).count == 1 && harness.requests(to: .oauthTokens).count == 1)
        Self.expectClean(harness)
    }

    @Test("--no-browser prints the address even with a display", arguments: [TestBackend.file])
    func noBrowser(backend: TestBackend) throws {
        let harness = try SignInHarness(backend: backend, extraEnvironment: ["DISPLAY": ":99"])
        let login = try harness.start(["login", "--google", "--no-browser", "--timeout", "30"])
        let stderr = try login.waitForStderr(containing: "waiting for the browser")
        let url = try #require(stderr.split(separator: "\n").first { $0.hasPrefix("http://") })
        #expect(try SimulatedBrowser.get(try SimulatedBrowser.followProvider(String(url))).status == 200)
        #expect(try login.finish().exitCode == 0)
        #expect(harness.launched("xdg-open").isEmpty)
    }

    @Test(
        """
        a custom scheme: login sends the link and leaves it to redirect; the same URL again needs no exchange; \
        after logout it is spent (exit 6)
        """,
        arguments: TestBackend.allCases)
    func customSchemeAndReplay(backend: TestBackend) throws {
        let harness = try SignInHarness(backend: backend, redirectURL: "portalexample://auth/callback")
        let login = try harness.run(["login", "--email", "user@example.com"])
        #expect(login.exitCode == 0, "\(login.stderr)")
        #expect(login.stderr.contains("the desktop handler ('portal-token redirect') finishes the sign-in"))
        #expect(
            login.stderr.contains("xdg-mime default io.portalhq.PortalToken.desktop x-scheme-handler/portalexample"))
        // The warning about launchers follows this machine's /proc, as portal-token reads it.
        let mountInfo = try String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)
        #expect(
            login.stderr.contains("portal-token: warning: other local users can read command lines here")
                == !ProcessListVisibility.hidesOtherUsers(mountInfo: mountInfo), "\(login.stderr)")
        let link = try harness.sentLink()

        let first = try harness.run(["redirect", link])
        #expect(first.exitCode == 0, "\(first.stderr)")
        #expect(first.stderr.contains("signed in as end-user-1"))
        // A new process, as a desktop delivers the URL again: the stored session, no request.
        let again = try harness.run(["redirect", link])
        #expect(again.exitCode == 0 && again.stderr.contains("nothing was sent to Portal"))
        // Read from stdin too.
        #expect(try harness.run(["redirect", "-"], stdin: link + "\n").exitCode == 0)
        #expect(harness.requests(to: .magicLinkValidations).count == 1)
        #expect(try harness.run(["get"]).stdout == (harness.auth.issuedTokens.first ?? "?") + "\n")

        #expect(try harness.run(["logout"]).exitCode == 0)
        let replayed = try harness.run(["redirect", link])
        #expect(replayed.exitCode == 6)
        #expect(replayed.stderr.contains("token already used"))
        #expect(harness.requests(to: .magicLinkValidations).count == 2)
        #expect(harness.auth.acceptedExchanges == 1)
        #expect(try harness.run(["get"]).exitCode == 1)
        Self.expectClean(harness)
    }

    @Test(
        """
        where /proc shows command lines, login and redirect refuse a custom-scheme redirect URL (exit 2, nothing \
        sent) unless accept-custom-scheme-risk accepts it; under /proc mounted with hidepid login goes ahead
        """)
    func customSchemeNeedsHiddenCommandLines() throws {
        let harness = try SignInHarness(
            backend: .file, redirectURL: "portalexample://auth/callback",
            extraEnvironment: ["PORTAL_TOKEN_ACCEPT_CUSTOM_SCHEME_RISK": nil])
        let mountInfo = try String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)
        try #require(!ProcessListVisibility.hidesOtherUsers(mountInfo: mountInfo), "needs /proc without hidepid")

        let refused = try harness.run(["login", "--email", "user@example.com"])
        #expect(refused.exitCode == 2, "\(refused.stderr)")
        let refusal = "portal-token: error: other local users can read command lines here (/proc is not mounted"
        #expect(refused.stderr.hasPrefix(refusal + " with hidepid)"), "\(refused.stderr)")
        #expect(refused.stderr.contains("hint: register a loopback redirect URL, http://127.0.0.1:PORT/path"))
        #expect(refused.stderr.contains("PORTAL_TOKEN_ACCEPT_CUSTOM_SCHEME_RISK"))
        #expect(!refused.stderr.contains("user@example.com") && !refused.stderr.contains("portalexample://"))
        #expect(harness.requests(to: .magicLinks).isEmpty)

        // redirect takes no URL for a login that could not accept it: nothing is exchanged.
        let grant = harness.auth.issueGrant(method: .google)
        let url = FakeClientAuth.redirect(harness.redirectURL, grant: grant, method: .google)
        let redirect = try harness.run(["redirect", "-"], stdin: url + "\n")
        #expect(redirect.exitCode == 2, "\(redirect.stderr)")
        #expect(redirect.stderr.contains("other local users can read command lines here"))
        #expect(!redirect.stderr.contains(grant))
        #expect(harness.auth.acceptedExchanges == 0)
        #expect(harness.requests(to: .oauthTokens).isEmpty && harness.requests(to: .magicLinkValidations).isEmpty)

        // The setting accepts the risk, and says so in a warning.
        let accepted = try harness.run(
            ["login", "--email", "user@example.com"], ["PORTAL_TOKEN_ACCEPT_CUSTOM_SCHEME_RISK": "true"])
        #expect(accepted.exitCode == 0, "\(accepted.stderr)")
        #expect(accepted.stderr.contains("portal-token: warning: other local users can read command lines here"))
        #expect(harness.requests(to: .magicLinks).count == 1)

        // The same command where /proc hides other users' processes (a mount namespace of its own,
        // a proc mounted with hidepid=invisible): the real mount options decide, no setting.
        let hidden = try ProcessRunner.run(
            "/usr/bin/unshare",
            [
                "-m", "--propagation", "private", "/bin/sh", "-c",
                "mount -t proc -o hidepid=invisible proc /proc && exec \"$0\" \"$@\"",
                ProcessRunner.portalTokenPath, "login", "--email", "user@example.com",
            ], environment: harness.environment, timeout: 30)
        #expect(hidden.exitCode == 0, "\(hidden.stderr)")
        #expect(!hidden.stderr.contains("warning"), "\(hidden.stderr)")
        #expect(harness.requests(to: .magicLinks).count == 2)
    }

    @Test(
        "a sign-in replaces its end user's session that get was handing out from its kernel-keyring copy",
        arguments: TestBackend.allCases)
    func signInReplacesCachedSession(backend: TestBackend) throws {
        let harness = try SignInHarness(backend: backend, redirectURL: "portalexample://auth/callback")
        harness.portal.server.registerLiveToken("token-before")
        #expect(try harness.portal.adopt(token: "token-before", endUserID: "user-before").exitCode == 0)
        #expect(try harness.run(["get"]).stdout == "token-before\n")
        let grant = harness.auth.issueGrant(method: .google)
        let second = try harness.run(
            ["redirect", FakeClientAuth.redirect(harness.redirectURL, grant: grant, method: .google)])
        #expect(second.exitCode == 0)
        #expect(
            second.stderr.contains("note: 2 end users are signed in to '\(harness.portal.environmentID)' now"),
            "the sign-in says how to choose from now on: \(second.stderr)")
        // Another end user's sign-in keeps the first's session beside it: each by name, and
        // neither served for the environment alone (exit 2, naming both).
        #expect(
            try harness.run(["get", "--end-user", "end-user-1"]).stdout == (harness.auth.issuedTokens.first ?? "?")
                + "\n")
        #expect(try harness.run(["get", "--end-user", "user-before"]).stdout == "token-before\n")
        let unchosen = try harness.run(["get"])
        #expect(unchosen.exitCode == 2 && unchosen.stderr.contains("2 end users are signed in"), "\(unchosen.stderr)")
        #expect(try harness.run(["--end-user", "end-user-1", "status"]).stdout.contains("signed in as end-user-1"))
        #expect(try harness.run(["logout", "--end-user", "user-before"]).exitCode == 0)
        // One left: served for the environment alone again, and replaced by its own sign-in.
        #expect(try harness.run(["get"]).stdout == (harness.auth.issuedTokens.first ?? "?") + "\n")
        let again = harness.auth.issueGrant(method: .google)
        #expect(
            try harness.run(["redirect", FakeClientAuth.redirect(harness.redirectURL, grant: again, method: .google)])
                .exitCode == 0)
        #expect(try harness.run(["get"]).stdout == (harness.auth.issuedTokens.dropFirst().first ?? "?") + "\n")
        #expect(try harness.run(["logout"]).exitCode == 0)
        #expect(try harness.run(["get"]).exitCode == 1)
    }

    @Test("two deliveries of one URL at the same moment exchange it once", arguments: TestBackend.allCases)
    func concurrentDeliveries(backend: TestBackend) throws {
        let harness = try SignInHarness(backend: backend, redirectURL: "portalexample://auth/callback")
        let grant = harness.auth.issueGrant(method: .emailMagicLink)
        let link = FakeClientAuth.redirect(harness.redirectURL, grant: grant, method: .emailMagicLink)
        let codes = try concurrently(4) { try harness.run(["redirect", link]).exitCode }
        #expect(codes == [0, 0, 0, 0])
        #expect(harness.requests(to: .magicLinkValidations).count == 1)
    }

    @Test("a grant already spent is refused by Portal: exit 6, nothing stored", arguments: [TestBackend.file])
    func spentGrant(backend: TestBackend) throws {
        let harness = try SignInHarness(backend: backend, redirectURL: "portalexample://auth/callback")
        let grant = harness.auth.issueGrant(method: .google)
        harness.auth.spend(grant)
        let result = try harness.run([
            "redirect", FakeClientAuth.redirect(harness.redirectURL, grant: grant, method: .google),
        ])
        #expect(result.exitCode == 6)
        #expect(
            result.stderr.contains(
                "portal-token: error: Portal refused the sign-in grant (HTTP 400): token already used"))
        #expect(result.stderr.contains("hint: a sign-in link works once"))
        #expect(!result.stderr.contains(grant))
        #expect(try harness.run(["get"]).exitCode == 1)
    }

    @Test("redirect: not ours is exit 7 with nothing sent; an error parameter is exit 6", arguments: [TestBackend.file])
    func redirectRefusals(backend: TestBackend) throws {
        let harness = try SignInHarness(backend: backend, redirectURL: "portalexample://auth/callback")
        for url in [
            "otherapp://auth/callback?token=g&authMethod=EMAIL_MAGIC_LINK", "portalexample://auth/callback?token=g",
            "portalexample://auth/callback", "portalexample://auth/Callback?token=g&login_type=GOOGLE",
            "portalexample://auth/callback?token=g&login_type=google", String(repeating: "a", count: 8193),
        ] {
            let result = try harness.run(["redirect", url])
            #expect(result.exitCode == 7, "\(url.prefix(60)): \(result.stderr)")
            #expect(
                result.stderr.hasPrefix("portal-token: error: the URL is not a sign-in redirect for this configuration")
            )
        }
        let failed = try harness.run([
            "redirect", "portalexample://auth/callback?token=g&authMethod=EMAIL_MAGIC_LINK&error=oauth%5Ffailed+now",
        ])
        #expect(failed.exitCode == 6)
        #expect(failed.stderr.contains("portal-token: error: sign-in failed: oauth_failed now"))
        #expect(harness.portal.server.requests.isEmpty)
        #expect(try harness.run(["redirect"]).exitCode == 2)
    }

    @Test(
        """
        a session Portal gave but the store refused: exit 4; the same URL again finishes the write with no second \
        exchange
        """,
        arguments: [TestBackend.file])
    func persistFailureFile(backend: TestBackend) throws {
        let harness = try SignInHarness(backend: backend, redirectURL: "portalexample://auth/callback")
        let grant = harness.auth.issueGrant(method: .emailMagicLink)
        let link = FakeClientAuth.redirect(harness.redirectURL, grant: grant, method: .emailMagicLink)
        // The desktop handler has no passphrase for the new store file.
        let refused = try harness.run(["redirect", link], ["PORTAL_TOKEN_PASSPHRASE": nil])
        #expect(refused.exitCode == 4, "\(refused.stderr)")
        #expect(
            refused.stderr.contains(
                "portal-token: error: Portal signed in end-user-1, but the session could not be stored: no passphrase"))
        #expect(refused.stderr.contains("open the same sign-in link again"))
        #expect(!refused.stderr.contains(grant) && !refused.stderr.contains("session-"))
        let finished = try harness.run(["redirect", link])
        #expect(finished.exitCode == 0, "\(finished.stderr)")
        #expect(finished.stderr.contains("signed in as end-user-1"))
        #expect(harness.requests(to: .magicLinkValidations).count == 1)
        #expect(try harness.run(["get"]).stdout == (harness.auth.issuedTokens.first ?? "?") + "\n")
    }

    @Test("the keyring stops answering between the exchange and the write: exit 4, then the URL again finishes it")
    func persistFailureKeyring() throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        let server = try FakePortalServer()
        defer { server.stop() }
        let environmentID = "env-\(UInt32.random(in: 0...UInt32.max))"
        let redirectURL = "portalexample://auth/callback"
        let auth = FakeClientAuth(
            server: server, options: .init(authEnvironmentID: environmentID, redirectURLs: [redirectURL]))
        var environment = keyring.environment
        environment["PORTAL_TOKEN_BACKEND"] = "secret-service"
        environment["PORTAL_AUTH_ENVIRONMENT_ID"] = environmentID
        environment["PORTAL_API_HOST"] = "127.0.0.1:\(server.port)"
        environment["PORTAL_REDIRECT_URL"] = redirectURL
        // The suite's /proc shows command lines (docs/security.md, "The sign-in grant").
        environment["PORTAL_TOKEN_ACCEPT_CUSTOM_SCHEME_RISK"] = "true"
        environment["PORTAL_TOKEN_KEYRING_TIMEOUT_MS"] = "800"
        let grant = auth.issueGrant(method: .apple)
        let link = FakeClientAuth.redirect(redirectURL, grant: grant, method: .apple)
        let daemon = try #require(keyring.keyringPID)
        auth.onAcceptedExchange { kill(daemon, SIGSTOP) }
        let refused = try ProcessRunner.portalToken(["redirect", link], environment: environment)
        #expect(refused.exitCode == 4, "\(refused.stderr)")
        #expect(refused.stderr.contains("but the session could not be stored"))
        auth.onAcceptedExchange(nil)
        keyring.continueKeyring()
        let finished = try ProcessRunner.portalToken(["redirect", link], environment: environment)
        #expect(finished.exitCode == 0, "\(finished.stderr)")
        #expect(auth.acceptedExchanges == 1)
        #expect(server.requests.filter { $0.path == ClientAuthEndpoint.oauthTokens.path }.count == 1)
        #expect(
            try ProcessRunner.portalToken(["get"], environment: environment).stdout == (auth.issuedTokens.first ?? "?")
                + "\n")
    }

    @Test(
        """
        two-factor through the prompt: the enrollment code and secret on the terminal, a wrong code and a short \
        one asked again
        """,
        arguments: TestBackend.allCases)
    func twoFactorPrompt(backend: TestBackend) throws {
        let harness = try SignInHarness(
            backend: backend, endUser: .init(id: "end-user-2fa", totpCode: "123456", enrolling: true))
        let terminal = try harness.startOnTerminal(["login", "--email", "user@example.com"])
        try terminal.waitFor("left (Ctrl-C to stop)")
        let page = try SimulatedBrowser.get(try harness.sentLink())
        #expect(page.body.contains("Two-factor code needed"))
        let shown = try terminal.waitFor("Two-factor code for end-user-2fa: ")
        #expect(shown.contains("scan this code with your authenticator app"))
        #expect(shown.contains("▀") || shown.contains("▄"))
        #expect(shown.contains("GEZD GNBV GY3T QOJQ GEZD GNBV GY3T QOJQ"))
        #expect(shown.contains("Never share this code or secret"))
        terminal.type("000000\n")
        try terminal.waitFor("Two-factor code for end-user-2fa: ", occurrences: 2)
        terminal.type("12345\n")
        try terminal.waitFor("Two-factor code for end-user-2fa: ", occurrences: 3)
        terminal.type("123456\n")
        #expect(try terminal.finish() == 0)
        let text = terminal.text
        #expect(text.contains("Portal refused the two-factor code (HTTP 400): invalid code; 2 more tries"))
        #expect(text.contains("the two-factor code must be exactly six digits; 1 more try"))
        #expect(text.contains("signed in as end-user-2fa"))
        // Echo was off: no code was shown as typed.
        #expect(!text.contains("123456") && !text.contains("000000"))
        #expect(harness.requests(to: .totpValidations).count == 2)
        #expect(try harness.run(["get"]).stdout == (harness.auth.issuedTokens.first ?? "?") + "\n")
        #expect(try harness.run(["verify-totp", "123456"]).exitCode == 1)
        Self.expectClean(harness)
    }

    @Test(
        "three refused codes end the prompt with exit 6, and verify-totp can still finish",
        arguments: [TestBackend.file])
    func twoFactorPromptExhausted(backend: TestBackend) throws {
        let harness = try SignInHarness(
            backend: backend, redirectURL: "portalexample://auth/callback",
            endUser: .init(id: "end-user-2fa", totpCode: "654321"))
        let grant = harness.auth.issueGrant(method: .emailMagicLink)
        let terminal = try harness.startOnTerminal([
            "redirect", FakeClientAuth.redirect(harness.redirectURL, grant: grant, method: .emailMagicLink),
        ])
        for attempt in 1...3 {
            try terminal.waitFor("Two-factor code for end-user-2fa: ", occurrences: attempt)
            terminal.type("111111\n")
        }
        #expect(try terminal.finish() == 6)
        #expect(terminal.text.contains("hint: run 'portal-token verify-totp' before the step expires to try again"))
        #expect(!terminal.text.contains("scan this code"))
        #expect(try harness.run(["verify-totp", "654321"]).exitCode == 0)
    }

    @Test("two-factor through verify-totp after the desktop handler", arguments: TestBackend.allCases)
    func twoFactorVerifyCommand(backend: TestBackend) throws {
        let harness = try SignInHarness(
            backend: backend, redirectURL: "portalexample://auth/callback",
            endUser: .init(id: "end-user-2fa", totpCode: "777870", enrolling: true))
        #expect(try harness.run(["verify-totp", "777870"]).exitCode == 1)
        let grant = harness.auth.issueGrant(method: .google)
        let link = FakeClientAuth.redirect(harness.redirectURL, grant: grant, method: .google)
        let handled = try harness.run(["redirect", link])
        #expect(handled.exitCode == 0, "\(handled.stderr)")
        #expect(
            handled.stderr.contains(
                """
                end-user-2fa needs a two-factor code to finish signing in: run 'portal-token verify-totp' within \
                10 minutes
                """
            ))
        // No terminal: enrollment is never shown.
        #expect(!handled.stderr.contains("GEZD") && !handled.stderr.contains("otpauth"))
        #expect(try harness.run(["get"]).exitCode == 1)
        // status tells of the waiting step (docs/commands.md, "Every command"), still not signed in.
        let waiting = try harness.run(["status"])
        #expect(waiting.exitCode == 1)
        #expect(
            waiting.stdout.contains(
                "two-factor:   a step for end-user-2fa is waiting; run 'portal-token verify-totp' before "),
            "\(waiting.stdout)")
        // Delivered again: the waiting step, no second exchange.
        #expect(try harness.run(["redirect", link]).stderr.contains("needs a two-factor code"))

        let short = try harness.run(["verify-totp", "7778"])
        #expect(short.exitCode == 2 && short.stderr.contains("exactly six digits"))
        let wrong = try harness.run(["verify-totp", "000000"])
        #expect(wrong.exitCode == 6 && wrong.stderr.contains("invalid code"))
        let right = try harness.run(["verify-totp"], stdin: "777870\n")
        #expect(right.exitCode == 0, "\(right.stderr)")
        #expect(right.stderr.contains("signed in as end-user-2fa"))
        #expect(try harness.run(["get"]).stdout == (harness.auth.issuedTokens.first ?? "?") + "\n")
        #expect(harness.requests(to: .oauthTokens).count == 1 && harness.requests(to: .totpValidations).count == 2)
        // The URL once more resolves to the session the code produced.
        #expect(try harness.run(["redirect", link]).stderr.contains("nothing was sent to Portal"))
        #expect(try harness.run(["verify-totp", "777870"]).exitCode == 1)
        Self.expectClean(harness)
    }

    @Test("Ctrl-C while waiting exits 130 and releases the port", arguments: [TestBackend.file])
    func interrupt(backend: TestBackend) throws {
        let harness = try SignInHarness(backend: backend)
        let terminal = try harness.startOnTerminal(["login", "--google", "--no-browser"])
        try terminal.waitFor("left (Ctrl-C to stop)")
        terminal.type("\u{03}")
        #expect(try terminal.finish() == 130)
        #expect(terminal.text.contains("sign-in interrupted"))
        let port = try #require(URLComponents(string: harness.redirectURL)?.port)
        #expect(try SimulatedBrowser.canBind(port: UInt16(port)))
        // The same with SIGTERM and no terminal.
        let login = try harness.start(["login", "--email", "user@example.com"])
        try login.waitForStderr(containing: "waiting for the browser")
        login.signal(SIGTERM)
        #expect(try login.finish().exitCode == 130)
        #expect(try SimulatedBrowser.canBind(port: UInt16(port)))
    }

    @Test("configuration and Portal's refusals map to the documented exit codes", arguments: [TestBackend.file])
    func refusals(backend: TestBackend) throws {
        let harness = try SignInHarness(backend: backend)
        #expect(try harness.run(["login"]).exitCode == 2)
        #expect(try harness.run(["login", "--google", "--apple"]).exitCode == 2)
        #expect(try harness.run(["login", "--google", "--timeout", "0"]).exitCode == 2)
        let blank = try harness.run(["login", "--email", "   "])
        #expect(blank.exitCode == 2 && blank.stderr.contains("the email address is empty"))
        let noRedirect = try harness.run(["login", "--google"], ["PORTAL_REDIRECT_URL": nil])
        #expect(noRedirect.exitCode == 2 && noRedirect.stderr.contains("no redirect URL is set"))
        let noTemplate = try harness.run(["login", "--email", "a@b.c"], ["PORTAL_MAGIC_LINK_TEMPLATE_ID": nil])
        #expect(noTemplate.exitCode == 2 && noTemplate.stderr.contains("PORTAL_MAGIC_LINK_TEMPLATE_ID is not set"))
        #expect(try harness.run(["login", "--google"], ["PORTAL_AUTH_ENVIRONMENT_ID": nil]).exitCode == 2)
        #expect(harness.portal.server.requests.isEmpty)

        harness.auth.options.magicLinkBehaviour = .rateLimited
        let limited = try harness.run(["login", "--email", "a@b.c", "--timeout", "5"])
        #expect(
            limited.exitCode == 6 && limited.stderr.contains("too many links were sent to this address; wait a minute"))
        #expect(harness.requests(to: .magicLinks).count == 1)
        harness.auth.options.magicLinkBehaviour = .unauthorized
        let refused = try harness.run(["login", "--email", "a@b.c", "--timeout", "5"])
        #expect(
            refused.exitCode == 2 && refused.stderr.contains("the redirect URL, sender or template is not accepted"))
        harness.auth.options.providers = [.google]
        let apple = try harness.run(["login", "--apple", "--timeout", "5"])
        #expect(apple.exitCode == 6 && apple.stderr.contains("sign-in with APPLE is not available"))
        harness.auth.options.accountAbstractionAvailable = false
        let aa = try harness.run(["login", "--google", "--timeout", "5"], ["PORTAL_ACCOUNT_ABSTRACTED": "true"])
        #expect(
            aa.exitCode == 6
                && aa.stderr.contains("account abstraction is not available: Account abstraction is not enabled"))
        #expect(harness.requests(to: .oauthURLs).last?.query?.hasSuffix("&isAccountAbstracted=true") == true)

        // A port already taken is reported before anything is sent.
        let before = harness.portal.server.requests.count
        let port = try #require(URLComponents(string: harness.redirectURL)?.port)
        let blocker = try SimulatedBrowser.listen(port: UInt16(port))
        defer { close(blocker) }
        let busy = try harness.run(["login", "--email", "a@b.c"])
        #expect(busy.exitCode == 2 && busy.stderr.contains("the port is in use"))
        #expect(harness.portal.server.requests.count == before)
    }

    @Test("methods lists what Portal allows, unknown methods dropped", arguments: [TestBackend.file])
    func methods(backend: TestBackend) throws {
        let harness = try SignInHarness(backend: backend) {
            $0.allowedMethods = ["PASSKEY", "GOOGLE", "EMAIL_MAGIC_LINK"]; $0.autoCreateWallet = true
        }
        let text = try harness.run(["methods"])
        #expect(text.exitCode == 0)
        #expect(
            text.stdout
                == """
                GOOGLE            portal-token login --google\nEMAIL_MAGIC_LINK  portal-token login --email \
                ADDRESS\nautoCreateWallet: true\n
                """
        )
        let json = try harness.run(["methods", "--format", "json"])
        #expect(json.stdout == #"{"allowedAuthMethods":["GOOGLE","EMAIL_MAGIC_LINK"],"autoCreateWallet":true}"# + "\n")
        let wrongEnvironment = try harness.run(["methods"], ["PORTAL_AUTH_ENVIRONMENT_ID": "env-unknown"])
        #expect(
            wrongEnvironment.exitCode == 2
                && wrongEnvironment.stderr.contains("Portal did not accept the auth environment ID"))
        Self.expectClean(harness)
    }
}

/// docs/security.md, "What never leaks": no grant, session token, userJwt, email address, totpLink, enrollment
/// secret or code in any output, trace or child's command line, over every sign-in flow.
@Suite("signing in: the secrets canary")
struct SignInCanaryTests {
    final class Collected {
        var outputs: [String] = []
        /// Output of the terminal flow, where the enrollment code and secret may appear.
        var terminal: [String] = []
        var grants: [String] = []
        var codes: [String] = []

        func add(_ result: ProcessResult) { outputs += [result.stdout, result.stderr] }
    }

    @Test(
        "every flow, traced, leaves no secret in stderr, stdout, the trace or a child's arguments",
        arguments: TestBackend.allCases)
    func canary(backend: TestBackend) throws {
        let email = "Canary.\(UUID().uuidString)@Example.ORG"
        let collected = Collected()
        let traced: [String: String?] = ["PORTAL_TOKEN_TRACE": "1", "DISPLAY": ":99"]

        // Magic link through the loopback listener, with a two-factor step on a terminal.
        let loopback = try SignInHarness(
            backend: backend, endUser: .init(id: "end-user-canary", totpCode: "246810", enrolling: true),
            extraEnvironment: traced)
        let terminal = try loopback.startOnTerminal(["login", "--email", email])
        try terminal.waitFor("left (Ctrl-C to stop)")
        let link = try loopback.sentLink()
        collected.grants.append(try #require(loopback.auth.sentLinks.last?.grant))
        _ = try SimulatedBrowser.get(link)
        try terminal.waitFor("Two-factor code for end-user-canary: ")
        terminal.type("135791\n")
        try terminal.waitFor("Two-factor code for end-user-canary: ", occurrences: 2)
        terminal.type("246810\n")
        #expect(try terminal.finish() == 0)
        collected.terminal.append(terminal.text)
        collected.codes += ["135791", "246810"]
        #expect(terminal.text.contains("portal-token: trace: http: POST"))

        // Google through xdg-open.
        let oauth = try SignInHarness(backend: backend, extraEnvironment: traced)
        let google = try oauth.start(["login", "--google"])
        let authorizeURL = try oauth.openedURL()
        let back = try SimulatedBrowser.followProvider(authorizeURL)
        collected.grants.append(
            try #require(back.split(separator: "=").dropFirst().first?.split(separator: "&").first.map(String.init)))
        _ = try SimulatedBrowser.get(back)
        let googleResult = try google.finish()
        #expect(googleResult.exitCode == 0)
        collected.add(googleResult)
        // xdg-open got the authorize URL and nothing else: the one place it leaves portal-token.
        #expect(oauth.launched("xdg-open") == [[authorizeURL]])
        collected.add(try oauth.run(["status"]))

        // A custom scheme through the desktop handler, two-factor by verify-totp, a failed write.
        let desktop = try SignInHarness(
            backend: backend, redirectURL: "portalexample://auth/callback",
            endUser: .init(id: "end-user-desktop", totpCode: "777870", enrolling: true),
            extraEnvironment: traced)
        collected.add(try desktop.run(["login", "--email", email]))
        let desktopLink = try desktop.sentLink()
        collected.grants.append(try #require(desktop.auth.sentLinks.last?.grant))
        collected.add(try desktop.run(["redirect", desktopLink]))
        collected.add(try desktop.run(["redirect", desktopLink]))
        collected.add(try desktop.run(["verify-totp", "000000"]))
        collected.add(try desktop.run(["verify-totp"], stdin: "777870\n"))
        collected.codes += ["000000", "777870"]
        collected.add(try desktop.run(["redirect", desktopLink]))
        collected.add(try desktop.run(["logout"]))
        collected.add(try desktop.run(["redirect", desktopLink]))
        collected.add(
            try desktop.run(["redirect", "portalexample://auth/callback?token=\(collected.grants.last!)&error=denied"]))
        let notifications = desktop.launched("notify-send")
        #expect(!notifications.isEmpty)

        if backend == .file {
            let grant = desktop.auth.issueGrant(method: .apple, endUser: .init(id: "end-user-apple"))
            collected.grants.append(grant)
            let url = FakeClientAuth.redirect(desktop.redirectURL, grant: grant, method: .apple)
            // A new store file and no passphrase for it: the write fails after the exchange.
            let store = desktop.portal.git.directory.appendingPathComponent("other-store").path
            let refused = try desktop.run(
                ["redirect", url], ["PORTAL_TOKEN_PASSPHRASE": nil, "PORTAL_TOKEN_FILE": store])
            #expect(refused.exitCode == 4)
            collected.add(refused)
            let finished = try desktop.run(["redirect", url], ["PORTAL_TOKEN_FILE": store])
            #expect(finished.exitCode == 0)
            collected.add(finished)
        }

        var forbidden = [email, email.lowercased(), "otpauth", FakeClientAuth.enrollmentSecret, "GEZD GNBV"]
        forbidden += collected.grants + collected.codes
        for harness in [loopback, oauth, desktop] {
            forbidden += harness.auth.issuedTokens + harness.auth.issuedUserJWTs
        }
        for arguments in desktop.launched("notify-send") + loopback.launched("notify-send") {
            for value in forbidden {
                #expect(!arguments.joined(separator: " ").contains(value), "notify-send got a secret")
            }
        }
        // The trace was on, so the checks below saw it.
        #expect(collected.outputs.joined().contains("portal-token: trace: redirect: exchanging the grant"))
        #expect(
            collected.grants.count >= 3 && !loopback.auth.issuedUserJWTs.isEmpty && !desktop.auth.issuedTokens.isEmpty)
        for output in collected.outputs {
            for value in forbidden where !value.isEmpty {
                #expect(!output.contains(value), "a secret (\(value.prefix(8))…) reached the output: \(output)")
            }
        }
        // On the terminal the enrollment is shown by design; nothing else secret is.
        for output in collected.terminal {
            for value in [email, email.lowercased()] + collected.grants + collected.codes + loopback.auth.issuedTokens
                + loopback.auth.issuedUserJWTs
            {
                #expect(!output.contains(value), "a secret (\(value.prefix(8))…) reached the terminal")
            }
        }
        // The kernel's list of keys names no grant.
        let keys = (try? String(contentsOfFile: "/proc/keys", encoding: .utf8)) ?? ""
        for grant in collected.grants { #expect(!keys.contains(grant)) }
    }
}

@Suite("signing in against the hand-started fake server")
struct HandStartedFakeServerTests {
    @Test("docs/signing-in.md's walk-through: the fake by hand, login --email, get, status")
    func walkThrough() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("portal-try-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let fakeServer = URL(fileURLWithPath: ProcessRunner.portalTokenPath).deletingLastPathComponent()
            .appendingPathComponent("portal-fake-server").path
        let redirectURL = "http://127.0.0.1:\(freeLoopbackPort())/callback"
        let server = try RunningProcess(
            fakeServer,
            [
                "--port", "0", "--auth-env", "env-local", "--redirect-url", redirectURL,
                "--end-user", "first-user",
            ], environment: ProcessRunner.environment())
        defer { server.signal(SIGTERM) }
        let deadline = ProcessRunner.monotonicSeconds() + 20
        while !server.stdout.contains("\n"), ProcessRunner.monotonicSeconds() < deadline { usleep(20_000) }
        let baseURL = try #require(server.stdout.split(separator: "\n").first)
        try (("try it out\n") as String).write(toFile: directory + "/passphrase", atomically: false, encoding: .utf8)
        chmod(directory + "/passphrase", 0o600)
        let environment = ProcessRunner.environment([
            "HOME": directory, "XDG_RUNTIME_DIR": nil, "XDG_DATA_HOME": nil, "XDG_CONFIG_HOME": nil,
            "PORTAL_TOKEN_BACKEND": "file", "PORTAL_TOKEN_FILE": directory + "/store",
            "PORTAL_TOKEN_PASSPHRASE_FILE": directory + "/passphrase", "PORTAL_TOKEN_PASSPHRASE": nil,
            "PORTAL_API_HOST": String(baseURL.dropFirst("http://".count)), "PORTAL_AUTH_ENVIRONMENT_ID": "env-local",
            "PORTAL_REDIRECT_URL": redirectURL,
            "PORTAL_MAGIC_LINK_FROM_EMAIL": "noreply@example.com", "PORTAL_MAGIC_LINK_TEMPLATE_ID": "template-1",
        ])
        let methods = try ProcessRunner.portalToken(["methods"], environment: environment)
        #expect(methods.exitCode == 0 && methods.stdout.contains("EMAIL_MAGIC_LINK"))
        let login = try RunningProcess(
            ProcessRunner.portalTokenPath, ["login", "--email", "you@example.com"], environment: environment)
        try login.waitForStderr(containing: "waiting for the browser")
        while !server.stdout.contains("magic link: "), ProcessRunner.monotonicSeconds() < deadline { usleep(20_000) }
        let link = try #require(
            server.stdout.split(separator: "\n").first { $0.hasPrefix("magic link: ") }?.dropFirst("magic link: ".count)
        )
        #expect(try SimulatedBrowser.get(String(link)).body.contains("Signed in"))
        let result = try login.finish()
        #expect(result.exitCode == 0 && result.stderr.contains("signed in as first-user"), "\(result.stderr)")
        let get = try ProcessRunner.portalToken(["get"], environment: environment)
        #expect(get.exitCode == 0 && get.stdout.hasPrefix("session-"))
        let status = try ProcessRunner.portalToken(["status"], environment: environment)
        #expect(status.exitCode == 0 && status.stdout.contains("signed in as first-user"))
    }
}
