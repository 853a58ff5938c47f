import PortalTokenCore
import Testing

@Suite("trace ids")
struct TraceIDTests {
    @Test("a trace id is a lowercase version 4 UUID with the RFC variant")
    func shape() {
        for _ in 0..<1000 {
            let id = TraceID.generate()
            #expect(TraceID.isValid(id), "\(id)")
            #expect(id == id.lowercased())
            let characters = Array(id)
            #expect(characters[14] == "4")
            #expect("89ab".contains(characters[19]))
        }
    }

    @Test("trace ids never repeat")
    func unique() {
        let ids = (0..<10_000).map { _ in TraceID.generate() }
        #expect(Set(ids).count == ids.count)
    }

    @Test("version and variant bits are forced whatever the random bytes are")
    func bitsForced() {
        struct Constant: RandomNumberGenerator {
            var value: UInt64
            mutating func next() -> UInt64 { value }
        }
        var ones = Constant(value: .max)
        #expect(TraceID.generate(using: &ones) == "ffffffff-ffff-4fff-bfff-ffffffffffff")
        var zeros = Constant(value: 0)
        #expect(TraceID.generate(using: &zeros) == "00000000-0000-4000-8000-000000000000")
    }

    @Test(
        "the validator refuses uppercase, other versions, other variants and other lengths",
        arguments: [
            "", "00000000-0000-4000-8000-00000000000", "00000000-0000-4000-8000-0000000000000",
            "ABCDEF00-0000-4000-8000-000000000000", "00000000-0000-1000-8000-000000000000",
            "00000000-0000-4000-c000-000000000000", "00000000-0000-4000-7000-000000000000",
            "00000000_0000-4000-8000-000000000000", "0000000g-0000-4000-8000-000000000000",
        ])
    func refuses(text: String) {
        #expect(!TraceID.isValid(text))
    }
}

@Suite("request builder")
struct PortalRequestBuilderTests {
    static func builder(apiHost: String = "api.portalhq.io", registered: [String] = []) throws -> PortalRequestBuilder {
        PortalRequestBuilder(
            gate: PortalHostGate(
                apiBase: try PortalAPIBase(apiHost: apiHost),
                registeredHosts: PortalHostRegistry(registered)),
            version: "1.2.3")
    }

    static let token = Secret("session-token-value")

    @Test("a GET to Portal carries JSON headers, a trace id, the user agent and the bearer, and no Content-Length")
    func portalGet() throws {
        let request = try Self.builder().request("GET", "https://api.portalhq.io/api/v3/clients/me", bearer: Self.token)
        #expect(request.method == "GET")
        #expect(request.headers.value(for: "accept") == "application/json")
        #expect(request.headers.value(for: "content-type") == "application/json")
        #expect(request.headers.value(for: "User-Agent") == "portal-token/1.2.3")
        #expect(request.headers.value(for: "Content-Length") == nil)
        #expect(TraceID.isValid(try #require(request.headers.value(for: "X-Portal-Trace-Id"))))
        #expect(request.authorization == Secret("Bearer session-token-value"))
        #expect(request.body == nil)
    }

    @Test("a body brings Content-Length with its byte count")
    func bodyLength() throws {
        let body = Array(#"{"code":"é"}"#.utf8)
        let request = try Self.builder().request(
            "POST", "https://api.portalhq.io/api/v3/auth/totps/validations", body: body)
        #expect(request.headers.value(for: "Content-Length") == String(body.count))
        #expect(request.body == body)
        let empty = try Self.builder().request("POST", "https://api.portalhq.io/x", body: [])
        #expect(empty.headers.value(for: "Content-Length") == nil)
        #expect(empty.body == nil)
    }

    @Test("every request gets its own trace id")
    func freshTraceIDs() throws {
        let builder = try Self.builder()
        let ids = (0..<100).map { _ in
            builder.request("GET", "https://api.portalhq.io/x").headers.value(for: "X-Portal-Trace-Id")
        }
        #expect(Set(ids).count == 100)
    }

    @Test(
        "a URL that is not Portal's gets neither the trace id nor the bearer",
        arguments: [
            "https://api.portalhq.io.attacker.com/x", "https://api.portalhq.io@attacker.com/x",
            "https://www.googleapis.com/x",
            "https://attacker.com%2f.portalhq.io/x",
        ])
    func foreignURL(url: String) throws {
        let request = try Self.builder().request("GET", url, bearer: Self.token)
        #expect(request.headers.value(for: "X-Portal-Trace-Id") == nil)
        #expect(request.authorization == nil)
        #expect(request.headers.value(for: "Accept") == "application/json")
    }

    @Test(
        "a Portal-owned URL the bearer gate refuses gets the trace id but not the bearer",
        arguments: [
            "http://api.portalhq.io/api/v3/clients/me", "http://localhost:3001/x", "http://[::1]:3000/x",
            "https://api.custodian.example/x",
        ])
    func ownedButNotBearer(url: String) throws {
        let request = try Self.builder(registered: ["api.custodian.example"]).request("GET", url, bearer: Self.token)
        #expect(request.headers.value(for: "X-Portal-Trace-Id") != nil)
        #expect(request.authorization == nil)
    }

    @Test("a configured loopback API receives the bearer on its own port only")
    func loopbackAPI() throws {
        let builder = try Self.builder(apiHost: "127.0.0.1:3000")
        #expect(
            builder.request("GET", "http://127.0.0.1:3000/api/v3/clients/me", bearer: Self.token).authorization != nil)
        #expect(
            builder.request("GET", "http://127.0.0.1:3001/api/v3/clients/me", bearer: Self.token).authorization == nil)
        #expect(
            builder.request("GET", "http://localhost:3000/api/v3/clients/me", bearer: Self.token).authorization == nil)
    }

    @Test("no bearer, or an empty one, means no Authorization")
    func noBearer() throws {
        let builder = try Self.builder()
        #expect(builder.request("GET", "https://api.portalhq.io/x").authorization == nil)
        #expect(builder.request("GET", "https://api.portalhq.io/x", bearer: Secret("")).authorization == nil)
    }

    @Test("extra headers are added, but never ones the policy owns")
    func extraHeaders() throws {
        let request = try Self.builder().request(
            "GET", "https://api.portalhq.io/api/v3/auth/methods",
            extraHeaders: [
                HTTPHeader("x-portal-auth-environment-id", "env-1"),
                HTTPHeader("authorization", "Basic c3Rvbg=="),
                HTTPHeader("ACCEPT", "text/html"),
                HTTPHeader("X-Portal-Trace-Id", "not-a-uuid"),
            ])
        #expect(request.headers.value(for: "x-portal-auth-environment-id") == "env-1")
        #expect(request.headers.filter { $0.name.lowercased() == "accept" }.count == 1)
        #expect(request.headers.value(for: "Accept") == "application/json")
        #expect(request.headers.value(for: "authorization") == nil)
        #expect(request.authorization == nil)
        #expect(TraceID.isValid(request.headers.value(for: "X-Portal-Trace-Id") ?? ""))
    }

    @Test("a request renders as its method and host only, never the query or the token")
    func redactedRendering() throws {
        let request = try Self.builder().request(
            "GET", "https://api.portalhq.io/x?grant=secret-grant", bearer: Self.token)
        for text in [
            String(describing: request), String(reflecting: request), "\(request)",
            {
                var dumped = ""
                dump(request, to: &dumped)
                return dumped
            }(),
        ] {
            #expect(!text.contains("session-token-value"))
            #expect(!text.contains("secret-grant"))
            #expect(text.contains("api.portalhq.io"))
        }
    }

    @Test("transport errors name the host at most")
    func errorMessages() {
        let errors: [HTTPError] = [
            .connectTimedOut(host: "api.portalhq.io", milliseconds: 3000),
            .timedOut(host: "api.portalhq.io", milliseconds: 10_000),
            .cannotConnect(host: "api.portalhq.io"),
            .tlsFailure(host: "api.portalhq.io", detail: "ssl peer certificate or ssh remote key was not ok"),
            .responseTooLarge(host: "api.portalhq.io", limitBytes: 10), .unsupportedURL,
            .other(host: "api.portalhq.io", detail: "failure when receiving data from the peer"),
        ]
        for error in errors {
            #expect(!error.message.contains("/api/"))
            #expect(!error.message.contains("?"))
        }
        #expect(HTTPError.hostForMessages("https://user:pw@API.portalhq.io:8443/p?q=1") == "api.portalhq.io:8443")
        #expect(HTTPError.hostForMessages("https://API.portalhq.io./p") == "api.portalhq.io")
        #expect(HTTPError.hostForMessages("http://[::1]:3000/p") == "[::1]:3000")
        #expect(HTTPError.cannotConnect(host: "127.0.0.1:9").message == "could not connect to 127.0.0.1:9")
    }
}

@Suite("HTTP settings")
struct HTTPSettingsTests {
    @Test("the HTTP settings are known to the config file")
    func known() throws {
        #expect(Setting.all.contains(.httpConnectTimeout))
        #expect(Setting.all.contains(.httpTimeout))
        #expect(Setting.all.contains(.caBundle))
        let values = try Settings.parseConfigFile(
            "http-connect-timeout-ms = 500\nhttp-timeout-ms=2000\nca-bundle = /etc/ca.pem\n", path: "c")
        #expect(values == ["http-connect-timeout-ms": "500", "http-timeout-ms": "2000", "ca-bundle": "/etc/ca.pem"])
    }

    @Test("transport options default to 3000 ms connect, 10000 ms total and no extra CA bundle")
    func defaults() throws {
        let options = try HTTPTransportOptions(settings: Settings())
        #expect(options.connectTimeoutMilliseconds == 3000)
        #expect(options.totalTimeoutMilliseconds == 10_000)
        #expect(options.caBundlePath == nil)
    }

    @Test("transport options come from the environment before the config file")
    func fromSettings() throws {
        let settings = Settings(
            environment: ["PORTAL_TOKEN_HTTP_CONNECT_TIMEOUT_MS": "250", "PORTAL_TOKEN_CA_BUNDLE": "/tmp/ca.pem"],
            configFile: ["http-connect-timeout-ms": "900", "http-timeout-ms": "4000"])
        let options = try HTTPTransportOptions(settings: settings)
        #expect(options.connectTimeoutMilliseconds == 250)
        #expect(options.totalTimeoutMilliseconds == 4000)
        #expect(options.caBundlePath == "/tmp/ca.pem")
        #expect(throws: SettingError.self) {
            try HTTPTransportOptions(settings: Settings(environment: ["PORTAL_TOKEN_HTTP_TIMEOUT_MS": "soon"]))
        }
    }
}
