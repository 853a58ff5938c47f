import PortalTokenCore
import Testing

@Suite("the strict HTTP/1.1 request reader")
struct HTTPRequestParserTests {
    enum Outcome {
        case incomplete
        case complete(HTTPServerRequest, consumed: Int)
        case invalid(HTTPRequestError)
    }

    /// Reads one request from the start of `bytes` as the server does: its head, then its body
    /// by `Content-Length` or through `ChunkedBodyDecoder`.
    static func parse(_ bytes: ArraySlice<UInt8>, limits: HTTPRequestLimits = .init()) -> Outcome {
        switch HTTPRequestParser.parseStreamingHead(bytes, limits: limits) {
        case .incomplete: return .incomplete
        case .invalid(let error): return .invalid(error)
        case .head(var request, let framing, let consumed, _):
            let rest = bytes[(bytes.startIndex + consumed)...]
            switch framing {
            case .none:
                return .complete(request, consumed: consumed)
            case .length(let length):
                guard rest.count >= length else { return .incomplete }
                request.body = Array(rest.prefix(length))
                return .complete(request, consumed: consumed + length)
            case .chunked:
                var decoder = ChunkedBodyDecoder()
                do {
                    let taken = try decoder.decode(rest, into: &request.body)
                    guard decoder.isDone else { return .incomplete }
                    return .complete(request, consumed: consumed + taken)
                } catch {
                    return .invalid(error)
                }
            }
        }
    }

    static func parse(_ text: String, limits: HTTPRequestLimits = .init()) -> Outcome {
        parse(Array(text.utf8)[...], limits: limits)
    }

    static func request(_ text: String, limits: HTTPRequestLimits = .init()) -> (HTTPServerRequest, Int)? {
        if case .complete(let request, let consumed) = parse(text, limits: limits) { return (request, consumed) }
        return nil
    }

    static func status(_ text: String, limits: HTTPRequestLimits = .init()) -> Int? {
        if case .invalid(let error) = parse(text, limits: limits) { return error.status }
        return nil
    }

    static func isIncomplete(_ text: String) -> Bool {
        if case .incomplete = parse(text) { return true }
        return false
    }

    @Test("a GET with no body is read whole, with its headers in order")
    func simpleGet() throws {
        let (request, consumed) = try #require(
            Self.request("GET /v1/token?x=1 HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\nrest"))
        #expect(request.method == "GET")
        #expect(request.target == "/v1/token?x=1")
        #expect(request.path == "/v1/token")
        #expect(request.query == "x=1")
        #expect(request.headers == [HTTPHeader("Host", "localhost"), HTTPHeader("Accept", "*/*")])
        #expect(request.keepAlive)
        #expect(request.body.isEmpty)
        #expect(consumed == 60)
    }

    @Test("a Content-Length body is read to its length; the next request's bytes are left")
    func contentLength() throws {
        let text = "POST /v1/git/get HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET"
        let (request, consumed) = try #require(Self.request(text))
        #expect(request.body == Array("hello".utf8))
        #expect(consumed == text.utf8.count - 3)
        #expect(Self.isIncomplete("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhel"))
    }

    @Test("a chunked body is decoded, extensions and trailers dropped")
    func chunked() throws {
        let text =
            "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "5;name=v\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nTrailer: yes\r\n\r\n"
        let (request, consumed) = try #require(Self.request(text))
        #expect(request.body == Array("hello world".utf8))
        #expect(consumed == text.utf8.count)
        // Every cut of it is incomplete, never an error.
        let bytes = Array(text.utf8)
        for cut in 0..<bytes.count {
            guard case .incomplete = Self.parse(bytes[..<cut]) else {
                Issue.record("cut at \(cut) was not incomplete")
                continue
            }
        }
    }

    @Test("HTTP/1.0 closes by default and keeps alive only when asked; Connection: close ends 1.1")
    func connectionPersistence() throws {
        #expect(try #require(Self.request("GET / HTTP/1.0\r\n\r\n")).0.keepAlive == false)
        #expect(try #require(Self.request("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")).0.keepAlive)
        #expect(
            try #require(Self.request("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")).0.keepAlive == false)
    }

    @Test("Expect: 100-continue is reported with the head, before the body has come")
    func expectContinue() {
        let bytes = Array("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n".utf8)
        guard case .head(_, .length(3), bytes.count, true) = HTTPRequestParser.parseStreamingHead(bytes[...]) else {
            Issue.record("expected a complete head waiting for its body")
            return
        }
    }

    @Test(
        "malformed requests are refused with 400",
        arguments: [
            "GET /\r\n\r\n",
            "GET  / HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n",
            "G(T / HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET / HTTP/1.1\nHost: x\n\n",
            "GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
            "GET / HTTP/1.1\r\nHost : x\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\nBad\u{1}: y\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\nX: a\u{7}b\r\n\r\n",
            "GET / HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n",
            "GET / HTTX/1.1\r\nHost: x\r\n\r\n",
            "GET / HTTP/1.1\rX\r\nHost: x\r\n\r\n",
        ])
    func malformed(_ text: String) {
        #expect(Self.status(text) == 400)
    }

    @Test("an unknown version is 505, a transfer coding other than chunked 501")
    func unsupported() {
        #expect(Self.status("GET / HTTP/2.0\r\nHost: x\r\n\r\n") == 505)
        #expect(Self.status("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n") == 501)
    }

    @Test("a request line or head past its bound is 431, even before its end has come")
    func headBounds() {
        let limits = HTTPRequestLimits(maximumRequestLineBytes: 64, maximumHeadBytes: 256, maximumHeaderCount: 4)
        #expect(Self.status("GET /" + String(repeating: "a", count: 100), limits: limits) == 431)
        #expect(Self.status("GET /" + String(repeating: "a", count: 100) + " HTTP/1.1\r\n", limits: limits) == 431)
        let longHeader = "GET / HTTP/1.1\r\nHost: x\r\nX: " + String(repeating: "b", count: 300)
        #expect(Self.status(longHeader, limits: limits) == 431)
        let many = "GET / HTTP/1.1\r\nHost: x\r\n" + (1...5).map { "X\($0): y\r\n" }.joined() + "\r\n"
        #expect(Self.status(many, limits: limits) == 431)
    }

    @Test("a Content-Length too long to be a number is 400; a body's size is left to whoever reads it")
    func bodyLengths() {
        #expect(Self.status("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n") == 400)
        let large = Array("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999999999999\r\n\r\n".utf8)
        guard case .head(_, .length(999_999_999_999_999_999), _, _) = HTTPRequestParser.parseStreamingHead(large[...])
        else {
            Issue.record("a large declared length was refused by the head reader")
            return
        }
    }

    @Test("renderings of a request show its method and path, never its query or body")
    func redaction() throws {
        let (request, _) = try #require(
            Self.request("POST /v1/git/store?secret=canary HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\ncanary"))
        #expect(request.description == "POST /v1/git/store")
        #expect(!String(reflecting: request).contains("canary"))
        #expect(!"\(request)".contains("canary"))
    }

    // MARK: Fuzzing

    /// A small, seeded generator, so a failure can be replayed from its seed.
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static let seeds: [String] = [
        "GET /v1/token HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "POST /v1/git/get HTTP/1.1\r\nHost: localhost\r\nContent-Length: 32\r\n\r\nprotocol=https\nhost=example.com\n",
        "POST /v1/docker/get HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
            + "4\r\nabcd\r\n0\r\n\r\n",
        "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    ]

    /// Checks one input: the reader returns (the test would hang otherwise), and what it says
    /// is consistent with the bytes.
    static func check(_ bytes: [UInt8], limits: HTTPRequestLimits) {
        switch Self.parse(bytes[...], limits: limits) {
        case .complete(let request, let consumed):
            #expect(consumed > 0 && consumed <= bytes.count)
            #expect(request.body.count < consumed)
            #expect(request.target.hasPrefix("/"))
        case .invalid(let error):
            #expect([400, 417, 431, 501, 505].contains(error.status))
        case .incomplete:
            break
        }
    }

    @Test("fuzzing: 200,000 random and mutated inputs are each answered, with no crash and no hang")
    func fuzz() {
        var random = SplitMix(state: 0x5EED_0F_A6E47)
        let limits = HTTPRequestLimits(
            maximumRequestLineBytes: 128, maximumHeadBytes: 512, maximumHeaderCount: 8)
        let alphabet = Array("GETPOST /HTTP1.0\r\n:;-0123456789abcdefxyz\t ".utf8) + [0, 0x7F, 0xFF, 0xC3]
        var answered = 0
        for round in 0..<200_000 {
            var bytes: [UInt8]
            switch round % 4 {
            case 0:
                // Random bytes from an alphabet that makes HTTP-looking text likely.
                bytes = (0..<Int.random(in: 0...300, using: &random)).map { _ in
                    alphabet.randomElement(using: &random)!
                }
            case 1:
                // Fully random bytes.
                bytes = (0..<Int.random(in: 0...200, using: &random)).map { _ in
                    UInt8.random(in: 0...255, using: &random)
                }
            default:
                // A valid request, mutated: bytes flipped, inserted, removed, cut, or parts repeated.
                bytes = Array(Self.seeds.randomElement(using: &random)!.utf8)
                for _ in 0..<Int.random(in: 1...6, using: &random) where !bytes.isEmpty {
                    let index = Int.random(in: 0..<bytes.count, using: &random)
                    switch Int.random(in: 0..<5, using: &random) {
                    case 0: bytes[index] = UInt8.random(in: 0...255, using: &random)
                    case 1: bytes.insert(alphabet.randomElement(using: &random)!, at: index)
                    case 2: bytes.remove(at: index)
                    case 3: bytes = Array(bytes[..<index])
                    default:
                        let end = min(bytes.count, index + Int.random(in: 1...40, using: &random))
                        bytes.insert(contentsOf: Array(bytes[index..<end]), at: index)
                    }
                }
            }
            Self.check(bytes, limits: limits)
            answered += 1
        }
        #expect(answered == 200_000)
    }
}
