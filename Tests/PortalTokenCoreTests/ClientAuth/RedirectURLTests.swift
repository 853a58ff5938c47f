import PortalTokenCore
import Testing

/// docs/portal-api.md, "Form encoding": `redirectUrl` in `GET /oauth/urls`.
@Suite("redirectUrl form encoding")
struct FormURLEncodingTests {
    @Test(
        "each input encodes to the bytes docs/portal-api.md gives",
        arguments: [
            ("AZaz09-_.*", "AZaz09-_.*"),
            ("myapp://auth/callback", "myapp%3A%2F%2Fauth%2Fcallback"),
            ("portalexample://auth/callback", "portalexample%3A%2F%2Fauth%2Fcallback"),
            ("a b+c", "a%20b%2Bc"),
            ("~", "%7E"),
            ("é", "%C3%A9"),
            ("😀", "%F0%9F%98%80"),
            ("?&=#%", "%3F%26%3D%23%25"),
            ("", ""),
            ("https://example.com/a b", "https%3A%2F%2Fexample.com%2Fa%20b"),
        ])
    func encodes(input: String, expected: String) {
        #expect(FormURLEncoding.encode(input) == expected)
    }

    @Test("a space is %20 and never a plus")
    func noPlus() {
        let query = FormURLEncoding.oauthURLsQuery(redirectURL: "https://example.com/a b", accountAbstracted: nil)
        #expect(query.hasSuffix("https%3A%2F%2Fexample.com%2Fa%20b"))
        #expect(!query.contains("+"))
    }

    @Test("a redirect URL with its own query is encoded whole, so the request URL has one question mark")
    func ownQuery() {
        let query = FormURLEncoding.oauthURLsQuery(
            redirectURL: "https://example.com/cb?x=1&y=2", accountAbstracted: nil)
        #expect(query.contains("%3Fx%3D1%26y%3D2"))
        #expect(!query.contains("?"))
    }

    @Test(
        "isAccountAbstracted follows redirectUrl only when configured",
        arguments: [
            (Bool?.none, "redirectUrl=myapp%3A%2F%2Fauth%2Fcallback"),
            (Bool?.some(true), "redirectUrl=myapp%3A%2F%2Fauth%2Fcallback&isAccountAbstracted=true"),
            (Bool?.some(false), "redirectUrl=myapp%3A%2F%2Fauth%2Fcallback&isAccountAbstracted=false"),
        ])
    func accountAbstraction(setting: Bool?, expected: String) {
        #expect(
            FormURLEncoding.oauthURLsQuery(redirectURL: "myapp://auth/callback", accountAbstracted: setting) == expected
        )
    }
}

/// See docs/portal-api.md, "Matching".
@Suite("redirect target matching")
struct RedirectTargetTests {
    static let slashes = String(repeating: "/", count: 200_000)

    @Test(
        "an incoming URL matches the configured one as docs/portal-api.md says",
        arguments: [
            (
                "portalexample://auth/callback?token=grant&authMethod=EMAIL_MAGIC_LINK",
                "portalexample://auth/callback", true
            ),
            ("https://example.com/auth/callback?token=grant", "https://example.com/auth/callback", true),
            ("myapp://auth/callback/", "myapp://auth/callback", true),
            ("myapp://auth/callback", "myapp://auth/callback///", true),
            ("MyApp://AUTH/callback", "myapp://auth/callback", true),
            ("myapp://auth/Callback", "myapp://auth/callback", false),
            ("myapp://auth/callback#state=xyz", "myapp://auth/callback", true),
            ("myapp://auth/callback?token=t#x", "myapp://auth/callback", true),
            ("myapp://other/callback", "myapp://auth/callback", false),
            ("myapp://auth/other", "myapp://auth/callback", false),
            ("otherapp://auth/callback", "myapp://auth/callback", false),
            ("http://app.test/auth/callback", "https://app.test/auth/callback", false),
            ("https://app.test:8443/auth/callback", "https://app.test/auth/callback", false),
            ("https://app.test/auth", "https://app.test/auth/callback", false),
            ("https://app.test/auth/callback/extra", "https://app.test/auth/callback", false),
            ("myapp://evil@auth/callback", "myapp://auth/callback", false),
            ("myapp://auth/callb%61ck", "myapp://auth/callback", false),
            ("myapp:auth?token=grant", "myapp:auth", true),
            ("myapp:other", "myapp:auth", false),
            ("myapp://?token=abc", "myapp://", true),
            ("myapp://auth?token=abc", "myapp://auth", true),
            ("HTTPS://App.Example.com/auth/callback/?token=abc#done", "https://app.example.com/auth/callback", true),
            ("////////", "", true),
            ("/", "//", true),
            ("not a url", "portalexample://auth/callback", false),
            ("portalexample://auth/callback", "not a url", false),
            ("", "portalexample://auth/callback", false),
            ("portalexample://auth/callback", "", false),
            ("  myapp://auth/callback\n", "myapp://auth/callback", true),
        ])
    func matches(incoming: String, configured: String, expected: Bool) {
        #expect(RedirectURL.matches(incoming, configured: configured) == expected)
    }

    @Test("200 000 trailing slashes are stripped in linear time")
    func manySlashes() {
        let clock = ContinuousClock()
        let elapsed = clock.measure {
            #expect(RedirectURL.matches("myapp://auth/callback" + Self.slashes, configured: "myapp://auth/callback"))
            #expect(
                !RedirectURL.matches("myapp://auth/callback" + Self.slashes + "x", configured: "myapp://auth/callback"))
        }
        #expect(elapsed < .seconds(2))
    }

    @Test("a path is compared byte for byte, not by Unicode equivalence")
    func byteExact() {
        #expect(!RedirectURL.matches("myapp://auth/caf\u{E9}", configured: "myapp://auth/cafe\u{301}"))
    }

    @Test(
        "normalising a target keeps the path and lowercases the rest",
        arguments: [
            ("a://b/c?x=1#f", "a://b/c"),
            ("a://b/c#f?x=1", "a://b/c"),
            ("MyApp://AUTH/CallBack", "myapp://auth/CallBack"),
            ("MyApp:Auth", "myapp:auth"),
            ("MyApp://AUTH", "myapp://auth"),
        ])
    func normalizes(input: String, expected: String) {
        #expect(RedirectURL.normalizeTarget(input) == expected)
    }

    @Test("every trailing slash is stripped", arguments: [("abc///", "abc"), ("", ""), ("///", ""), ("abc", "abc")])
    func stripsSlashes(input: String, expected: String) {
        #expect(RedirectURL.stripTrailingSlashes(input) == expected)
    }
}

/// See docs/portal-api.md, "The query".
@Suite("redirect query parsing")
struct RedirectQueryTests {
    @Test(
        "each URL yields the parameters docs/portal-api.md gives",
        arguments: [
            ("myapp://auth/callback", [String: String]()),
            ("myapp://x?", [:]),
            ("?token=grant&authMethod=EMAIL_MAGIC_LINK", ["token": "grant", "authMethod": "EMAIL_MAGIC_LINK"]),
            ("myapp://auth/callback#recovery?token=grant", [:]),
            ("?token=grant#extra=ignored", ["token": "grant"]),
            (
                "?email=user%40example.com&name=Ada+L&tok=a%2Bb&empty=",
                ["email": "user@example.com", "name": "Ada L", "tok": "a+b", "empty": ""]
            ),
            ("?n=%C3%A9", ["n": "é"]),
            ("?token=%E0%A4%A", ["token": "%E0%A4%A"]),
            ("?token=%E0%A4%A+x", ["token": "%E0%A4%A+x"]),
            ("?token", ["token": ""]),
            ("?token=configured&token=live-grant", ["token": "live-grant"]),
            ("?token=a&token=", ["token": ""]),
            ("?&token=grant&&", ["token": "grant"]),
            ("?=value&token=g", ["token": "g"]),
            ("?tok%65n=grant", ["token": "grant"]),
            ("?token=a=b", ["token": "a=b"]),
            ("?a=1?b=2", ["a": "1?b=2"]),
            (
                "https://app.test/callback?env=prod&token=grant&login_type=APPLE",
                ["env": "prod", "token": "grant", "login_type": "APPLE"]
            ),
        ])
    func parses(url: String, expected: [String: String]) {
        #expect(RedirectURL.queryParameters(url) == expected)
    }

    @Test("200 000 empty pieces and 200 000 escapes parse in linear time")
    func large() {
        let clock = ContinuousClock()
        let elapsed = clock.measure {
            #expect(
                RedirectURL.queryParameters("myapp://x?" + String(repeating: "&", count: 200_000) + "token=g") == [
                    "token": "g"
                ])
            let escaped = RedirectURL.queryParameters("?token=" + String(repeating: "%41", count: 200_000))
            #expect(escaped == ["token": String(repeating: "A", count: 200_000)])
        }
        #expect(elapsed < .seconds(2))
    }

    @Test(
        "one component decodes, or stays raw on a bad escape",
        arguments: [
            ("a%20b", "a b"), ("a+b", "a b"), ("", ""), ("%zz", "%zz"), ("%", "%"), ("100%", "100%"),
            ("%E0%A4%A", "%E0%A4%A"), ("%zz+x", "%zz+x"), ("%ff", "%ff"),
        ])
    func decodes(input: String, expected: String) {
        #expect(RedirectURL.decodeComponent(input) == expected)
    }
}

/// docs/portal-api.md, "Redirect URLs" and the redirect-level vectors (docs/portal-api.md, "Matching", "The query").
@Suite("redirect evaluation")
struct RedirectEvaluationTests {
    static let configured = "portalexample://auth/callback"
    static let magicLink = configured + "?token=grant-token&authMethod=EMAIL_MAGIC_LINK"

    static func evaluate(_ url: String) -> RedirectURL.Evaluation {
        RedirectURL.evaluate(url, configured: configured)
    }

    @Test("8192 UTF-16 units are accepted and 8193 are not, measured before trimming")
    func lengthLimit() {
        let base = Self.configured + "?authMethod=EMAIL_MAGIC_LINK&token="
        let exact = base + String(repeating: "g", count: 8192 - base.utf16.count)
        #expect(exact.utf16.count == 8192)
        #expect(
            Self.evaluate(exact)
                == .exchange(
                    grant: Secret(String(repeating: "g", count: 8192 - base.utf16.count)),
                    endpoint: .magicLinkValidations))
        #expect(Self.evaluate(exact + "g") == .notOurs(.emptyOrTooLong))
        #expect(
            Self.evaluate(exact.dropLast() + "\n")
                == .exchange(
                    grant: Secret(String(repeating: "g", count: 8191 - base.utf16.count)),
                    endpoint: .magicLinkValidations))
        #expect(Self.evaluate(exact + "\n") == .notOurs(.emptyOrTooLong))
    }

    @Test("the limit counts UTF-16 units, not Characters")
    func utf16Units() {
        let emoji = Self.magicLink + "&x=" + String(repeating: "😀", count: 4100)
        #expect(emoji.count < 8192)
        #expect(Self.evaluate(emoji) == .notOurs(.emptyOrTooLong))
    }

    static let vectors: [(String, RedirectURL.Evaluation)] = [
        (
            "PortalExample://auth/callback/?token=grant-token&authMethod=EMAIL_MAGIC_LINK",
            .exchange(grant: Secret("grant-token"), endpoint: .magicLinkValidations)
        ),
        (magicLink + "#state=xyz", .exchange(grant: Secret("grant-token"), endpoint: .magicLinkValidations)),
        (configured + "#?token=grant&authMethod=EMAIL_MAGIC_LINK", .notOurs(.noGrant)),
        ("  " + magicLink + "\n", .exchange(grant: Secret("grant-token"), endpoint: .magicLinkValidations)),
        ("   \n", .notOurs(.otherTarget)),
        ("", .notOurs(.emptyOrTooLong)),
        ("otherapp://auth/callback?error=oauth_failed", .notOurs(.otherTarget)),
        (
            configured + "?source=email&token=grant%2Btoken&authMethod=EMAIL_MAGIC_LINK",
            .exchange(grant: Secret("grant+token"), endpoint: .magicLinkValidations)
        ),
        (
            configured + "?token=configured&authMethod=EMAIL_MAGIC_LINK&token=live-grant",
            .exchange(grant: Secret("live-grant"), endpoint: .magicLinkValidations)
        ),
        (
            configured + "?token=stale&token=real-grant&login_type=GOOGLE",
            .exchange(grant: Secret("real-grant"), endpoint: .oauthTokens)
        ),
        (configured + "?token=g&login_type=APPLE", .exchange(grant: Secret("g"), endpoint: .oauthTokens)),
        (
            configured + "?token=g&login_type=GOOGLE&authMethod=EMAIL_MAGIC_LINK",
            .exchange(grant: Secret("g"), endpoint: .magicLinkValidations)
        ),
        (configured + "?token=", .notOurs(.noGrant)),
        (configured + "?token", .notOurs(.noGrant)),
        (configured + "?authMethod=EMAIL_MAGIC_LINK", .notOurs(.noGrant)),
        (configured + "?token=g&login_type=google", .notOurs(.noMethodMarker)),
        (configured + "?token=g&authMethod=email_magic_link", .notOurs(.noMethodMarker)),
        (configured + "?token=g&authMethod=GOOGLE", .notOurs(.noMethodMarker)),
        (configured + "?token=g&login_type=FACEBOOK", .notOurs(.noMethodMarker)),
        (configured + "?token=g", .notOurs(.noMethodMarker)),
    ]

    @Test("redirect-level vectors", arguments: vectors)
    func evaluates(url: String, expected: RedirectURL.Evaluation) {
        #expect(Self.evaluate(url) == expected)
    }

    static let errorVectors: [(String, String)] = [
        ("?error=" + String(repeating: "x", count: 500), String(repeating: "x", count: 100)),
        ("?error=" + String(repeating: "x", count: 100), String(repeating: "x", count: 100)),
        ("?error=" + String(repeating: "%C3%A9", count: 200), String(repeating: "é", count: 100)),
        ("?error=oauth%5Ffailed+now", "oauth_failed now"),
        ("?error=oauth_failed", "oauth_failed"),
        ("?error=&token=grant-token&authMethod=EMAIL_MAGIC_LINK", ""),
        ("?token=grant-token&authMethod=EMAIL_MAGIC_LINK&error=denied", "denied"),
    ]

    @Test("an error parameter is decoded, cut to 100 Characters, and wins over a token", arguments: errorVectors)
    func errorParameter(query: String, expected: String) {
        #expect(Self.evaluate(Self.configured + query) == .authenticationFailed(message: expected))
    }

    @Test("a failure's message shows the error text on one line, without control characters")
    func errorMessage() {
        guard case .authenticationFailed(let text) = Self.evaluate(Self.configured + "?error=bad%1B%5B31m%0Anews")
        else {
            Issue.record("expected authenticationFailed")
            return
        }
        let message = ClientAuthError.authenticationFailed(text).message
        #expect(!message.contains("\u{1B}"))
        #expect(!message.contains("\n"))
        #expect(message.hasPrefix("sign-in failed: bad"))
    }
}

/// docs/portal-api.md, "Loopback redirect URLs" and (docs/portal-api.md, "Loopback redirect URLs") (loopback redirect
/// URLs).
@Suite("redirect schemes")
struct RedirectSchemeTests {
    @Test(
        "the custom scheme a desktop handler registers",
        arguments: [
            ("portalexample://auth/callback", "portalexample"),
            ("PortalExample://auth/callback", "portalexample"),
            ("com.example.app://cb", "com.example.app"),
            ("app+v2://x", "app+v2"),
            ("my-app://x", "my-app"),
            ("app2://x", "app2"),
            ("myapp:auth", "myapp"),
            ("myapp://", "myapp"),
            ("  myapp://x\n", "myapp"),
        ])
    func scheme(url: String, expected: String) {
        #expect(RedirectURL.customScheme(url) == expected)
    }

    @Test(
        "no custom scheme for http, https or anything malformed",
        arguments: [
            "https://x", "http://x", "HTTPS://x", "noscheme/path", "", "   ", "2app://x", ":foo", "my app://x",
            "my/app://x",
        ])
    func noScheme(url: String) {
        #expect(RedirectURL.customScheme(url) == nil)
    }

    @Test(
        "loopback redirect URLs name the address and port to listen on",
        arguments: [
            ("http://127.0.0.1:8765/callback", "127.0.0.1", UInt16(8765), "http://127.0.0.1:8765"),
            ("http://localhost:3000/auth/callback?x=1", "localhost", 3000, "http://localhost:3000"),
            ("HTTP://LocalHost:3000/cb", "localhost", 3000, "HTTP://LocalHost:3000"),
            (" http://127.0.0.1:9/ \n", "127.0.0.1", 9, "http://127.0.0.1:9"),
            ("http://127.0.0.1/cb", "127.0.0.1", 80, "http://127.0.0.1"),
            ("http://localhost:1", "localhost", 1, "http://localhost:1"),
        ])
    func loopback(url: String, host: String, port: UInt16, base: String) throws {
        let target = try #require(LoopbackRedirect(redirectURL: url))
        #expect(target.host == host)
        #expect(target.port == port)
        #expect(target.base == base)
    }

    @Test(
        "anything else is completed by the desktop handler",
        arguments: [
            "https://127.0.0.1:8765/cb", "http://127.0.0.2:8765/cb", "http://localhost.example:80/cb",
            "http://[::1]:8765/cb",
            "http://user@localhost:8765/cb", "http://localhost:0/cb", "http://localhost:65536/cb",
            "http://localhost:/cb",
            "http://localhost:12a/cb", "myapp://auth/callback", "", "http://",
        ])
    func notLoopback(url: String) {
        #expect(LoopbackRedirect(redirectURL: url) == nil)
    }
}
