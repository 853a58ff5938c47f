import Dispatch
import Glibc
import LoopbackRedirectListener
import PortalTokenCore
import Synchronization
import Testing

/// A browser, played by a client socket on another thread.
enum Browser {
    struct Answer: Sendable {
        var status: Int
        var head: String
        var body: String
    }

    /// Sends `request` (a whole HTTP request) and reads the answer until the server closes.
    static func send(_ request: String, port: UInt16, family: Int32 = AF_INET) -> Answer? {
        guard let descriptor = connect(port: port, family: family) else { return nil }
        defer { close(descriptor) }
        let bytes = Array(request.utf8)
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard sent > 0 else { return nil }
            offset += sent
        }
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(descriptor, &chunk, chunk.count, 0)
            if count <= 0 { break }
            response += chunk[0..<count]
        }
        let text = String(decoding: response, as: UTF8.self)
        guard let split = text.firstRange(of: "\r\n\r\n") else { return nil }
        let head = String(text[..<split.lowerBound])
        let status = Int(head.split(separator: " ")[1]) ?? 0
        return Answer(status: status, head: head, body: String(text[split.upperBound...]))
    }

    static func get(_ target: String, port: UInt16, host: String = "127.0.0.1", family: Int32 = AF_INET) -> Answer? {
        send(
            "GET \(target) HTTP/1.1\r\nHost: \(host):\(port)\r\nUser-Agent: test-browser\r\nAccept: text/html\r\n\r\n",
            port: port, family: family)
    }

    static func connect(port: UInt16, family: Int32 = AF_INET) -> Int32? {
        let descriptor = socket(family, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let result: Int32
        if family == AF_INET6 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            address.sin6_addr = in6addr_loopback
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        guard result == 0 else { close(descriptor); return nil }
        return descriptor
    }

    /// Runs `body` on another thread; `result()` waits for it.
    final class Running<T: Sendable>: Sendable {
        private let value = Mutex<T?>(nil)
        private let done = DispatchSemaphore(value: 0)

        init(_ body: @escaping @Sendable () -> T) {
            DispatchQueue.global().async { [self] in
                let result = body()
                value.withLock { $0 = result }
                done.signal()
            }
        }

        func result() -> T? {
            done.wait()
            return value.withLock { $0 }
        }
    }
}

enum ListenerFixture {
    /// A loopback port nobody is listening on right now.
    static func freePort() -> UInt16 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return UInt16(bigEndian: address.sin_port)
    }

    static func listener(
        host: String = "127.0.0.1", path: String = "/callback", timeoutMilliseconds: Int64 = 10_000,
        handlesInterrupts: Bool = false, maximumRequestBytes: Int = 65_536,
        requestDeadlineMilliseconds: Int64 = 10_000,
        tickMilliseconds: Int64 = 1000, now: (@Sendable () -> Int64)? = nil
    ) throws -> (LoopbackRedirectListener, String) {
        var options = LoopbackRedirectListener.Options(
            timeoutMilliseconds: timeoutMilliseconds, maximumRequestBytes: maximumRequestBytes,
            requestDeadlineMilliseconds: requestDeadlineMilliseconds,
            tickMilliseconds: tickMilliseconds, handlesInterrupts: handlesInterrupts)
        if let now { options.now = now }
        // The port was free a moment ago; a test beside this one may have been given it since, for
        // a connection of its own. Another port then.
        for attempt in 1...5 {
            let url = "http://\(host):\(freePort())\(path)"
            let redirect = try #require(LoopbackRedirect(redirectURL: url))
            do {
                return (
                    try LoopbackRedirectListener(redirect: redirect, configuredRedirectURL: url, options: options), url
                )
            } catch {
                guard attempt < 5, case .cannotListen(_, _, EADDRINUSE) = error else { throw error }
            }
        }
        throw RedirectListenerError.socketFailure(errorNumber: EADDRINUSE)
    }

    /// Whether the port can be bound again (the listener released it). A connection of a test
    /// beside this one may hold it for a moment as its local port, so it is tried for up to 2 s;
    /// a listener that kept it fails every try.
    static func isFree(_ port: UInt16) -> Bool {
        for _ in 0..<40 {
            if canBind(port) { return true }
            usleep(50_000)
        }
        return false
    }

    private static func canBind(_ port: UInt16) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var yes: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        } == 0
    }

    static func hasIPv6Loopback() -> Bool {
        let descriptor = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_addr = in6addr_loopback
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
            }
        } == 0
    }
}

final class ProgressLog: Sendable {
    private let events = Mutex<[RedirectListenerProgress]>([])
    func record(_ event: RedirectListenerProgress) { events.withLock { $0.append(event) } }
    var all: [RedirectListenerProgress] { events.withLock { $0 } }
}

@Suite("loopback redirect listener")
struct LoopbackRedirectListenerTests {
    typealias Listener = LoopbackRedirectListener

    @Test("the redirect on the configured path completes; other paths get 404 and waiting goes on")
    func completes() throws {
        let (listener, url) = try ListenerFixture.listener()
        let port = listener.redirect.port
        let browser = Browser.Running { () -> [Browser.Answer?] in
            [
                Browser.get("/favicon.ico", port: port),
                Browser.get("/callback/other", port: port),
                Browser.get("/callback?token=grant-1&authMethod=EMAIL_MAGIC_LINK", port: port),
            ]
        }
        let log = ProgressLog()
        let received = Mutex<String?>(nil)
        let result = try listener.wait(progress: log.record) { redirectURL -> RedirectDecision<String> in
            received.withLock { $0 = redirectURL.text }
            return .finish("signed-in", page: .signedIn)
        }
        #expect(result == "signed-in")
        #expect(received.withLock { $0 } == url + "?token=grant-1&authMethod=EMAIL_MAGIC_LINK")
        let answers = try #require(browser.result())
        #expect(answers.map { $0?.status } == [404, 404, 200])
        let page = try #require(answers[2])
        #expect(page.body.contains("Signed in"))
        #expect(page.body.contains("close this tab"))
        #expect(!page.body.contains("grant-1"))
        #expect(page.head.contains("Cache-Control: no-store"))
        #expect(page.head.contains("Referrer-Policy: no-referrer"))
        #expect(log.all.contains(.ignoredRequest(status: 404)))
        #expect(log.all.contains(.redirectReceived))
        #expect(log.all.first == .listening(addresses: ["127.0.0.1"], port: port))
        #expect(ListenerFixture.isFree(port))
    }

    @Test("the redirect URL handed over keeps the configured base and the exact request target")
    func reconstructs() throws {
        let (listener, url) = try ListenerFixture.listener(host: "localhost", path: "/auth/callback")
        let port = listener.redirect.port
        let browser = Browser.Running {
            Browser.get("/auth/callback/?token=a%2Bb&login_type=GOOGLE#x", port: port, host: "localhost")
        }
        let result = try listener.wait { redirectURL -> RedirectDecision<Secret> in
            .finish(redirectURL, page: .signedIn)
        }
        #expect(result.text == url + "/?token=a%2Bb&login_type=GOOGLE#x")
        #expect(
            RedirectURL.evaluate(result.text, configured: url)
                == .exchange(grant: Secret("a+b"), endpoint: .oauthTokens))
        #expect(browser.result()??.status == 200)
    }

    @Test("localhost is also answered on ::1 where the system has IPv6")
    func ipv6() throws {
        guard ListenerFixture.hasIPv6Loopback() else { return }
        let (listener, _) = try ListenerFixture.listener(host: "localhost")
        let port = listener.redirect.port
        let browser = Browser.Running {
            Browser.get("/callback?token=g&login_type=APPLE", port: port, host: "localhost", family: AF_INET6)
        }
        let log = ProgressLog()
        let result = try listener.wait(progress: log.record) { _ -> RedirectDecision<Int> in
            .finish(6, page: .signedIn)
        }
        #expect(result == 6)
        #expect(browser.result()??.status == 200)
        #expect(log.all.first == .listening(addresses: ["127.0.0.1", "::1"], port: port))
    }

    @Test("127.0.0.1 is not answered on ::1")
    func ipv4Only() throws {
        let (listener, _) = try ListenerFixture.listener(host: "127.0.0.1")
        let port = listener.redirect.port
        #expect(Browser.connect(port: port, family: AF_INET6) == nil)
        listener.close()
    }

    @Test("a handler may answer and keep waiting, for a redirect that was not ours")
    func keepWaiting() throws {
        let (listener, _) = try ListenerFixture.listener()
        let port = listener.redirect.port
        let browser = Browser.Running { () -> [Browser.Answer?] in
            [
                Browser.get("/callback?error=oauth_failed", port: port),
                Browser.get("/callback?token=g&login_type=GOOGLE", port: port),
            ]
        }
        let calls = Mutex(0)
        let result = try listener.wait { _ -> RedirectDecision<Int> in
            let call = calls.withLock {
                $0 += 1; return $0
            }
            return call == 1
                ? .keepWaiting(page: .failed("Sign-in <failed> & stopped.")) : .finish(call, page: .signedIn)
        }
        #expect(result == 2)
        let answers = try #require(browser.result())
        #expect(answers[0]?.status == 400)
        #expect(answers[0]?.body.contains("Sign-in &lt;failed&gt; &amp; stopped.") == true)
        #expect(answers[1]?.status == 200)
    }

    @Test("an idle connection, such as a browser's speculative one, does not hold up the redirect")
    func idleConnection() throws {
        let (listener, _) = try ListenerFixture.listener()
        let port = listener.redirect.port
        let idle = try #require(Browser.connect(port: port))
        defer { close(idle) }
        let partial = try #require(Browser.connect(port: port))
        defer { close(partial) }
        _ = "GET /callback?token=slow".withCString { send(partial, $0, strlen($0), 0) }
        let browser = Browser.Running { Browser.get("/callback?token=g&login_type=GOOGLE", port: port) }
        let result = try listener.wait { url -> RedirectDecision<String> in .finish(url.text, page: .signedIn) }
        #expect(result.hasSuffix("?token=g&login_type=GOOGLE"))
        #expect(browser.result()??.status == 200)
    }

    @Test(
        """
        clients that trickle a byte every 40 ms hold up neither the redirect nor the timeout, and are closed at \
        their deadline
        """
    )
    func tricklingClients() throws {
        let (listener, _) = try ListenerFixture.listener(timeoutMilliseconds: 20_000, requestDeadlineMilliseconds: 1500)
        let port = listener.redirect.port
        // One finishes a request for another path and goes on sending; one never finishes its head.
        let answered = try #require(Browser.connect(port: port))
        defer { close(answered) }
        let endless = try #require(Browser.connect(port: port))
        defer { close(endless) }
        _ = "GET /favicon.ico HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".withCString {
            send(answered, $0, strlen($0), Int32(MSG_NOSIGNAL))
        }
        let trickler = Browser.Running { () -> Double? in
            let started = LoopbackRedirectListener.monotonicMilliseconds()
            var refusedAt: Double?
            while LoopbackRedirectListener.monotonicMilliseconds() - started < 6000 {
                _ = "x".withCString { send(answered, $0, 1, Int32(MSG_NOSIGNAL)) }
                if refusedAt == nil, "x".withCString({ send(endless, $0, 1, Int32(MSG_NOSIGNAL)) }) < 0 {
                    refusedAt = Double(LoopbackRedirectListener.monotonicMilliseconds() - started)
                }
                usleep(40_000)
            }
            return refusedAt
        }
        usleep(300_000)
        let started = LoopbackRedirectListener.monotonicMilliseconds()
        let browser = Browser.Running { Browser.get("/callback?token=g&login_type=GOOGLE", port: port) }
        let result = try listener.wait { url -> RedirectDecision<String> in .finish(url.text, page: .signedIn) }
        #expect(result.hasSuffix("?token=g&login_type=GOOGLE"))
        #expect(browser.result()??.status == 200)
        // Answering the trickler costs 0.7 s at most; a drain bounded by bytes alone would take minutes.
        #expect(LoopbackRedirectListener.monotonicMilliseconds() - started < 4000)

        // The never-finished head is cut off at its deadline while the listener still waits.
        let (second, _) = try ListenerFixture.listener(timeoutMilliseconds: 4000, requestDeadlineMilliseconds: 1000)
        // Measured from the connect: the listener accepts it later, and its deadline runs from then.
        let connectedAt = LoopbackRedirectListener.monotonicMilliseconds()
        let slow = try #require(Browser.connect(port: second.redirect.port))
        defer { close(slow) }
        let cutOff = Browser.Running { () -> Int64? in
            while LoopbackRedirectListener.monotonicMilliseconds() - connectedAt < 3500 {
                if "G".withCString({ send(slow, $0, 1, Int32(MSG_NOSIGNAL)) }) < 0 {
                    return LoopbackRedirectListener.monotonicMilliseconds() - connectedAt
                }
                var byte: UInt8 = 0
                if recv(slow, &byte, 1, Int32(MSG_DONTWAIT)) == 0 {
                    return LoopbackRedirectListener.monotonicMilliseconds() - connectedAt
                }
                usleep(40_000)
            }
            return nil
        }
        let waitStarted = LoopbackRedirectListener.monotonicMilliseconds()
        #expect(throws: RedirectListenerError.timedOut(milliseconds: 4000)) {
            try second.wait { _ -> RedirectDecision<Bool> in .finish(true, page: .signedIn) }
        }
        #expect(LoopbackRedirectListener.monotonicMilliseconds() - waitStarted < 5000)
        let closedAfter = try #require(cutOff.result() ?? nil)
        #expect(closedAfter >= 1000 && closedAfter < 3500)
        _ = trickler.result()
    }

    @Test("only GET on the redirect path reaches the handler")
    func methods() throws {
        let (listener, _) = try ListenerFixture.listener()
        let port = listener.redirect.port
        let browser = Browser.Running { () -> [Browser.Answer?] in
            [
                Browser.send(
                    "POST /callback?token=g&login_type=GOOGLE HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n",
                    port: port),
                Browser.send(
                    "HEAD /callback?token=g&login_type=GOOGLE HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", port: port),
                Browser.send("GET http://evil.example/callback HTTP/1.1\r\n\r\n", port: port),
                Browser.send("nonsense\r\n\r\n", port: port),
                Browser.get("/callback?token=g&login_type=GOOGLE", port: port),
            ]
        }
        let calls = Mutex(0)
        _ = try listener.wait { _ -> RedirectDecision<Bool> in
            calls.withLock { $0 += 1 }
            return .finish(true, page: .signedIn)
        }
        #expect(try #require(browser.result()).map { $0?.status } == [405, 405, 400, 400, 200])
        #expect(calls.withLock { $0 } == 1)
    }

    @Test("a request the strict reader refuses gets 400, reaches no handler, and waiting goes on")
    func strictReader() throws {
        let (listener, _) = try ListenerFixture.listener()
        let port = listener.redirect.port
        let target = "/callback?token=g&login_type=GOOGLE"
        let browser = Browser.Running { () -> [Browser.Answer?] in
            [
                Browser.send("GET \(target) HTTP/1.1\r\n\r\n", port: port),
                Browser.send("GET \(target) HTTP/1.1\nHost: 127.0.0.1\n\n", port: port),
                Browser.send("GET \(target) HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n", port: port),
                Browser.get(target, port: port),
            ]
        }
        let calls = Mutex(0)
        _ = try listener.wait { _ -> RedirectDecision<Bool> in
            calls.withLock { $0 += 1 }
            return .finish(true, page: .signedIn)
        }
        let answers = try #require(browser.result())
        #expect(answers.map { $0?.status } == [400, 400, 400, 200])
        #expect(answers[0]?.head.hasPrefix("HTTP/1.1 400 Bad Request\r\n") == true)
        #expect(calls.withLock { $0 } == 1)
    }

    @Test("a request past the size bound is refused and waiting goes on")
    func bounded() throws {
        let (listener, _) = try ListenerFixture.listener(maximumRequestBytes: 4096)
        let port = listener.redirect.port
        let browser = Browser.Running { () -> [Browser.Answer?] in
            [
                Browser.send(
                    "GET /callback?token=\(String(repeating: "x", count: 10_000)) HTTP/1.1\r\n\r\n", port: port),
                Browser.get("/callback?token=g&login_type=GOOGLE", port: port),
            ]
        }
        _ = try listener.wait { _ -> RedirectDecision<Bool> in .finish(true, page: .signedIn) }
        #expect(try #require(browser.result()).map { $0?.status } == [431, 200])
    }

    @Test("waiting stops at the timeout, with the port released")
    func timeout() throws {
        let (listener, _) = try ListenerFixture.listener(timeoutMilliseconds: 300, tickMilliseconds: 100)
        let port = listener.redirect.port
        let log = ProgressLog()
        #expect(throws: RedirectListenerError.timedOut(milliseconds: 300)) {
            _ = try listener.wait(progress: log.record) { _ -> RedirectDecision<Bool> in .finish(true, page: .signedIn)
            }
        }
        #expect(ListenerFixture.isFree(port))
        let remaining = log.all.compactMap { event -> Int64? in
            if case .waiting(let milliseconds) = event { return milliseconds }
            return nil
        }
        #expect(remaining.count >= 2)
        #expect(remaining == remaining.sorted(by: >))
    }

    @Test("the timeout follows the injected clock, not the wall")
    func injectedClock() throws {
        let clock = Mutex<Int64>(0)
        let (listener, _) = try ListenerFixture.listener(
            timeoutMilliseconds: 600_000,
            now: {
                clock.withLock {
                    $0 += 120_000; return $0
                }
            })
        let started = ContinuousClock.now
        #expect(throws: RedirectListenerError.timedOut(milliseconds: 600_000)) {
            _ = try listener.wait { _ -> RedirectDecision<Bool> in .finish(true, page: .signedIn) }
        }
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect(
            RedirectListenerError.timedOut(milliseconds: 600_000).message == "no sign-in arrived within 10 minutes")
    }

    @Test("a port in use is reported before anything else happens")
    func portInUse() throws {
        let (first, url) = try ListenerFixture.listener()
        defer { first.close() }
        let redirect = try #require(LoopbackRedirect(redirectURL: url))
        let error = #expect(throws: RedirectListenerError.self) {
            _ = try LoopbackRedirectListener(
                redirect: redirect, configuredRedirectURL: url,
                options: .init(timeoutMilliseconds: 1000, handlesInterrupts: false))
        }
        #expect(error == .cannotListen(address: "127.0.0.1", port: redirect.port, errorNumber: EADDRINUSE))
        #expect(error?.message == "could not listen on 127.0.0.1:\(redirect.port): the port is in use")
        #expect(error?.hint != nil)
    }
}

/// Signals are process-wide, so these tests run one at a time and are the only ones that ask
/// the listener to handle them.
@Suite("loopback redirect listener and Ctrl-C", .serialized)
struct LoopbackRedirectListenerInterruptTests {
    typealias Listener = LoopbackRedirectListener

    static func currentHandler(_ signal: Int32) -> UnsafeRawPointer? {
        var action = sigaction()
        sigaction(signal, nil, &action)
        return unsafeBitCast(action.__sigaction_handler.sa_handler, to: UnsafeRawPointer?.self)
    }

    @Test(
        "SIGINT stops waiting cleanly, releases the port and puts the previous handler back",
        arguments: [SIGINT, SIGTERM])
    func interrupted(signal: Int32) throws {
        let before = Self.currentHandler(signal)
        let (listener, _) = try ListenerFixture.listener(handlesInterrupts: true)
        let port = listener.redirect.port
        let error = #expect(throws: RedirectListenerError.self) {
            _ = try listener.wait(progress: { event in
                if case .listening = event {
                    // From another thread, as a terminal's Ctrl-C would arrive.
                    _ = Browser.Running { kill(getpid(), signal) }
                }
            }) { _ -> RedirectDecision<Bool> in .finish(true, page: .signedIn) }
        }
        #expect(error == .interrupted(signal: signal))
        #expect(ListenerFixture.isFree(port))
        #expect(Self.currentHandler(signal) == before)
    }

    @Test("a signal from before the wait does not stop the next one")
    func staleSignal() throws {
        let (first, _) = try ListenerFixture.listener(handlesInterrupts: true)
        #expect(throws: RedirectListenerError.self) {
            _ = try first.wait(progress: { event in
                if case .listening = event { _ = Browser.Running { kill(getpid(), SIGINT) } }
            }) { _ -> RedirectDecision<Bool> in .finish(true, page: .signedIn) }
        }
        let (second, _) = try ListenerFixture.listener(handlesInterrupts: true)
        let port = second.redirect.port
        let browser = Browser.Running { Browser.get("/callback?token=g&login_type=GOOGLE", port: port) }
        #expect(try second.wait { _ -> RedirectDecision<Int> in .finish(2, page: .signedIn) } == 2)
        #expect(browser.result()??.status == 200)
    }
}
