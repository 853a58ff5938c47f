import Basics
import Dispatch
import Glibc
import LocalHTTPServer
import PeerCredentials
import PortalTokenCore
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

    /// Reads until the server closes; nil when it had not closed after 10 s.
    static func readAll(_ descriptor: Int32) -> String? {
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        while true {
            let count = recv(descriptor, &chunk, chunk.count, 0)
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

/// A server on a socket in a fresh private directory, run on a thread of its own.
final class RunningServer: @unchecked Sendable {
    let directory: String
    let path: String
    let listener: Int32
    let server: LocalHTTPServer<Int>
    let done = DispatchSemaphore(value: 0)

    init(
        options: LocalHTTPServer<Int>.Options = .init(),
        handle: @escaping (HTTPServerRequest, Int) -> HTTPServerResponse = RunningServer.echo
    ) throws {
        var template = Array("/tmp/local-http-test.XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template))
        path = directory + "/sockets/test.sock"
        listener = try UnixSocketListener.listen(at: path)
        server = try LocalHTTPServer<Int>(
            listeners: [listener], options: options, accept: { _, index in index },
            handle: handle)
        let server = self.server, done = self.done
        DispatchQueue.global().async {
            try? server.run()
            done.signal()
        }
    }

    /// Answers with the method, the path and the body it read.
    static func echo(_ request: HTTPServerRequest, _ listener: Int) -> HTTPServerResponse {
        HTTPServerResponse(
            status: 200, body: Array("\(request.method) \(request.path) ".utf8) + request.body)
    }

    func stop() {
        server.stop()
        done.wait()
        close(listener)
        unlink(path)
        rmdir(directory + "/sockets")
        rmdir(directory)
    }
}

@Suite("the local HTTP server")
struct LocalHTTPServerTests {
    @Test("it answers a request with Content-Length, and a second one on the same connection")
    func keepAlive() throws {
        let running = try RunningServer()
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

    @Test("a chunked request body is decoded, and Expect: 100-continue is answered before the body comes")
    func chunkedAndContinue() throws {
        let running = try RunningServer()
        defer { running.stop() }
        let descriptor = try #require(RawClient.connect(running.path))
        defer { close(descriptor) }
        #expect(
            RawClient.send(
                descriptor,
                "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n"
                    + "Connection: close\r\n\r\n"))
        var chunk = [UInt8](repeating: 0, count: 100)
        let count = recv(descriptor, &chunk, chunk.count, 0)
        #expect(String(decoding: chunk[0..<max(0, count)], as: UTF8.self) == "HTTP/1.1 100 Continue\r\n\r\n")
        #expect(RawClient.send(descriptor, "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"))
        #expect(RawClient.readAll(descriptor)?.hasSuffix("\r\n\r\nPOST /c abcde") == true)
    }

    @Test("a streamed answer goes out chunked to HTTP/1.1 and until the close to HTTP/1.0")
    func streamed() throws {
        let running = try RunningServer { _, _ in
            HTTPServerResponse(status: 200) { write in
                try write(Array("hello ".utf8))
                try write(Array("world".utf8))
            }
        }
        defer { running.stop() }
        let chunked = RawClient.exchange(running.path, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(
            chunked
                == "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                + "6\r\nhello \r\n5\r\nworld\r\n0\r\n\r\n")
        let plain = RawClient.exchange(running.path, "GET / HTTP/1.0\r\n\r\n")
        #expect(plain == "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello world")
    }

    @Test("malformed and oversized requests get 400, 431 and 413, and the server keeps serving")
    func refusals() throws {
        let running = try RunningServer(
            options: .init(limits: HTTPRequestLimits(maximumHeadBytes: 1024, maximumBodyBytes: 100)))
        defer { running.stop() }
        #expect(RawClient.status(of: RawClient.exchange(running.path, "NOT HTTP AT ALL\r\n\r\n")) == 400)
        #expect(RawClient.status(of: RawClient.exchange(running.path, "GET / HTTP/1.1\r\n\r\n")) == 400)
        let bigHead = "GET / HTTP/1.1\r\nHost: x\r\nX: " + String(repeating: "a", count: 2000) + "\r\n\r\n"
        #expect(RawClient.status(of: RawClient.exchange(running.path, bigHead)) == 431)
        let bigBody = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n" + String(repeating: "b", count: 101)
        #expect(RawClient.status(of: RawClient.exchange(running.path, bigBody)) == 413)
        let garbage = String(decoding: (0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 37) }, as: UTF8.self)
        #expect([400, 431].contains(RawClient.status(of: RawClient.exchange(running.path, garbage)) ?? 0))
        let after = RawClient.exchange(running.path, "GET /still HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(after?.hasSuffix("GET /still ") == true)
    }

    @Test("a silent client and a trickling one are dropped at their deadline while others are served")
    func deadlines() throws {
        let running = try RunningServer(options: .init(requestDeadlineMilliseconds: 300))
        defer { running.stop() }
        let silent = try #require(RawClient.connect(running.path))
        defer { close(silent) }
        let trickling = try #require(RawClient.connect(running.path))
        defer { close(trickling) }
        let trickle = DispatchQueue(label: "trickle")
        trickle.async {
            for byte in "GET /slow HTTP/1.1\r\nHost: x\r\n" {
                guard RawClient.send(trickling, String(byte)) else { return }
                usleep(50_000)
            }
        }
        // Another client is answered meanwhile.
        let other = RawClient.exchange(running.path, "GET /other HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(other?.hasSuffix("GET /other ") == true)
        // The silent one is closed with no answer (nil would be the test's own read giving up);
        // the trickling one is told 408.
        #expect(RawClient.readAll(silent) == "")
        #expect(RawClient.status(of: RawClient.readAll(trickling)) == 408)
    }

    @Test("200 clients at once are each answered with their own request")
    func concurrentClients() throws {
        let running = try RunningServer()
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

    @Test("the accept hook hears which listener took the connection, and nil closes it unanswered")
    func acceptHook() throws {
        var template = Array("/tmp/local-http-test.XXXXXX".utf8CString)
        let directory = String(cString: mkdtemp(&template))
        defer { rmdir(directory) }
        let first = try UnixSocketListener.listen(at: directory + "/a.sock")
        let second = try UnixSocketListener.listen(at: directory + "/b.sock")
        defer {
            close(first)
            close(second)
            unlink(directory + "/a.sock")
            unlink(directory + "/b.sock")
        }
        let server = try LocalHTTPServer<Int>(
            listeners: [first, second], accept: { _, index in index == 1 ? nil : index },
            handle: { _, index in .text(200, "listener \(index)") })
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            try? server.run()
            done.signal()
        }
        let answered = RawClient.exchange(
            directory + "/a.sock", "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        #expect(answered?.hasSuffix("listener 0\n") == true)
        // Closed unanswered: the client reads the end of the stream (nil would be its read timing out).
        let refused = try #require(RawClient.connect(directory + "/b.sock"))
        #expect(RawClient.readAll(refused) == "")
        close(refused)
        server.stop()
        done.wait()
    }

    @Test("with an idle exit, run returns once no connection has been open for that long")
    func idleExit() throws {
        let running = try RunningServer(options: .init(idleExitMilliseconds: 200))
        running.done.wait()
        close(running.listener)
        unlink(running.path)
        rmdir(running.directory + "/sockets")
        rmdir(running.directory)
    }

    @Test("the socket is 0600 in a 0700 directory; a stale socket is replaced, a live one or a foreign file is not")
    func socketFiles() throws {
        let running = try RunningServer()
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
    @Test("a client of this process is this process: its uid, pid, user namespace, cgroup and executable")
    func identifiesItself() throws {
        var template = Array("/tmp/peer-test.XXXXXX".utf8CString)
        let directory = String(cString: mkdtemp(&template))
        let path = directory + "/peer.sock"
        let listener = try UnixSocketListener.listen(at: path)
        defer {
            close(listener)
            unlink(path)
            rmdir(directory)
        }
        let client = try #require(RawClient.connect(path))
        defer { close(client) }
        var readable = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        _ = poll(&readable, 1, 5000)
        let accepted = accept(listener, nil, nil)
        #expect(accepted >= 0)
        defer { close(accepted) }
        let identity = try #require(PeerCredentials.identify(accepted))
        #expect(identity.uid == getuid())
        #expect(identity.gid == getgid())
        #expect(identity.pid == getpid())
        #expect(identity.pidVerified)
        #expect(identity.sameUserNamespace == true)
        #expect(identity.cgroup?.hasPrefix("/") == true)
        let executable = try #require(identity.executable)
        #expect(executable.hasSuffix(".xctest") || executable.contains("portal-token"))
    }
}
