import PortalTokenCore
import PortalTokenTestSupport
import Testing

private func parse(_ text: String) throws -> CredentialRequest {
    try CredentialProtocol.parse(Array(text.utf8))
}

/// One `url=` value and the attributes git's credential_from_url makes of it (nil: unset).
struct URLCase: Sendable, CustomTestStringConvertible {
    var url: String
    var protocolName: String
    var host: String
    var path: String?
    var username: String? = nil
    var password: String? = nil
    var testDescription: String { url }
}

@Suite("url attribute, split as git's credential_from_url")
struct GitURLSplitTests {
    /// Every url= case of git's t0300-credentials.sh, then the branches of credential.c that
    /// t0300 reaches only through them (user:password@, trailing slashes, %00, a bad escape).
    static let cases: [URLCase] = [
        // t0300 'match percent-encoded values': decoded once, not twice.
        URLCase(url: "https://example.com/%2566.git", protocolName: "https", host: "example.com", path: "%66.git"),
        // t0300 'match percent-encoded UTF-8 values in path'
        URLCase(
            url: """
                https://example.com/per%C3%BA.git
                """, protocolName: "https", host: "example.com", path: "perú.git"),
        // t0300 'match percent-encoded values in username'
        URLCase(
            url: "https://user%2fname@example.com/foo/bar.git", protocolName: "https", host: "example.com",
            path: "foo/bar.git", username: "user/name"),
        // t0300 'fetch with multiple path components'
        URLCase(
            url: "https://example.com/foo/repo.git", protocolName: "https", host: "example.com", path: "foo/repo.git"),
        // t0300 'honors username from URL over helper (URL)'
        URLCase(
            url: "https://alice@example.com", protocolName: "https", host: "example.com", path: nil, username: "alice"),
        // t0300 'last matching username wins'
        URLCase(url: "https://example.com/path.git", protocolName: "https", host: "example.com", path: "path.git"),
        // t0300 'host-less URLs are parsed as empty host'
        URLCase(url: "cert:///path/to/cert.pem", protocolName: "cert", host: "", path: "path/to/cert.pem"),
        // t0300 'url parser handles bare query marker'
        URLCase(url: "https://example.com?foo.git", protocolName: "https", host: "example.com", path: "?foo.git"),
        // t0300 'url parser handles bare fragment marker'
        URLCase(url: "https://example.com#foo.git", protocolName: "https", host: "example.com", path: "#foo.git"),
        // t0300 'url parser not confused by encoded markers'
        URLCase(
            url: """
                https://example.com%23%3f%2f/foo.git
                """, protocolName: "https", host: "example.com#?/", path: "foo.git"),
        // t0300 'credential config with partial URLs': its request
        URLCase(
            url: "https://user@example.com/repo.git", protocolName: "https", host: "example.com", path: "repo.git",
            username: "user"),
        URLCase(
            url: "https://user@example.com/org/repo.git", protocolName: "https", host: "example.com",
            path: "org/repo.git", username: "user"),
        // credential.c: user:password@ (case 3), split at the first colon, both decoded
        URLCase(
            url: "https://bob:p%40ss:word@git.example:8080/team/repo.git", protocolName: "https",
            host: "git.example:8080", path: "team/repo.git", username: "bob", password: "p@ss:word"),
        // credential.c: an empty user is still set
        URLCase(url: "https://@example.com/", protocolName: "https", host: "example.com", path: nil, username: ""),
        // credential.c: an @ after the host's end belongs to the path (case 1)
        URLCase(url: "https://example.com/a@b", protocolName: "https", host: "example.com", path: "a@b"),
        URLCase(url: "https://example.com?x=a@b", protocolName: "https", host: "example.com", path: "?x=a@b"),
        // credential.c: the query stays in the path, never in the host
        URLCase(
            url: "https://example.com/repo.git?ref=main", protocolName: "https", host: "example.com",
            path: "repo.git?ref=main"),
        // credential.c: leading and trailing slashes trimmed; inner ones kept
        URLCase(
            url: "https://example.com//org//repo.git//", protocolName: "https", host: "example.com",
            path: "org//repo.git"),
        URLCase(url: "https://example.com/", protocolName: "https", host: "example.com", path: nil),
        URLCase(url: "https://example.com///", protocolName: "https", host: "example.com", path: nil),
        URLCase(url: "https://example.com", protocolName: "https", host: "example.com", path: nil),
        // credential.c: trailing slashes are trimmed after decoding, so an encoded one goes too
        URLCase(url: "https://example.com/repo%2f", protocolName: "https", host: "example.com", path: "repo"),
        // url_decode: %00 and a malformed escape stay as they are
        URLCase(url: "https://example.com/a%00b%zz%4", protocolName: "https", host: "example.com", path: "a%00b%zz%4"),
        // credential.c: the protocol is the text before the first ://, not decoded
        URLCase(url: "git+ssh://example.com/x", protocolName: "git+ssh", host: "example.com", path: "x"),
        URLCase(url: "https://example.com/x://y", protocolName: "https", host: "example.com", path: "x://y"),
    ]

    @Test("splits each url as git does", arguments: cases)
    func splits(_ expected: URLCase) throws {
        // Earlier attributes are replaced by the URL's parts, or unset when it has none.
        let request = try parse("path=earlier\nusername=earlier\npassword=earlier\nurl=\(expected.url)\n")
        #expect(request.protocolName == expected.protocolName)
        #expect(request.host?.gitHost == expected.host)
        #expect(request.path == expected.path)
        #expect(request.username == expected.username)
        #expect(request.password?.text == expected.password)
    }

    /// t0300 'url parser rejects embedded newlines' and 'rejects embedded carriage returns'
    /// (git 2.48.1+), the "url has no scheme" warning of
    /// credential.c, git's credential.protectProtocol for a decoded CR, and (portal-token's
    /// own rule) a part that is not UTF-8 once decoded.
    @Test(
        "refuses what git refuses, and what cannot be text",
        arguments: [
            "https://one.example.com?%0ahost=two.example.com/",
            "https://one.example.com%0a/",
            "https://us%0Aer@example.com/",
            "https://example.com%0d/",
            "https://example%0d.com/",
            "example.com/repo.git",
            "://example.com/",
            "/repo.git",
            "https://example.com/%ff",
        ])
    func refuses(url: String) throws {
        #expect(throws: CredentialProtocolError.invalidURL(line: 2)) { try parse("protocol=https\nurl=\(url)\n") }
        #expect(!CredentialProtocolError.invalidURL(line: 2).message.contains("example"))
    }
}

@Suite("credential protocol: git 2.46+ reading")
struct GitProtocolReading246Tests {
    @Test("drops the CR of CRLF line endings, as git's strbuf_getline does")
    func readsCRLF() throws {
        let request = try parse(
            "protocol=https\r\nhost=example.com\r\nusername=alice\r\npassword=pw\r\n\r\nhost=ignored\r\n")
        #expect(request.protocolName == "https")
        #expect(request.host?.server == "example.com")
        #expect(request.username == "alice")
        #expect(request.password == Secret("pw"))
    }

    @Test("a lone CRLF line ends the request like a blank line")
    func crlfBlankLine() throws {
        #expect(try parse("\r\n").hasAttributes == false)
        #expect(try parse("protocol=https\r\n\r\nhost=late\n").host == nil)
    }

    @Test("still refuses a CR inside a value, or one ending the input without a newline")
    func refusesInnerCR() throws {
        #expect(throws: CredentialProtocolError.forbiddenCharacter(line: 2, character: "CR")) {
            try parse("protocol=https\r\npassword=a\rb\r\n")
        }
        #expect(throws: CredentialProtocolError.forbiddenCharacter(line: 2, character: "CR")) {
            try parse("protocol=https\nhost=example.com\r")
        }
        #expect(throws: CredentialProtocolError.forbiddenCharacter(line: 1, character: "CR")) {
            try parse("password=pw\r\r\n")
        }
    }

    @Test("reads capabilities, authtype, credential, ephemeral and its own state only")
    func readsNewAttributes() throws {
        let request = try parse(
            """
            capability[]=authtype
            capability[]=state
            capability[]=future-thing
            protocol=https
            host=example.com
            authtype=Bearer
            credential=tok
            ephemeral=true
            state[]=osxkeychain:seen=1
            state[]=portal-token:served
            continue=1
            wwwauth[]=Bearer realm="x"

            """)
        #expect(request.advertisesAuthType && request.advertisesState)
        #expect(request.authType == "Bearer")
        #expect(request.credential == Secret("tok"))
        #expect(request.isEphemeral)
        #expect(request.state == ["served"])
    }

    @Test(
        "ephemeral is a git boolean",
        arguments: [("1", true), ("yes", true), ("On", true), ("0", false), ("false", false), ("", false)])
    func ephemeralBoolean(value: String, expected: Bool) throws {
        #expect(try parse("ephemeral=\(value)\n").isEphemeral == expected)
    }

    @Test("password_expiry_utc=0 means no expiry, as git reads it")
    func zeroExpiry() throws {
        #expect(try parse("password_expiry_utc=0\n").passwordExpiresAt == nil)
        #expect(try parse("password_expiry_utc=1700000000\n").passwordExpiresAt == 1_700_000_000)
    }

    @Test("without capability[] lines nothing is advertised")
    func noCapabilities() throws {
        let request = try parse("protocol=https\nhost=example.com\ncapability[]=Authtype\n")
        #expect(!request.advertisesAuthType && !request.advertisesState)
        #expect(request.query.includesBearerOnly == false)
    }
}

@Suite("credential protocol: git 2.46+ writing")
struct GitProtocolWriting246Tests {
    private let pair = Credential(
        protocolName: "https", host: CredentialHost(server: "example.com"), username: "",
        password: Secret(""), passwordExpiresAt: 99, authType: "Bearer", credential: Secret("tok"))

    private func text(_ answer: CredentialProtocol.Answer) throws -> String {
        String(decoding: try CredentialProtocol.format(answer), as: UTF8.self)
    }

    @Test("capability[] lines come before the values that depend on them")
    func ordersCapabilitiesFirst() throws {
        var answer = CredentialProtocol.Answer(credential: pair)
        answer.authType = true
        answer.ephemeral = true
        answer.state = ["served"]
        #expect(
            try text(answer) == """
                capability[]=authtype
                capability[]=state
                authtype=Bearer
                credential=tok
                ephemeral=1
                password_expiry_utc=99
                state[]=portal-token:served

                """)
    }

    @Test("a Portal-style answer gives the bearer pair and the username, never the password")
    func omitsPassword() throws {
        var credential = pair
        credential.username = "end-user"
        credential.password = Secret("tok")
        var answer = CredentialProtocol.Answer(credential: credential)
        answer.authType = true
        answer.ephemeral = true
        answer.omitPassword = true
        #expect(
            try text(answer)
                == """
                capability[]=authtype\nauthtype=Bearer\ncredential=tok\nephemeral=1\nusername=end-user\n\
                password_expiry_utc=99\n
                """
        )
        answer.authType = false
        #expect(try text(answer) == "username=end-user\npassword=tok\npassword_expiry_utc=99\n")
    }

    @Test(
        "never writes a capability-dependent value with a newline, CR or NUL", arguments: ["a\nb", "a\rb", "a\u{0}b"])
    func refusesBadCredential(value: String) throws {
        var credential = pair
        credential.credential = Secret(value)
        var answer = CredentialProtocol.Answer(credential: credential)
        answer.authType = true
        #expect(throws: CredentialProtocolError.unwritableValue(key: "credential")) {
            try CredentialProtocol.format(answer)
        }
        credential = pair
        credential.authType = value
        answer = CredentialProtocol.Answer(credential: credential)
        answer.authType = true
        #expect(throws: CredentialProtocolError.unwritableValue(key: "authtype")) {
            try CredentialProtocol.format(answer)
        }
    }
}

@Suite("credential helper: git 2.46+ rules for other hosts")
struct CredentialHelper246Tests {
    private let origin = "protocol=https\nhost=example.com\n"

    private func helper(_ store: InMemoryItemStore = InMemoryItemStore()) -> CredentialHelper {
        CredentialHelper(store: CredentialItems(store), now: { 1_000 })
    }

    @Test("a bearer credential round-trips with the capability and is withheld without it")
    func bearerRoundTrip() throws {
        let helper = helper()
        #expect(try helper.store(parse("capability[]=authtype\n" + origin + "authtype=Bearer\ncredential=tok\n")))
        let capable = try #require(try helper.get(parse("capability[]=authtype\n" + origin)))
        #expect(capable.authType == "Bearer" && capable.credential == Secret("tok") && capable.isBearerOnly)
        #expect(try helper.get(parse(origin)) == nil)
    }

    @Test("authtype and credential are not kept from a request that did not advertise the capability")
    func pairNeedsCapability() throws {
        let helper = helper()
        #expect(try helper.store(parse(origin + "authtype=Bearer\ncredential=tok\n")) == false)
        #expect(try helper.store(parse(origin + "username=u\npassword=pw\nauthtype=Bearer\ncredential=tok\n")))
        let stored = try #require(try helper.get(parse("capability[]=authtype\n" + origin)))
        #expect(stored.password == Secret("pw") && stored.authType == nil && stored.credential == nil)
    }

    @Test("a password credential with a pair gives the pair only to capable clients")
    func passwordAndPair() throws {
        let helper = helper()
        #expect(
            try helper.store(
                parse(
                    "capability[]=authtype\n" + origin
                        + "username=u\npassword=pw\nauthtype=Basic\ncredential=dTpwdw==\n")))
        let plain = try #require(try helper.get(parse(origin)))
        #expect(plain.password == Secret("pw") && plain.authType == nil && plain.credential == nil)
        let capable = try #require(try helper.get(parse("capability[]=authtype\n" + origin)))
        #expect(capable.authType == "Basic" && capable.credential == Secret("dTpwdw=="))
    }

    @Test("an ephemeral credential is never stored, password or bearer")
    func ephemeralNeverStored() throws {
        let store = InMemoryItemStore()
        let helper = helper(store)
        #expect(
            try helper.store(
                parse("capability[]=authtype\n" + origin + "authtype=Bearer\ncredential=tok\nephemeral=1\n")) == false)
        #expect(try helper.store(parse(origin + "username=u\npassword=pw\nephemeral=1\n")) == false)
        #expect(try CredentialItems(store).all().isEmpty)
    }

    @Test("erase with a credential removes only the item holding it")
    func eraseByCredential() throws {
        let store = InMemoryItemStore()
        let helper = helper(store)
        try helper.store(parse("capability[]=authtype\n" + origin + "authtype=Bearer\ncredential=tok\n"))
        #expect(
            try helper.erase(parse("capability[]=authtype\n" + origin + "authtype=Bearer\ncredential=other\n")) == 0)
        #expect(try helper.erase(parse("capability[]=authtype\n" + origin + "authtype=Bearer\ncredential=tok\n")) == 1)
        #expect(try CredentialItems(store).all().isEmpty)
    }

    @Test("portal-token's served state skips the store of what it just served; other state does not")
    func servedStateSkipsStore() throws {
        let store = InMemoryItemStore()
        let helper = helper(store)
        let credential = origin + "username=u\npassword=pw\n"
        try helper.store(parse(credential))
        #expect(store.writes.withLock { $0 } == 1)
        #expect(try helper.store(parse("capability[]=state\n" + credential + "state[]=portal-token:served\n")) == false)
        #expect(store.writes.withLock { $0 } == 1)
        #expect(try helper.store(parse("capability[]=state\n" + credential + "state[]=other-helper:served\n")))
        #expect(store.writes.withLock { $0 } == 2)
        // A different password under the same state is new: it is written.
        #expect(
            try helper.store(
                parse("capability[]=state\n" + origin + "username=u\npassword=new\nstate[]=portal-token:served\n")))
        #expect(store.writes.withLock { $0 } == 3)
        #expect(try helper.get(parse(origin))?.password == Secret("new"))
    }
}
