import Dispatch
import Foundation
import LoopbackRedirectListener
import PortalHTTP
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// The sign-in building blocks end to end: the Client Auth client over libcurl against the fake
/// Portal's six auth endpoints, the fake OAuth provider, and the loopback listener.
@Suite("sign-in against the fake Portal")
struct ClientAuthFakeServerTests {
    struct Fixture {
        let server: FakePortalServer
        let fake: FakeClientAuth
        let client: ClientAuthClient
        let redirectURL: String

        init(
            redirectURL: String = "portalexample://auth/callback", accountAbstracted: Bool? = nil,
            environment: String = "env-test", configure: (inout FakeClientAuth.Options) -> Void = { _ in }
        ) throws {
            server = try FakePortalServer()
            var options = FakeClientAuth.Options(
                redirectURLs: [redirectURL], magicLinkFromEmail: "noreply@example.com",
                magicLinkTemplateID: "template-1")
            configure(&options)
            fake = FakeClientAuth(server: server, options: options)
            let base = try PortalAPIBase(apiHost: "127.0.0.1:\(server.port)")
            let configuration = try ClientAuthConfiguration(
                authEnvironmentID: environment, redirectURL: redirectURL,
                accountAbstracted: accountAbstracted,
                magicLinkFromEmail: "noreply@example.com", magicLinkTemplateID: "template-1")
            client = ClientAuthClient(
                api: ClientAuthAPI(
                    configuration: configuration, apiBase: base,
                    builder: PortalRequestBuilder(gate: PortalHostGate(apiBase: base), version: "1.0.0")),
                transport: CurlTransport(options: HTTPTransportOptions()))
            self.redirectURL = redirectURL
        }

        /// Every request kept to docs/portal-api.md, and none carried a bearer but the two-factor one.
        func expectClean(sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(server.violations.map(\.description) == [], sourceLocation: sourceLocation)
            for request in server.requests where request.path != FakeClientAuth.providerPath {
                let isTOTP = request.path == ClientAuthEndpoint.totpValidations.path
                #expect(
                    (request.header("Authorization") != nil) == isTOTP, "\(request)", sourceLocation: sourceLocation)
                #expect(request.header("x-portal-auth-environment-id") == "env-test", sourceLocation: sourceLocation)
                #expect(!(request.header("Authorization") ?? "").contains("session-"), sourceLocation: sourceLocation)
            }
        }

        func exchange(_ url: String) throws -> GrantOutcome {
            guard case .exchange(let grant, let endpoint) = RedirectURL.evaluate(url, configured: redirectURL) else {
                throw ClientAuthError.invalidGrantResponse
            }
            return try client.exchange(grant: grant, at: endpoint)
        }
    }

    static func thrown<T>(_ body: () throws -> T) -> ClientAuthError? {
        do { _ = try body(); return nil } catch let error as ClientAuthError { return error } catch { return nil }
    }

    @Test("methods lists what the environment allows, unknown methods dropped")
    func methods() throws {
        let fixture = try Fixture {
            $0.allowedMethods = ["EMAIL_MAGIC_LINK", "PASSKEY", "GOOGLE"]; $0.autoCreateWallet = true
        }
        defer { fixture.server.stop() }
        #expect(
            try fixture.client.methods() == AuthMethods(allowed: [.emailMagicLink, .google], autoCreateWallet: true))
        fixture.expectClean()
    }

    @Test("a magic link completes through the loopback listener, with a test as the browser")
    func magicLinkLoopback() throws {
        let port = freeLoopbackPort()
        let redirectURL = "http://127.0.0.1:\(port)/callback"
        let fixture = try Fixture(redirectURL: redirectURL)
        defer { fixture.server.stop() }
        // Listen first, so a busy port is reported before any email is sent.
        let listener = try LoopbackRedirectListener(
            redirect: try #require(LoopbackRedirect(redirectURL: redirectURL)),
            configuredRedirectURL: redirectURL,
            options: .init(timeoutMilliseconds: 20_000, handlesInterrupts: false))
        try fixture.client.sendMagicLink(email: "  User@Example.COM \n")
        let sent = try #require(fixture.fake.sentLinks.first)
        #expect(sent.email == "user@example.com")
        #expect(sent.link.hasPrefix(redirectURL + "?token=grant-"))
        let browser = DispatchQueue.global()
        let page = Locked<SimulatedBrowser.Page?>(nil)
        let clicked = DispatchSemaphore(value: 0)
        browser.async {
            // The user clicks the link after a stray request for the page's icon.
            _ = try? SimulatedBrowser.get("http://127.0.0.1:\(port)/favicon.ico")
            let answer = try? SimulatedBrowser.get(sent.link)
            page.update { $0 = answer }
            clicked.signal()
        }
        let session = try listener.wait { url -> RedirectDecision<AuthenticatedSession?> in
            switch RedirectURL.evaluate(url.text, configured: redirectURL) {
            case .exchange(let grant, let endpoint):
                guard case .authenticated(let session)? = try? fixture.client.exchange(grant: grant, at: endpoint)
                else {
                    return .finish(nil, page: .failed("The sign-in was refused."))
                }
                return .finish(session, page: .signedIn)
            default:
                return .keepWaiting(page: .failed("This was not a sign-in redirect."))
            }
        }
        clicked.wait()
        #expect(session?.endUserID == "end-user-1")
        #expect(session?.token.text.hasPrefix("session-") == true)
        #expect(page.value?.status == 200)
        #expect(page.value?.body.contains(sent.grant) == false)
        fixture.expectClean()
    }

    @Test(
        "OAuth completes through a simulated browser following the provider's redirect",
        arguments: [AuthMethod.google, .apple])
    func oauth(method: AuthMethod) throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        let authorizeURL = try fixture.client.authorizeURL(for: method)
        let location = try SimulatedBrowser.followProvider(authorizeURL.text)
        #expect(location.hasPrefix(fixture.redirectURL + "?token=grant-"))
        #expect(location.hasSuffix("&login_type=\(method.rawValue)"))
        guard case .authenticated(let session) = try fixture.exchange(location) else {
            Issue.record("expected a session")
            return
        }
        #expect(session.endUserID == "end-user-1")
        // The state is single-use: the same authorize URL does not work twice.
        #expect(throws: (any Error).self) { try SimulatedBrowser.followProvider(authorizeURL.text) }
        fixture.expectClean()
    }

    @Test(
        "the redirectUrl query reaches Portal encoded byte for byte, with isAccountAbstracted only when set",
        arguments: [Bool?.none, true, false])
    func encoding(accountAbstracted: Bool?) throws {
        let fixture = try Fixture(
            redirectURL: "https://app.example.com/auth/callback?x=1&y=a b~", accountAbstracted: accountAbstracted)
        defer { fixture.server.stop() }
        _ = try fixture.client.authorizeURL(for: .google)
        let query = try #require(fixture.server.requests.last?.query)
        var expected = "redirectUrl=https%3A%2F%2Fapp.example.com%2Fauth%2Fcallback%3Fx%3D1%26y%3Da%20b%7E"
        if let accountAbstracted { expected += "&isAccountAbstracted=\(accountAbstracted)" }
        #expect(query == expected)
        fixture.expectClean()
    }

    @Test("the fake refuses a redirectUrl encoded any other way")
    func strictEncoding() throws {
        let fixture = try Fixture(redirectURL: "myapp://auth/callback")
        defer { fixture.server.stop() }
        let base = try PortalAPIBase(apiHost: "127.0.0.1:\(fixture.server.port)")
        let builder = PortalRequestBuilder(gate: PortalHostGate(apiBase: base), version: "1.0.0")
        let request = builder.request(
            "GET", base.url(path: ClientAuthEndpoint.oauthURLs.path) + "?redirectUrl=myapp://auth/callback",
            extraHeaders: [HTTPHeader("x-portal-auth-environment-id", "env-test")])
        #expect(try CurlTransport(options: HTTPTransportOptions()).send(request).status == 401)
        #expect(fixture.server.violations.map(\.rule) == ["redirectUrl is not form-encoded as docs/portal-api.md says"])
    }

    @Test("the fake refuses a bearer on an auth call other than two-factor")
    func strictBearer() throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        let base = try PortalAPIBase(apiHost: "127.0.0.1:\(fixture.server.port)")
        let builder = PortalRequestBuilder(gate: PortalHostGate(apiBase: base), version: "1.0.0")
        let request = builder.request(
            "GET", base.url(path: ClientAuthEndpoint.methods.path), bearer: Secret("session-token"),
            extraHeaders: [HTTPHeader("x-portal-auth-environment-id", "env-test")])
        #expect(try CurlTransport(options: HTTPTransportOptions()).send(request).status == 400)
        #expect(fixture.server.violations.map(\.rule) == ["Authorization must not be sent here"])
    }

    @Test("a grant works once: the second exchange is refused as spent (exit 6)")
    func spentGrant() throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        let url = FakeClientAuth.redirect(
            fixture.redirectURL, grant: fixture.fake.issueGrant(method: .emailMagicLink), method: .emailMagicLink)
        _ = try fixture.exchange(url)
        let error = Self.thrown { try fixture.exchange(url) }
        #expect(error == .clientError(.magicLinkValidations, status: 400, serverMessage: "token already used"))
        #expect(error?.exitCode == .rejected)
        #expect(fixture.fake.acceptedExchanges == 1)
        fixture.expectClean()
    }

    @Test("a grant Portal never issued is unauthorized, and so is one taken to the other endpoint")
    func unknownGrant() throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        #expect(
            Self.thrown { try fixture.client.exchange(grant: Secret("made-up"), at: .oauthTokens) }
                == .unauthorized(.oauthTokens))
        let grant = fixture.fake.issueGrant(method: .google)
        #expect(
            Self.thrown { try fixture.client.exchange(grant: Secret(grant), at: .magicLinkValidations) }
                == .unauthorized(.magicLinkValidations))
        fixture.expectClean()
    }

    @Test("two-factor: enrollment link, a wrong code that keeps the userJwt, then the right code")
    func totp() throws {
        let fixture = try Fixture {
            $0.endUser = FakeClientAuth.EndUser(id: "totp-user", totpCode: "123456", enrolling: true)
        }
        defer { fixture.server.stop() }
        let url = FakeClientAuth.redirect(
            fixture.redirectURL, grant: fixture.fake.issueGrant(method: .apple), method: .apple)
        guard case .totpRequired(let step) = try fixture.exchange(url) else {
            Issue.record("expected a two-factor step")
            return
        }
        #expect(step.endUserID == "totp-user")
        #expect(TOTPEnrollment.secret(in: step.totpLink) == Secret(FakeClientAuth.enrollmentSecret))
        let wrong = Self.thrown { try fixture.client.verifyTOTP(code: "000000", userJWT: step.userJWT) }
        #expect(wrong == .clientError(.totpValidations, status: 400, serverMessage: "invalid code"))
        #expect(wrong?.isRejectedCode == true)
        #expect(
            Self.thrown { try fixture.client.verifyTOTP(code: "12345", userJWT: step.userJWT) }
                == .invalidArgument(.totpCode))
        let session = try fixture.client.verifyTOTP(code: "123456", userJWT: step.userJWT)
        #expect(session.endUserID == "totp-user")
        #expect(session.token.text.hasPrefix("session-"))
        // The userJwt is retired once a code is accepted.
        #expect(
            Self.thrown { try fixture.client.verifyTOTP(code: "123456", userJWT: step.userJWT) }
                == .unauthorized(.totpValidations))
        fixture.expectClean()
    }

    @Test("a second sign-in of an enrolled user has no totpLink")
    func enrolled() throws {
        let fixture = try Fixture { $0.endUser = FakeClientAuth.EndUser(id: "u", totpCode: "123456") }
        defer { fixture.server.stop() }
        let url = FakeClientAuth.redirect(
            fixture.redirectURL, grant: fixture.fake.issueGrant(method: .google), method: .google)
        guard case .totpRequired(let step) = try fixture.exchange(url) else {
            Issue.record("expected a two-factor step"); return
        }
        #expect(step.totpLink == nil)
    }

    @Test("magic-link refusals map to the SDK's distinctions")
    func magicLinkRefusals() throws {
        let limited = try Fixture { $0.magicLinkBehaviour = .rateLimited }
        defer { limited.server.stop() }
        #expect(Self.thrown { try limited.client.sendMagicLink(email: "a@b.c") } == .rateLimited)
        #expect(limited.server.requests.count == 1)

        let refused = try Fixture { $0.redirectURLs = ["portalexample://other"] }
        defer { refused.server.stop() }
        let error = Self.thrown { try refused.client.sendMagicLink(email: "a@b.c") }
        #expect(error == .unauthorized(.magicLinks))
        #expect(error?.exitCode == .usage)

        let noAA = try Fixture(accountAbstracted: true) { $0.accountAbstractionAvailable = false }
        defer { noAA.server.stop() }
        #expect(
            Self.thrown { try noAA.client.sendMagicLink(email: "a@b.c") }
                == .accountAbstractionUnavailable("Account abstraction is not enabled for this environment"))
        #expect(
            Self.thrown { try noAA.client.authorizeURL(for: .google) }
                == .accountAbstractionUnavailable("Account abstraction is not enabled for this environment"))
    }

    @Test("a provider that is not set up is an unavailable method")
    func providerMissing() throws {
        let fixture = try Fixture { $0.providers = [.google] }
        defer { fixture.server.stop() }
        #expect(Self.thrown { try fixture.client.authorizeURL(for: .apple) } == .methodUnavailable(.apple))
    }

    @Test("a provider failure comes back as an error parameter, which fails the sign-in without a request")
    func providerError() throws {
        let fixture = try Fixture { $0.providerError = "oauth_failed" }
        defer { fixture.server.stop() }
        let location = try SimulatedBrowser.followProvider(try fixture.client.authorizeURL(for: .google).text)
        #expect(
            RedirectURL.evaluate(location, configured: fixture.redirectURL)
                == .authenticationFailed(message: "oauth_failed"))
    }

    @Test("another auth environment is unauthorized, a configuration problem")
    func wrongEnvironment() throws {
        let fixture = try Fixture(environment: "env-other")
        defer { fixture.server.stop() }
        let error = Self.thrown { try fixture.client.methods() }
        #expect(error == .unauthorized(.methods))
        #expect(error?.exitCode == .usage)
    }

}
