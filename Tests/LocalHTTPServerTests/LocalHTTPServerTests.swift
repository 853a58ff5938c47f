import Basics
import Dispatch
import Glibc
import LocalHTTPServer
import PeerCredentials
import PortalTokenCore
import PortalTokenTestSupport
import Synchronization
import Testing

/// A raw client on a Unix socket, so the tests see exactly the bytes the server sends.
enum RawClient {
    static func connect(_ path: String) -> Int32? {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var address = UnixSocketListener.socketAddress(path)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else {
            close(descriptor)
            return nil
        }
        return descriptor
    }

    static func send(_ descriptor: Int32, _ text: String) -> Bool {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }

    /// Reads until the server closes; nil when it had not closed after `seconds`.
    static func readAll(_ descriptor: Int32, seconds: Int = 10) -> String? {
        read(descriptor, count: nil, seconds: seconds)
    }

    /// Reads `count` bytes, or what came before the server closed; nil when they had not come
    /// after `seconds`.
    static func read(_ descriptor: Int32, count wanted: Int?, seconds: Int = 10) -> String? {
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        while wanted.map({ response.count < $0 }) ?? true {
            let count = recv(descriptor, &chunk, min(chunk.count, (wanted ?? Int.max) - response.count), 0)
            if count < 0, errno == EINTR { continue }
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK { return nil }
            if count <= 0 { break }
            response += chunk[0..<count]
        }
        return String(decoding: response, as: UTF8.self)
    }

    /// One request on a new connection, read to the server's close.
    static func exchange(_ path: String, _ request: String) -> String? {
        guard let descriptor = connect(path) else { return nil }
        defer { close(descriptor) }
        guard send(descriptor, request) else { return nil }
        return readAll(descriptor)
    }

    static func status(of response: String?) -> Int? {
        guard let response, response.hasPrefix("HTTP/1.1 ") else { return nil }
        return Int(response.dropFirst(9).prefix(3))
    }
}

/// A server on sockets in a fresh private directory, run on a thread of its own. Its peer is the
/// index of the listener that took the connection.
final class TestServer: @unchecked Sendable {
    typealias Handler = LocalHTTPServer<Int>.Stream

    let directory: String
    let paths: [String]
    let listeners: [Int32]
    let server: LocalHTTPServer<Int>
    let done = DispatchSemaphore(value: 0)
    var path: String { paths[0] }

    init(
        options: LocalHTTPServer<Int>.Options = .init(), sockets: Int = 1,
        accept: @escaping LocalHTTPServer<Int>.Accept = { _, index in index },
        stream: @escaping Handler = TestServer.echo
    ) throws {
        var template = Array("/tmp/local-http-test.XXXXXX".utf8CString)
        let directory = String(cString: mkdtemp(&template))
        self.directory = directory
        paths = (0..<sockets).map { "\(directory)/sockets/\($0).sock" }
        listeners = try paths.map { path in try UnixSocketListener.listen(at: path) }
        server = try LocalHTTPServer<Int>(listeners: listeners, options: options, accept: accept, stream: stream)
        let server = self.server, done = self.done
        DispatchQueue.global().async {
            try? server.run()
            done.signal()
        }
    }

    /// The whole body, read piece by piece (at most 1000 bytes at a time) while it arrives; nil
    /// when it could not be read, which the server answers for.
    static func readBody(_ exchange: StreamingExchange) -> [UInt8]? {
        var body: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1000)
        do {
            while true {
                let count = try buffer.withUnsafeMutableBytes { try exchange.read(into: $0) }
                if count == 0 { return body }
                body += buffer[0..<count]
            }
        } catch {
            return nil
        }
    }

    /// Answers with the method, the path and the body it read, whole, with `Content-Length`.
    static func echo(_ request: HTTPServerRequest, _ exchange: StreamingExchange, _ listener: Int) {
        guard let body = readBody(exchange) else { return }
        answer(request, body, exchange)
    }

    private static func answer(_ request: HTTPServerRequest, _ body: [UInt8], _ exchange: StreamingExchange) {
        try? exchange.answer(
            HTTPServerResponse(status: 200, body: Array("\(request.method) \(request.path) ".utf8) + body))
    }

    /// Answers with the method, the target, the body's length and its bytes, in chunks.
    static func echoInChunks(_ request: HTTPServerRequest, _ exchange: StreamingExchange, _ listener: Int) {
        guard let body = readBody(exchange) else { return }
        let head = Array("\(request.method) \(request.target) \(body.count):".utf8)
        try? exchange.begin(status: 200, headers: [HTTPHeader("X-Test", "1")], contentLength: nil)
        try? head.withUnsafeBytes { try exchange.write($0) }
        try? body.withUnsafeBytes { try exchange.write($0) }
    }

    /// `echo`, reading the body as the agent reads its own endpoints' (AgentRouter.serve): a
    /// declared length past `limit` is 413 before the body is read, a body that grows past it 413.
    static func echo(limit: Int) -> Handler {
        { request, exchange, _ in
            let declared = request.headers.value(for: "Content-Length").flatMap { Int($0) }
            let body: [UInt8]?
            do {
                body = declared.map { $0 > limit } == true ? nil : try exchange.readBody(limit: limit)
            } catch {
                return
            }
            guard let body else {
                try? exchange.answer(.text(413, "the request body is larger than the limit"))
                return
            }
            answer(request, body, exchange)
        }
    }

    /// A connection the server has accepted and answered once (`echo`), left open; nil when the
    /// answer did not come.
    func openConnection() -> Int32? {
        guard let descriptor = RawClient.connect(path) else { return nil }
        let answer = "HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: keep-alive\r\n\r\nGET /a "
        guard RawClient.send(descriptor, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"),
            RawClient.read(descriptor, count: answer.utf8.count) == answer
        else {
            close(descriptor)
            return nil
        }
        return descriptor
    }

    /// Waits for `run` to return; false when it had not after `seconds`.
    func waitForRun(seconds: Int = 30) -> Bool {
        done.wait(timeout: .now() + .seconds(seconds)) == .success
    }

    /// Stops the server and removes its sockets; false when `run` did not return.
    @discardableResult
    func stop() -> Bool {
        server.stop()
        let returned = waitForRun()
        removeSockets()
        return returned
    }

    func removeSockets() {
        for (listener, path) in zip(listeners, paths) {
            close(listener)
            unlink(path)
        }
        rmdir(directory + "/sockets")
        rmdir(directory)
    }
}

@Suite("the local HTTP server")
struct LocalHTTPServerTests {
    @Test("it answers a request with Content-Length, and a second one on the same connection")
    func keepAlive() throws {
        let running = try TestServer()
        defer { running.stop() }
        let descriptor = try #require(RawClient.connect(running.path))
        defer { close(descriptor) }
        #expect(
            RawClient.send(
                descriptor,
                "POST /one HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
                    + "GET /two HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
        let text = RawClient.readAll(descriptor) ?? "(no close)"
        #expect(
            text
                == "HTTP/1.1 200 OK\r\nContent-Length: 13\r\nConnection: keep-alive\r\n\r\nPOST /one abc"
                + "HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\nGET /two ")
    }

    @Test("a chunked body is read piece by piece; the answer streams in chunks; a pipelined request follows")
    func chunkedAndPipelined() throws {
        let running = try TestServer(stream: TestServer.echoInChunks)
        defer { running.stop() }
        let response = RawClient.exchange(
            running.path,
            "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                + "5\r\nhello\r\n6;e=1\r\n world\r\n0\r\n\r\n"
                + "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let text = try #require(response)
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(text.contains("X-Test: 1\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"))
        #expect(text.contains("POST /a 11:"))
        #expect(text.contains("hello world"))
        #expect(text.contains("GET /b 0:"))
        #expect(text.hasSuffix("0\r\n\r\n"))
    }

    @Test("a body far past the agent's 64 KiB bound passes through, read piece by piece")
    func largeBody() throws {
        let running = try TestServer(stream: TestServer.echoInChunks)
        defer { running.stop() }
        let size = 3 * 65_536 + 17
        let response = RawClient.exchange(
            running.path,
            "PUT /big HTTP/1.1\r\nHost: x\r\nContent-Length: \(size)\r\nConnection: close\r\n\r\n"
                + String(repeating: "z", count: size))
        let text = try #require(response)
        #expect(text.contains("PUT /big \(size):"))
        #expect(text.filter { $0 == "z" }.count == size)
    }

    @Test(
        "Expect: 100-continue is answered when the handler first reads the body, before the body comes",
        arguments: ["Transfer-Encoding: chunked", "Content-Length: 5"])
    func expectContinue(framing: String) throws {
        let running = try TestServer()
        defer { running.stop() }
        let descriptor = try #require(RawClient.connect(running.path))
        defer { close(descriptor) }
        #expect(
            RawClient.send(
                descriptor,
                "POST /c HTTP/1.1\r\nHost: x\r\n\(framing)\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"))
        let interim = "HTTP/1.1 100 Continue\r\n\r\n"
        #expect(RawClient.read(descriptor, count: interim.utf8.count) == interim)
        #expect(
            RawClient.send(descriptor, framing.hasPrefix("Transfer") ? "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n" : "abcde"))
        #expect(RawClient.readAll(descriptor)?.hasSuffix("\r\n\r\nPOST /c abcde") == true)
    }

    @Test("an answer of unknown length goes out chunked to HTTP/1.1 and until the close to HTTP/1.0")
    func streamedAnswer() throws {
        let running = try TestServer(stream: { _, exchange, _ in
            try? exchange.begin(status: 200, headers: [], contentLength: nil)
            for piece in ["hello ", "world"] {
                try? Array(piece.utf8).withUnsafeBytes { try exchange.write($0) }
            }
        })
        defer { running.stop() }
        let chunked = RawClient.exchange(running.path, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(
            chunked
                == "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                + "6\r\nhello \r\n5\r\nworld\r\n0\r\n\r\n")
        let plain = RawClient.exchange(running.path, "GET / HTTP/1.0\r\n\r\n")
        #expect(plain == "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello world")
    }

    @Test("HTTP/1.0 keeps the connection only when asked; HEAD gets the head alone, and the connection stays")
    func http10AndHead() throws {
        let running = try TestServer()
        defer { running.stop() }
        let http10 = RawClient.exchange(
            running.path,
            "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.0\r\n\r\nGET /c HTTP/1.0\r\n\r\n")
        #expect(
            http10
                == "HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: keep-alive\r\n\r\nGET /a "
                + "HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\nGET /b ")
        let head = RawClient.exchange(
            running.path,
            "HEAD /one HTTP/1.1\r\nHost: x\r\n\r\nGET /two HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(
            head
                == "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nConnection: keep-alive\r\n\r\n"
                + "HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\nGET /two ")
    }

    @Test("a body the handler leaves unread closes the connection after the answer")
    func unreadBody() throws {
        let running = try TestServer(stream: { request, exchange, _ in
            try? exchange.answer(.text(200, "unread \(request.path)"))
        })
        defer { running.stop() }
        let response = RawClient.exchange(
            running.path, "POST /d HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /e HTTP/1.1\r\n\r\n")
        let text = try #require(response)
        #expect(text.contains("Connection: close\r\n"))
        #expect(text.hasSuffix("unread /d\n"))
        #expect(!text.contains("/e"))
    }

    @Test("malformed and oversized requests get 400, 417, 431, 501 and 505, and the server keeps serving")
    func refusals() throws {
        let running = try TestServer(options: .init(limits: HTTPRequestLimits(maximumHeadBytes: 1024)))
        defer { running.stop() }
        func status(_ request: String) -> Int? { RawClient.status(of: RawClient.exchange(running.path, request)) }
        #expect(status("NOT HTTP AT ALL\r\n\r\n") == 400)
        #expect(status("GET / HTTP/1.1\r\n\r\n") == 400)
        #expect(status("GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n") == 400)
        #expect(status("GET / HTTP/1.1\r\nHost: x\r\nX: " + String(repeating: "a", count: 2000) + "\r\n\r\n") == 431)
        #expect(status("GET / HTTP/1.1\r\nHost: x\r\nX: " + String(repeating: "a", count: 20_000) + "\r\n\r\n") == 431)
        #expect(status("GET / HTTP/2.0\r\nHost: x\r\n\r\n") == 505)
        #expect(status("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n") == 501)
        #expect(status("POST / HTTP/1.1\r\nHost: x\r\nExpect: magic\r\nContent-Length: 1\r\n\r\nx") == 417)
        // A broken chunk is found while the handler reads the body: 400, and the connection ends.
        #expect(status("POST /f HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n") == 400)
        let garbage = String(decoding: (0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 37) }, as: UTF8.self)
        #expect([400, 431].contains(status(garbage) ?? 0))
        let after = RawClient.exchange(running.path, "GET /still HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(after?.hasSuffix("GET /still ") == true)
    }

    @Test("a body read with the agent's bound is 413 past it, by its declared length or as its chunks arrive")
    func bodyBound() throws {
        let running = try TestServer(stream: TestServer.echo(limit: 100))
        defer { running.stop() }
        func status(_ request: String) -> Int? { RawClient.status(of: RawClient.exchange(running.path, request)) }
        let hundred = String(repeating: "b", count: 100)
        #expect(status("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n" + hundred + "b") == 413)
        #expect(status("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n") == 413)
        let chunked = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        #expect(status(chunked + "32\r\n" + hundred.prefix(50) + "\r\n33\r\n" + hundred.prefix(51) + "\r\n") == 413)
        let fits = RawClient.exchange(
            running.path, "POST /fits HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\nConnection: close\r\n\r\n" + hundred
        )
        #expect(fits?.hasSuffix("POST /fits " + hundred) == true)
    }

    @Test("a silent client, a trickling one and one whose body stalls are dropped at the deadline; others are served")
    func deadlines() throws {
        let running = try TestServer(options: .init(requestDeadlineMilliseconds: 1000))
        defer { running.stop() }
        let silent = try #require(RawClient.connect(running.path))
        defer { close(silent) }
        let trickling = try #require(RawClient.connect(running.path))
        defer { close(trickling) }
        let stalled = try #require(RawClient.connect(running.path))
        defer { close(stalled) }
        #expect(RawClient.send(stalled, "POST /g HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc"))
        // 29 bytes 100 ms apart: still trickling well past the deadline.
        let trickle = DispatchQueue(label: "trickle")
        trickle.async {
            for byte in "GET /slow HTTP/1.1\r\nHost: x\r\n" {
                guard RawClient.send(trickling, String(byte)) else { return }
                usleep(100_000)
            }
        }
        // Another client is answered meanwhile.
        let other = RawClient.exchange(running.path, "GET /other HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(other?.hasSuffix("GET /other ") == true)
        // The silent one is closed with no answer (nil would be the test's own read giving up);
        // the trickling one, and the one whose body stopped coming, are told 408.
        #expect(RawClient.readAll(silent) == "")
        #expect(RawClient.status(of: RawClient.readAll(trickling)) == 408)
        #expect(RawClient.status(of: RawClient.readAll(stalled)) == 408)
    }

    @Test("200 clients at once are each answered with their own request")
    func concurrentClients() throws {
        let running = try TestServer()
        defer { running.stop() }
        let answers = Mutex([Int: String]())
        DispatchQueue.concurrentPerform(iterations: 200) { index in
            let body = "client-\(index)"
            let response = RawClient.exchange(
                running.path,
                "POST /n HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
            answers.withLock { $0[index] = response }
        }
        let all = answers.withLock { $0 }
        #expect(all.count == 200)
        for index in 0..<200 {
            #expect(all[index]?.hasSuffix("\r\n\r\nPOST /n client-\(index)") == true, "client \(index)")
        }
    }

    @Test("past maximumConnections a client waits in the backlog until a connection ends")
    func connectionCap() throws {
        // A long request deadline: on a loaded machine the first connection must not reach it
        // while it holds the one slot.
        let running = try TestServer(options: .init(requestDeadlineMilliseconds: 60_000, maximumConnections: 1))
        defer { running.stop() }
        let first = try #require(running.openConnection())
        defer { close(first) }
        let second = try #require(RawClient.connect(running.path))
        defer { close(second) }
        #expect(RawClient.send(second, "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
        var readable = pollfd(fd: second, events: Int16(POLLIN), revents: 0)
        #expect(poll(&readable, 1, 1000) == 0, "the second client was served while the first was open")
        #expect(RawClient.send(first, "GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
        #expect(RawClient.readAll(first)?.hasSuffix("GET /c ") == true)
        #expect(RawClient.readAll(second)?.hasSuffix("GET /b ") == true)
    }

    @Test("each listener has its own cap: one at its cap leaves another accepting")
    func capPerListener() throws {
        let running = try TestServer(options: .init(maximumConnections: 1), sockets: 2)
        defer { running.stop() }
        let held = try #require(running.openConnection())
        defer { close(held) }
        let started = MonotonicClock.milliseconds()
        let answer = RawClient.exchange(running.paths[1], "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(answer?.hasSuffix("GET /b ") == true)
        #expect(MonotonicClock.milliseconds() - started < 1000)
    }

    @Test("at the cap, connections that send nothing or half a head do not delay a new client: the oldest makes room")
    func unprovenConnectionsMakeRoom() throws {
        // Idle keep-alive connections are ended at the request deadline (5 s by default), which a
        // loaded machine can reach before the proven ones are asked again: only room may end them here.
        let running = try TestServer(options: .init(requestDeadlineMilliseconds: 60_000, maximumConnections: 40))
        defer { running.stop() }
        // Proven ones: answered once, left open.
        let proven = (0..<8).compactMap { _ in running.openConnection() }
        defer { for descriptor in proven { close(descriptor) } }
        #expect(proven.count == 8)
        var idle: [Int32] = []
        defer { for descriptor in idle { close(descriptor) } }
        for index in 0..<40 {
            guard let descriptor = RawClient.connect(running.path) else { break }
            if index % 2 == 0 { _ = RawClient.send(descriptor, "GET /slow HTTP/1.1\r\n") }
            idle.append(descriptor)
        }
        #expect(idle.count == 40)
        let started = MonotonicClock.milliseconds()
        let answer = RawClient.exchange(running.path, "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(answer?.hasSuffix("GET /b ") == true)
        #expect(MonotonicClock.milliseconds() - started < 1000, "the new client waited")
        // The oldest unproven were ended; the proven ones were not.
        #expect(RawClient.readAll(idle[0]) == "")
        for descriptor in proven {
            #expect(RawClient.send(descriptor, "GET /again HTTP/1.1\r\nHost: x\r\n\r\n"))
            #expect(RawClient.read(descriptor, count: 74)?.hasSuffix("GET /again ") == true)
        }
    }

    @Test("a burst past the cap is served whole: a connection whose request waits unread is not ended for room")
    func burstPastTheCap() throws {
        // Learning who a caller is takes a while, as reading /proc does under load: each of the
        // 8 slots holds a client whose request has arrived but is not read yet.
        let running = try TestServer(
            options: .init(maximumConnections: 8),
            accept: { _, index in
                usleep(300_000)
                return index
            })
        defer { running.stop() }
        // All 40 connect and send before any is answered.
        var clients: [Int32] = []
        defer { for descriptor in clients { close(descriptor) } }
        for index in 0..<40 {
            guard let descriptor = RawClient.connect(running.path) else { break }
            clients.append(descriptor)
            let body = "client-\(index)"
            let head = "POST /n HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n"
            #expect(RawClient.send(descriptor, head + body))
        }
        #expect(clients.count == 40)
        for (index, descriptor) in clients.enumerated() {
            let answer = RawClient.readAll(descriptor)
            #expect(answer?.hasSuffix("\r\n\r\nPOST /n client-\(index)") == true, "client \(index): \(answer ?? "")")
        }
    }

    @Test("at the cap, a connection waiting on a body is ended for room, unless the handler admitted its request")
    func bodyWaitsMakeRoom() throws {
        // A long request deadline: only room may end a connection here, however loaded the machine.
        let running = try TestServer(
            options: .init(requestDeadlineMilliseconds: 60_000, maximumConnections: 2),
            stream: { request, exchange, listener in
                if request.path == "/admitted" { exchange.admit() }
                TestServer.echo(request, exchange, listener)
            })
        defer { running.stop() }
        func holding(_ path: String) -> Int32? {
            guard let descriptor = RawClient.connect(running.path) else { return nil }
            _ = RawClient.send(
                descriptor, "POST \(path) HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nConnection: close\r\n\r\nabc")
            return descriptor
        }
        // Unadmitted: both make room for a new client.
        // Closed below, once: a second close at the end of the test would close whatever took
        // their numbers meanwhile (the admitted clients here, or another test's sockets).
        let unadmitted = [holding("/n"), holding("/n")].compactMap { $0 }
        #expect(unadmitted.count == 2)
        usleep(300_000)
        let started = MonotonicClock.milliseconds()
        let answer = RawClient.exchange(running.path, "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(answer?.hasSuffix("GET /b ") == true)
        #expect(MonotonicClock.milliseconds() - started < 1000, "the new client waited")
        #expect(RawClient.readAll(unadmitted[0]) == "")
        for descriptor in unadmitted { close(descriptor) }
        usleep(100_000)
        // Admitted: they keep their slots, and their bodies, finished, are answered.
        let admitted = [holding("/admitted"), holding("/admitted")].compactMap { $0 }
        defer { for descriptor in admitted { close(descriptor) } }
        #expect(admitted.count == 2)
        usleep(300_000)
        let waiting = try #require(RawClient.connect(running.path))
        defer { close(waiting) }
        #expect(RawClient.send(waiting, "GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
        var readable = pollfd(fd: waiting, events: Int16(POLLIN), revents: 0)
        #expect(poll(&readable, 1, 600) == 0, "an admitted connection was ended for room")
        for descriptor in admitted {
            #expect(RawClient.send(descriptor, "defghij"))
            #expect(RawClient.readAll(descriptor)?.hasSuffix("POST /admitted abcdefghij") == true)
        }
        #expect(RawClient.readAll(waiting)?.hasSuffix("GET /c ") == true)
    }

    @Test("an answer given as a refusal ends the connection; the connection is not proven by it")
    func refusalEndsTheConnection() throws {
        let running = try TestServer(stream: { request, exchange, _ in
            if request.path == "/refused" {
                exchange.refuse(.text(403, "no"))
            } else {
                try? exchange.answer(.text(200, "yes"))
            }
        })
        defer { running.stop() }
        let response = RawClient.exchange(
            running.path,
            "GET /refused HTTP/1.1\r\nHost: x\r\n\r\nGET /refused HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(response?.hasPrefix("HTTP/1.1 403 Forbidden\r\n") == true)
        #expect(response?.contains("Connection: close\r\n") == true)
        #expect(response?.ranges(of: "HTTP/1.1 ").count == 1, "the second request was answered: \(response ?? "")")
        let kept = RawClient.exchange(
            running.path, "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(kept?.ranges(of: "HTTP/1.1 200").count == 2, "\(kept ?? "")")
    }

    @Test("the accept hook hears which listener took the connection, and nil closes it unanswered")
    func acceptHook() throws {
        let running = try TestServer(
            sockets: 2, accept: { _, index in index == 1 ? nil : index },
            stream: { _, exchange, listener in try? exchange.answer(.text(200, "listener \(listener)")) })
        defer { running.stop() }
        let answered = RawClient.exchange(running.paths[0], "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(answered?.hasSuffix("listener 0\n") == true)
        // Closed unanswered: the client reads the end of the stream (nil would be its read timing out).
        let refused = try #require(RawClient.connect(running.paths[1]))
        defer { close(refused) }
        #expect(RawClient.readAll(refused) == "")
    }

    @Test("stop ends an open connection and makes run return")
    func stop() throws {
        let running = try TestServer()
        let client = try #require(running.openConnection())
        defer { close(client) }
        #expect(running.stop(), "run did not return")
        #expect(RawClient.readAll(client) == "")
    }

    @Test("with an idle exit, run returns once no connection has been open for that long")
    func idleExit() throws {
        let running = try TestServer(options: .init(idleExitMilliseconds: 200))
        defer { running.removeSockets() }
        #expect(running.waitForRun(), "run did not return")
    }

    @Test("the socket is 0600 in a 0700 directory; a stale socket is replaced, a live one or a foreign file is not")
    func socketFiles() throws {
        let running = try TestServer()
        defer { running.stop() }
        var status = stat()
        #expect(stat(running.path, &status) == 0 && status.st_mode & 0o777 == 0o600)
        #expect(stat(running.directory + "/sockets", &status) == 0 && status.st_mode & 0o777 == 0o700)
        #expect(throws: UnixSocketListener.Failure.inUse(path: running.path)) {
            try UnixSocketListener.listen(at: running.path)
        }

        // A socket nothing listens on any more is replaced.
        let stalePath = running.directory + "/sockets/stale.sock"
        let stale = try UnixSocketListener.listen(at: stalePath)
        close(stale)
        let replaced = try UnixSocketListener.listen(at: stalePath)
        close(replaced)
        unlink(stalePath)

        // A regular file is never removed.
        let filePath = running.directory + "/sockets/file.sock"
        let file = open(filePath, O_CREAT | O_WRONLY, 0o600)
        close(file)
        defer { unlink(filePath) }
        #expect(throws: UnixSocketListener.Failure.foreignFile(path: filePath)) {
            try UnixSocketListener.listen(at: filePath)
        }

        // A directory others may write to is refused.
        let open = running.directory + "/open"
        mkdir(open, 0o700)
        chmod(open, 0o777)
        defer { rmdir(open) }
        #expect(
            throws: UnixSocketListener.Failure.unsafeDirectory(path: open, reason: "others may write to it (mode 777)")
        ) {
            try UnixSocketListener.listen(at: open + "/x.sock")
        }
    }
}

@Suite("who is on the other end of a socket")
struct PeerCredentialsTests {
    @Test(
        "a client of this process is this process: its uid, pid, user namespace, cgroup and executable",
        arguments: [true, false])
    func identifiesItself(askingTheSocket: Bool) throws {
        let socket = try ListeningSocket()
        defer { socket.remove() }
        let client = try #require(RawClient.connect(socket.path))
        defer { close(client) }
        let accepted = socket.accept()
        defer { close(accepted) }
        // With SO_PEERPIDFD, and with the pidfd opened after the accept as on an older kernel.
        let identity = try #require(PeerCredentials.identify(accepted, askingTheSocket: askingTheSocket)?.identity)
        #expect(identity.uid == getuid())
        #expect(identity.gid == getgid())
        #expect(identity.pid == getpid())
        #expect(identity.pidVerified)
        #expect(identity.sameUserNamespace == true)
        #expect(identity.cgroup?.hasPrefix("/") == true)
        let executable = try #require(identity.executable)
        #expect(executable.hasSuffix(".xctest") || executable.contains("portal-token"))
    }

    @Test(
        "a client that has gone by the time it is asked about is not verified: uid and pid alone",
        arguments: [true, false])
    func goneClient(askingTheSocket: Bool) throws {
        let socket = try ListeningSocket()
        defer { socket.remove() }
        // A process that connects and exits; the connection waits in the backlog.
        let connected = try ProcessRunner.run(
            "/usr/bin/python3",
            ["-c", "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])", socket.path])
        #expect(connected.exitCode == 0, "\(connected.stderr)")
        let accepted = socket.accept()
        defer { close(accepted) }
        let identity = try #require(PeerCredentials.identify(accepted, askingTheSocket: askingTheSocket)?.identity)
        #expect(identity.uid == getuid() && identity.pid > 0 && identity.pid != getpid())
        #expect(!identity.pidVerified)
        #expect(identity.executable == nil && identity.cgroup == nil)
    }
}

/// A listening Unix socket in a fresh private directory, for the peer-credential tests.
private struct ListeningSocket {
    let directory: String
    let path: String
    let listener: Int32

    init() throws {
        var template = Array("/tmp/peer-test.XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template))
        path = directory + "/peer.sock"
        listener = try UnixSocketListener.listen(at: path)
    }

    /// The next connection, waited for 5 s at most.
    func accept() -> Int32 {
        var readable = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        _ = poll(&readable, 1, 5000)
        let accepted = Glibc.accept(listener, nil, nil)
        #expect(accepted >= 0)
        return accepted
    }

    func remove() {
        close(listener)
        unlink(path)
        rmdir(directory)
    }
}

@Suite("the proxy's listeners")
struct ProxyListenerTests {
    @Test("the loopback listener binds 127.0.0.1 only, on the port asked or a free one")
    func loopback() throws {
        let (descriptor, port) = try LoopbackTCPListener.listen(port: 0)
        defer { close(descriptor) }
        #expect(port != 0)
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        #expect(UInt32(bigEndian: address.sin_addr.s_addr) == 0x7F00_0001)
        #expect(UInt16(bigEndian: address.sin_port) == port)
        #expect(throws: SystemCallError.self) { _ = try LoopbackTCPListener.listen(port: port) }
    }
}
