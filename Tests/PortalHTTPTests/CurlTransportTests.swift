import Foundation
@testable import PortalHTTP
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// libcurl transport against the loopback fake Portal server.
@Suite("libcurl transport")
struct CurlTransportTests {
    static let token = "live-session-token"

    /// A running server with one live token, the builder for its API host, and a transport.
    struct Fixture {
        let server: FakePortalServer
        let builder: PortalRequestBuilder
        let transport: CurlTransport
        let base: PortalAPIBase

        init(options: HTTPTransportOptions = HTTPTransportOptions()) throws {
            server = try FakePortalServer()
            server.registerLiveToken(CurlTransportTests.token, clientID: "client-42")
            base = try PortalAPIBase(apiHost: "127.0.0.1:\(server.port)")
            builder = PortalRequestBuilder(gate: PortalHostGate(apiBase: base), version: "9.9.9")
            transport = CurlTransport(options: options)
        }

        func clientsMe(bearer: String? = CurlTransportTests.token) -> HTTPRequest {
            builder.request("GET", base.url(path: "/api/v3/clients/me"), bearer: bearer.map { Secret($0) })
        }
    }

    @Test("a live token gets the client object, and the server saw exactly the headers docs/portal-api.md names")
    func liveToken() throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        let response = try fixture.transport.send(fixture.clientsMe())
        #expect(response.status == 200)
        let client = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        #expect(client?["id"] as? String == "client-42")
        #expect(client?["data"] == nil)
        #expect(response.headers.value(for: "content-type") == "application/json")
        #expect(response.effectiveURL == fixture.base.url(path: "/api/v3/clients/me"))

        #expect(fixture.server.violations.isEmpty, "\(fixture.server.violations)")
        let received = try #require(fixture.server.requests.last)
        #expect(received.method == "GET")
        #expect(received.path == "/api/v3/clients/me")
        #expect(received.query == nil)
        #expect(received.header("Accept") == "application/json")
        #expect(received.header("Content-Type") == "application/json")
        #expect(received.header("User-Agent") == "portal-token/9.9.9")
        #expect(received.header("Authorization") == "Bearer \(Self.token)")
        #expect(TraceID.isValid(received.header("X-Portal-Trace-Id") ?? ""))
        #expect(received.header("Content-Length") == nil)
        #expect(received.header("Expect") == nil)
        #expect(received.body.isEmpty)
    }

    @Test("an unknown or revoked token gets 401, returned as a response")
    func unauthorized() throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        #expect(try fixture.transport.send(fixture.clientsMe(bearer: "never-issued")).status == 401)
        #expect(try fixture.transport.send(fixture.clientsMe()).status == 200)
        fixture.server.revoke(Self.token)
        #expect(try fixture.transport.send(fixture.clientsMe()).status == 401)
        #expect(fixture.server.violations.isEmpty, "\(fixture.server.violations)")
    }

    @Test("a server error is returned as a 500 response")
    func serverError() throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        fixture.server.behaviour = .internalServerError
        #expect(try fixture.transport.send(fixture.clientsMe()).status == 500)
    }

    @Test("a server that never answers fails with a timeout within the bound")
    func stall() throws {
        let fixture = try Fixture(
            options: HTTPTransportOptions(connectTimeoutMilliseconds: 1000, totalTimeoutMilliseconds: 300))
        defer { fixture.server.stop() }
        fixture.server.behaviour = .stall
        let started = ContinuousClock.now
        // Messages name the port: which listener on loopback did not answer.
        #expect(throws: HTTPError.timedOut(host: "127.0.0.1:\(fixture.server.port)", milliseconds: 300)) {
            try fixture.transport.send(fixture.clientsMe())
        }
        let elapsed = ContinuousClock.now - started
        #expect(elapsed >= .milliseconds(250))
        #expect(elapsed < .seconds(3))
    }

    @Test("a redirect is returned, not followed")
    func redirectNotFollowed() throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        fixture.server.addRoute("GET", "/moved", bearer: .optional) { _, server in
            FakePortalServer.Response(
                status: 302, headers: [HTTPHeader("Location", "\(server.baseURL)/api/v3/clients/me")])
        }
        let url = fixture.base.url(path: "/moved")
        let response = try fixture.transport.send(fixture.builder.request("GET", url, bearer: Secret(Self.token)))
        #expect(response.status == 302)
        #expect(response.effectiveURL == url)
        #expect(response.headers.value(for: "Location")?.hasSuffix("/api/v3/clients/me") == true)
        #expect(fixture.server.requests.map(\.path) == ["/moved"])
    }

    @Test("a closed port fails as cannot connect")
    func connectionRefused() throws {
        let closed = try RefusingPort()
        let transport = CurlTransport()
        #expect(throws: HTTPError.cannotConnect(host: "127.0.0.1:\(closed.port)")) {
            try transport.send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(closed.port)/api/v3/clients/me"))
        }
    }

    @Test("a body goes out with its Content-Length and method")
    func postBody() throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        fixture.server.addRoute("POST", "/api/v3/auth/magic-links/validations", bearer: .forbidden) { request, _ in
            FakePortalServer.Response.json(200, String(decoding: request.body, as: UTF8.self))
        }
        fixture.server.addRoute("PATCH", "/thing", bearer: .required) { _, _ in .json(204, "") }
        let body = Array(#"{"token":"grant-é"}"#.utf8)
        let response = try fixture.transport.send(
            fixture.builder.request(
                "POST", fixture.base.url(path: "/api/v3/auth/magic-links/validations"), body: body))
        #expect(response.status == 200)
        #expect(response.body == body)
        let patch = try fixture.transport.send(
            fixture.builder.request(
                "PATCH", fixture.base.url(path: "/thing"), body: Array("{}".utf8), bearer: Secret(Self.token)))
        #expect(patch.status == 204)
        #expect(fixture.server.violations.isEmpty, "\(fixture.server.violations)")
        let requests = fixture.server.requests
        #expect(requests.map(\.method) == ["POST", "PATCH"])
        #expect(requests[0].header("Content-Length") == String(body.count))
        #expect(requests[0].header("Authorization") == nil)
        #expect(requests[1].body == Array("{}".utf8))
    }

    @Test("a method without a body sends no Content-Length")
    func bodylessPost() throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        fixture.server.addRoute("POST", "/api/v3/nothing", bearer: .optional) { _, _ in .json(200, "{}") }
        fixture.server.addRoute("DELETE", "/api/v3/nothing", bearer: .optional) { _, _ in .json(200, "{}") }
        for method in ["POST", "DELETE"] {
            let response = try fixture.transport.send(
                fixture.builder.request(method, fixture.base.url(path: "/api/v3/nothing")))
            #expect(response.status == 200, "\(method) \(fixture.server.requests.map { "\($0.method) \($0.path)" })")
        }
        #expect(fixture.server.violations.isEmpty, "\(fixture.server.violations)")
        #expect(fixture.server.requests.allSatisfy { $0.header("Content-Length") == nil && $0.body.isEmpty })
    }

    @Test("a response past the size bound is refused")
    func responseTooLarge() throws {
        let fixture = try Fixture(options: HTTPTransportOptions(maximumResponseBytes: 1024))
        defer { fixture.server.stop() }
        fixture.server.addRoute("GET", "/big", bearer: .optional) { _, _ in
            .json(200, "[" + String(repeating: "0,", count: 2000) + "0]")
        }
        #expect(throws: HTTPError.responseTooLarge(host: "127.0.0.1:\(fixture.server.port)", limitBytes: 1024)) {
            try fixture.transport.send(fixture.builder.request("GET", fixture.base.url(path: "/big")))
        }
    }

    @Test(
        "only http and https URLs are sent",
        arguments: [
            "ftp://127.0.0.1/x", "file:///etc/passwd", "gopher://127.0.0.1/", "not a url", "",
        ])
    func unsupportedSchemes(url: String) {
        #expect(throws: HTTPError.unsupportedURL) { try CurlTransport().send(HTTPRequest(method: "GET", url: url)) }
    }

    @Test(
        "loopback hosts, and only they, bypass any proxy",
        arguments: [
            ("localhost", true), ("api.localhost", true), ("127.0.0.1", true), ("127.1.2.3", true), ("[::1]", true),
            ("localhost.attacker.com", false), ("127.0.0.1.attacker.com", false), ("api.portalhq.io", false),
            ("10.0.2.2", false), ("127.0.0.256", false),
        ])
    func loopbackBypassesProxy(host: String, isLoopback: Bool) {
        #expect(CurlTransport.isLoopback(host: host) == isLoopback)
    }

    @Test("a header carrying a line break is refused before anything is sent")
    func headerInjection() throws {
        let fixture = try Fixture()
        defer { fixture.server.stop() }
        var request = fixture.clientsMe()
        request.headers.append(HTTPHeader("x-portal-auth-environment-id", "env\r\nX-Injected: 1"))
        #expect(throws: HTTPError.self) { try fixture.transport.send(request) }
        var badToken = fixture.clientsMe()
        badToken.authorization = Secret("Bearer a\nb")
        #expect(throws: HTTPError.self) { try fixture.transport.send(badToken) }
        #expect(fixture.server.requests.isEmpty)
    }
}

/// The fake server must be strict, or the transport tests prove nothing.
@Suite("fake Portal server")
struct FakePortalServerTests {
    @Test("a request without the headers docs/portal-api.md names is recorded as a violation and answered 400")
    func rejectsBareRequest() throws {
        let server = try FakePortalServer()
        defer { server.stop() }
        server.registerLiveToken("t")
        let response = try CurlTransport().send(
            HTTPRequest(
                method: "GET", url: server.baseURL + "/api/v3/clients/me?x=1", authorization: Secret("Bearer t")))
        #expect(response.status == 400)
        let rules = server.violations.map(\.rule)
        #expect(rules.contains("Accept is not application/json"))
        #expect(rules.contains("Content-Type is not application/json"))
        #expect(rules.contains("X-Portal-Trace-Id is missing"))
        #expect(rules.contains("User-Agent does not name portal-token"))
        #expect(server.requests.first?.query == "x=1")
    }

    @Test("a repeated trace id, a missing bearer and a bearer where none belongs are violations")
    func rejectsReuseAndWrongBearer() throws {
        let server = try FakePortalServer()
        defer { server.stop() }
        server.registerLiveToken("t")
        server.addRoute("GET", "/api/v3/auth/methods", bearer: .forbidden) { _, _ in .json(200, #"{"data":{}}"#) }
        let base = try PortalAPIBase(apiHost: "127.0.0.1:\(server.port)")
        let builder = PortalRequestBuilder(
            gate: PortalHostGate(apiBase: base), version: "1", traceID: { "00000000-0000-4000-8000-000000000000" })
        let transport = CurlTransport()
        #expect(
            try transport.send(builder.request("GET", base.url(path: "/api/v3/clients/me"), bearer: Secret("t"))).status
                == 200)
        #expect(
            try transport.send(builder.request("GET", base.url(path: "/api/v3/clients/me"), bearer: Secret("t"))).status
                == 400)
        let fresh = PortalRequestBuilder(gate: PortalHostGate(apiBase: base), version: "1")
        #expect(try transport.send(fresh.request("GET", base.url(path: "/api/v3/clients/me"))).status == 400)
        #expect(
            try transport.send(fresh.request("GET", base.url(path: "/api/v3/auth/methods"), bearer: Secret("t"))).status
                == 400)
        #expect(try transport.send(fresh.request("GET", base.url(path: "/api/v3/auth/methods"))).status == 200)
        #expect(
            server.violations.map(\.rule) == [
                "X-Portal-Trace-Id was used before",
                "Authorization: Bearer is required here",
                "Authorization must not be sent here",
            ])
    }

    @Test("a Content-Length without a body is a violation")
    func rejectsEmptyContentLength() throws {
        let server = try FakePortalServer()
        defer { server.stop() }
        server.addRoute("POST", "/x", bearer: .optional) { _, _ in .json(200, "{}") }
        let request = HTTPRequest(
            method: "POST", url: server.baseURL + "/x",
            headers: [
                HTTPHeader("Accept", "application/json"), HTTPHeader("Content-Type", "application/json"),
                HTTPHeader("User-Agent", "portal-token/1"), HTTPHeader("X-Portal-Trace-Id", TraceID.generate()),
                HTTPHeader("Content-Length", "0"),
            ])
        #expect(try CurlTransport().send(request).status == 400)
        #expect(server.violations.map(\.rule) == ["Content-Length sent without a body"])
    }
}
