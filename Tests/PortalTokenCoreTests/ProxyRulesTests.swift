import PortalTokenCore
import Testing

@Suite("the proxy's request checks and header rewriting")
struct ProxyRulesTests {
    static let credential = Secret("c0ffee-credential")
    static let loopback = ProxyRules(
        listener: .loopback(port: 8787), credential: credential, userAgent: "portal-token/test")
    static let unixSocket = ProxyRules(listener: .unixSocket, credential: nil, userAgent: "portal-token/test")

    static func request(
        _ method: String = "GET", _ target: String = "/api/v3/clients/me", host: String? = "127.0.0.1:8787",
        marker: String? = "c0ffee-credential", _ extra: [HTTPHeader] = []
    ) -> HTTPServerRequest {
        var headers: [HTTPHeader] = []
        if let host { headers.append(HTTPHeader("Host", host)) }
        if let marker { headers.append(HTTPHeader(ProxyRules.markerHeader, marker)) }
        return HTTPServerRequest(method: method, target: target, headers: headers + extra)
    }

    static func refusal(_ decision: ProxyDecision) -> Int? {
        if case .refuse(let status, _, _) = decision { return status }
        return nil
    }

    static func forwarded(_ decision: ProxyDecision) -> ProxiedRequest? {
        if case .forward(let request) = decision { return request }
        return nil
    }

    @Test("a request naming the proxy, with its credential, to a client API path is forwarded")
    func allowed() throws {
        let proxied = try #require(Self.forwarded(Self.loopback.decide(Self.request())))
        #expect(proxied.method == "GET")
        #expect(proxied.target == "/api/v3/clients/me")
        #expect(proxied.clientAuthorization == nil)
        #expect(Self.forwarded(Self.loopback.decide(Self.request("GET", "/api/v3/clients/me/wallets?x=1"))) != nil)
        #expect(Self.forwarded(Self.loopback.decide(Self.request(host: "LOCALHOST:8787"))) != nil)
    }

    @Test("a Host other than the proxy's own loopback name and port is refused (DNS rebinding)")
    func host() {
        for host in ["evil.example", "evil.example:8787", "127.0.0.1:8788", "127.0.0.1", "localhost", "[::1]:8787"] {
            #expect(Self.refusal(Self.loopback.decide(Self.request(host: host))) == 403, "\(host)")
        }
        #expect(Self.refusal(Self.loopback.decide(Self.request(host: nil))) == 403)
    }

    @Test("without the marker header the answer is 412; with a wrong credential 403")
    func marker() {
        #expect(Self.refusal(Self.loopback.decide(Self.request(marker: nil))) == 412)
        for wrong in ["", "1", "c0ffee-credentia", "c0ffee-credential2", "C0FFEE-CREDENTIAL"] {
            #expect(Self.refusal(Self.loopback.decide(Self.request(marker: wrong))) == 403, "\(wrong)")
        }
        let unset = ProxyRules(listener: .loopback(port: 8787), credential: nil, userAgent: "portal-token/test")
        #expect(Self.refusal(unset.decide(Self.request())) == 403)
    }

    @Test("methods outside the allowed set are refused with 405")
    func methods() {
        for method in ["TRACE", "CONNECT", "OPTIONS", "PROPFIND", "get"] {
            #expect(Self.refusal(Self.loopback.decide(Self.request(method))) == 405, "\(method)")
        }
        for method in ProxyRules.defaultMethods {
            #expect(Self.forwarded(Self.loopback.decide(Self.request(method))) != nil, "\(method)")
        }
        let readOnly = ProxyRules(
            listener: .unixSocket, credential: nil, methods: ["GET"], userAgent: "portal-token/test")
        #expect(Self.refusal(readOnly.decide(Self.request("POST"))) == 405)
    }

    @Test("paths outside the prefixes, and paths that could be read as another, are refused")
    func paths() {
        for path in [
            "/api/v3/auth/methods", "/api/v3/custodians/me", "/api/v3/clients/mer", "/api/v3/clients", "/",
            "/api/v3/clients/me/../../auth/methods", "/api/v3/clients/me/./x", "/api/v3/clients/me/..",
            "/api/v3/clients/me/%2e%2e/%2e%2e/auth", "/api/v3/clients/me%2f..%2fauth", "/api/v3/clients/me//x",
            "/api/v3/clients/me\\..\\auth", "/api/v3/clients/me/%2E%2E",
        ] {
            #expect(Self.refusal(Self.loopback.decide(Self.request("GET", path))) == 403, "\(path)")
        }
        #expect(ProxyRules.isAllowed(path: "/v1/a/b", prefixes: ["/v1/a"]))
        #expect(ProxyRules.isAllowed(path: "/v1/a/b", prefixes: ["/v1/"]))
        #expect(!ProxyRules.isAllowed(path: "/v1/ab", prefixes: ["/v1/a"]))
    }

    @Test("a Unix-socket proxy checks no Host, marker or credential, but still methods and paths")
    func unixSocket() {
        #expect(Self.forwarded(Self.unixSocket.decide(Self.request(host: "localhost", marker: nil))) != nil)
        #expect(Self.refusal(Self.unixSocket.decide(Self.request("TRACE", marker: nil))) == 405)
        #expect(Self.refusal(Self.unixSocket.decide(Self.request("GET", "/api/v3/auth/methods"))) == 403)
    }

    @Test("hop-by-hop headers, Host and the marker are dropped; the client's Authorization is kept apart, untouched")
    func headers() throws {
        let proxied = try #require(
            Self.forwarded(
                Self.loopback.decide(
                    Self.request(
                        "POST", "/api/v3/clients/me/x",
                        [
                            HTTPHeader("Authorization", "Bearer the-client's-own"),
                            HTTPHeader("Connection", "keep-alive, X-Drop-Me"), HTTPHeader("X-Drop-Me", "1"),
                            HTTPHeader("Keep-Alive", "timeout=5"), HTTPHeader("Proxy-Authorization", "Basic x"),
                            HTTPHeader("Transfer-Encoding", "chunked"), HTTPHeader("Upgrade", "websocket"),
                            HTTPHeader("TE", "trailers"), HTTPHeader("Expect", "100-continue"),
                            HTTPHeader("Accept", "application/json"), HTTPHeader("User-Agent", "curl/8"),
                            HTTPHeader("X-Keep", "yes"),
                        ]))))
        #expect(proxied.clientAuthorization == Secret("Bearer the-client's-own"))
        #expect(proxied.body == .chunked)
        let names = proxied.headers.map { $0.name.lowercased() }
        for dropped in [
            "host", "authorization", "connection", "x-drop-me", "keep-alive", "proxy-authorization",
            "transfer-encoding", "upgrade", "te", "expect", ProxyRules.markerHeader.lowercased(),
        ] {
            #expect(!names.contains(dropped), "\(dropped)")
        }
        #expect(proxied.headers.value(for: "Accept") == "application/json")
        #expect(proxied.headers.value(for: "X-Keep") == "yes")
        #expect(proxied.headers.value(for: "User-Agent") == "portal-token/test curl/8")
        #expect(TraceID.isValid(try #require(proxied.headers.value(for: "X-Portal-Trace-Id"))))
    }

    @Test("a client's trace id passes; a length-framed body is said to be one")
    func traceAndLength() throws {
        let proxied = try #require(
            Self.forwarded(
                Self.loopback.decide(
                    Self.request(
                        "PUT", "/api/v3/clients/me",
                        [HTTPHeader("X-Portal-Trace-Id", "mine"), HTTPHeader("Content-Length", "12")]))))
        #expect(proxied.headers.filter { $0.name.lowercased() == "x-portal-trace-id" }.map(\.value) == ["mine"])
        #expect(proxied.body == .length(12))
        #expect(proxied.headers.value(for: "Content-Length") == nil)
        #expect(proxied.headers.value(for: "User-Agent") == "portal-token/test")
    }

    @Test("an upstream answer loses its connection headers and keeps its length when it has one")
    func responseHeaders() {
        let (headers, length) = ProxyRules.responseHeaders([
            HTTPHeader("Content-Type", "application/json"), HTTPHeader("Content-Length", "42"),
            HTTPHeader("Connection", "close, X-Hop"), HTTPHeader("X-Hop", "1"), HTTPHeader("Location", "/elsewhere"),
        ])
        #expect(headers == [HTTPHeader("Content-Type", "application/json"), HTTPHeader("Location", "/elsewhere")])
        #expect(length == 42)
        #expect(ProxyRules.responseHeaders([HTTPHeader("Transfer-Encoding", "chunked")]).contentLength == nil)
        #expect(
            ProxyRules.responseHeaders([HTTPHeader("Content-Length", "1"), HTTPHeader("Content-Length", "2")])
                .contentLength == nil)
    }

    @Test("credentials are 64 lowercase hex digits, and differ every time")
    func credentials() {
        let first = ProxyRules.makeCredential(), second = ProxyRules.makeCredential()
        #expect(first.byteCount == 64)
        #expect(first.text.allSatisfy { "0123456789abcdef".contains($0) })
        #expect(first != second)
    }
}

@Suite("the incremental chunked body reader")
struct ChunkedBodyDecoderTests {
    static func decodeWhole(_ text: String, pieceSize: Int) throws(HTTPRequestError) -> (body: String, rest: String) {
        let bytes = Array(text.utf8)
        var decoder = ChunkedBodyDecoder()
        var body: [UInt8] = []
        var offset = 0
        while offset < bytes.count, !decoder.isDone {
            let end = min(offset + pieceSize, bytes.count)
            offset += try decoder.decode(bytes[offset..<end], into: &body)
        }
        return (String(decoding: body, as: UTF8.self), String(decoding: bytes[offset...], as: UTF8.self))
    }

    @Test("every cut of a chunked body decodes to the same bytes and stops at its end")
    func everyCut() throws {
        let text = "5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\nGET /next"
        for size in 1...text.utf8.count {
            let (body, rest) = try Self.decodeWhole(text, pieceSize: size)
            #expect(body == "hello 0123456789", "piece size \(size)")
            #expect(rest == "GET /next", "piece size \(size)")
        }
    }

    @Test("malformed chunked bodies are refused")
    func malformed() {
        for text in [
            "5\nhello\r\n0\r\n\r\n", "5\r\nhelloX\r\n0\r\n\r\n", "g\r\n", "123456789\r\n",
            "5\r\nhello\r\n0\r\nbad\r\n\r\n",
            "5\rx\r\n", "-1\r\n",
        ] {
            #expect(throws: HTTPRequestError.self, "\(text.debugDescription)") {
                _ = try Self.decodeWhole(text, pieceSize: 3)
            }
        }
    }

    @Test("fuzzing: 100,000 random and mutated chunked bodies, cut at random, each end or fail, never hang")
    func fuzz() {
        var random = HTTPRequestParserTests.SplitMix(state: 0xC4_0A_4ED)
        let seeds = [
            "5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\n",
            "3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\n", "0\r\n\r\n",
        ]
        let alphabet = Array("0123456789abcdefABCDEF;=: \t\r\nxyz".utf8) + [0, 0x7F, 0xFF]
        var outcomes = 0
        for round in 0..<100_000 {
            var bytes: [UInt8]
            if round % 3 == 0 {
                bytes = (0..<Int.random(in: 0...120, using: &random)).map { _ in
                    alphabet.randomElement(using: &random)!
                }
            } else {
                bytes = Array(seeds.randomElement(using: &random)!.utf8)
                for _ in 0..<Int.random(in: 1...4, using: &random) where !bytes.isEmpty {
                    let index = Int.random(in: 0..<bytes.count, using: &random)
                    switch Int.random(in: 0..<3, using: &random) {
                    case 0: bytes[index] = alphabet.randomElement(using: &random)!
                    case 1: bytes.insert(alphabet.randomElement(using: &random)!, at: index)
                    default: bytes.remove(at: index)
                    }
                }
            }
            var decoder = ChunkedBodyDecoder(maximumTrailerBytes: 64)
            var body: [UInt8] = []
            var offset = 0
            do {
                while offset < bytes.count, !decoder.isDone {
                    let end = min(bytes.count, offset + Int.random(in: 1...16, using: &random))
                    let consumed = try decoder.decode(bytes[offset..<end], into: &body)
                    #expect(consumed > 0 || decoder.isDone)
                    offset += consumed
                    if consumed == 0 { break }
                }
                #expect(body.count <= bytes.count)
            } catch {
                #expect([400, 431].contains(error.status))
            }
            outcomes += 1
        }
        #expect(outcomes == 100_000)
    }

    @Test("a streaming head leaves the body unread and reports its framing")
    func streamingHead() throws {
        let bytes = Array("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999\r\n\r\nabc".utf8)
        guard case .head(let request, let framing, let consumed, _) = HTTPRequestParser.parseStreamingHead(bytes[...])
        else {
            Issue.record("not a head")
            return
        }
        #expect(request.method == "POST")
        #expect(request.body.isEmpty)
        #expect(framing == .length(99_999_999))
        #expect(consumed == bytes.count - 3)
        let chunked = Array("PUT /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
        guard case .head(_, let chunkedFraming, _, _) = HTTPRequestParser.parseStreamingHead(chunked[...]) else {
            Issue.record("not a head")
            return
        }
        #expect(chunkedFraming == .chunked)
        let tooLong = Array(("GET /" + String(repeating: "a", count: 5000) + " HTTP/1.1\r\n").utf8)
        guard case .invalid(let error) = HTTPRequestParser.parseStreamingHead(tooLong[...]) else {
            Issue.record("a long request line was not refused")
            return
        }
        #expect(error.status == 431)
    }
}
