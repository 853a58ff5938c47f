import Basics
import Dispatch
import Glibc
import LocalHTTPServer
import PortalTokenCore
import Testing

/// A server in its streaming mode on a socket in a fresh private directory. Its handler reads
/// each body piece by piece, at most 1000 bytes at a time, and answers with the body's length
/// and its bytes, streamed in chunks.
final class StreamingServer: @unchecked Sendable {
    let directory: String
    let path: String
    let listener: Int32
    let server: LocalHTTPServer<Int>
    let done = DispatchSemaphore(value: 0)

    init(options: LocalHTTPServer<Int>.Options = .init(), readBody: Bool = true) throws {
        var template = Array("/tmp/local-http-stream.XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template))
        path = directory + "/sockets/test.sock"
        listener = try UnixSocketListener.listen(at: path)
        server = try LocalHTTPServer<Int>(
            listeners: [listener], options: options, accept: { _, index in index },
            stream: { request, exchange, _ in
                var body: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 1000)
                if readBody {
                    do {
                        while true {
                            let count = try buffer.withUnsafeMutableBytes { try exchange.read(into: $0) }
                            if count == 0 { break }
                            body += buffer[0..<count]
                        }
                    } catch {
                        return
                    }
                }
                let head = Array("\(request.method) \(request.target) \(body.count):".utf8)
                try? exchange.begin(status: 200, headers: [HTTPHeader("X-Test", "1")], contentLength: nil)
                try? head.withUnsafeBytes { try exchange.write($0) }
                try? body.withUnsafeBytes { try exchange.write($0) }
            })
        let server = self.server, done = self.done
        DispatchQueue.global().async {
            try? server.run()
            done.signal()
        }
    }

    func stop() {
        server.stop()
        done.wait()
        close(listener)
        _ = unlink(path)
        _ = rmdir(directory + "/sockets")
        _ = rmdir(directory)
    }
}

@Suite("the server's request-body streaming mode")
struct StreamingModeTests {
    @Test("a chunked body is read piece by piece; the answer streams in chunks; a pipelined request follows")
    func chunkedAndPipelined() throws {
        let running = try StreamingServer()
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

    @Test("a body far past the buffered mode's bound passes through, never read whole")
    func largeBody() throws {
        let running = try StreamingServer()
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

    @Test("Expect: 100-continue is answered when the handler first reads the body")
    func expectContinue() throws {
        let running = try StreamingServer()
        defer { running.stop() }
        let descriptor = try #require(RawClient.connect(running.path))
        defer { close(descriptor) }
        #expect(
            RawClient.send(
                descriptor,
                "POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n")
        )
        var chunk = [UInt8](repeating: 0, count: 64)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let count = recv(descriptor, &chunk, chunk.count, 0)
        #expect(String(decoding: chunk[0..<max(count, 0)], as: UTF8.self) == "HTTP/1.1 100 Continue\r\n\r\n")
        #expect(RawClient.send(descriptor, "abc"))
        let answer = RawClient.readAll(descriptor) ?? ""
        #expect(answer.contains("POST /c 3:") && answer.contains("\r\nabc\r\n"), "\(answer)")
    }

    @Test("a body the handler leaves unread closes the connection after the answer")
    func unreadBody() throws {
        let running = try StreamingServer(readBody: false)
        defer { running.stop() }
        let response = RawClient.exchange(
            running.path, "POST /d HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /e HTTP/1.1\r\n\r\n")
        let text = try #require(response)
        #expect(text.contains("Connection: close\r\n"))
        #expect(!text.contains("GET /e"))
    }

    @Test("malformed heads and chunk framing are refused as in the buffered mode")
    func malformed() throws {
        let running = try StreamingServer()
        defer { running.stop() }
        #expect(
            RawClient.status(of: RawClient.exchange(running.path, "GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n")) == 400)
        #expect(
            RawClient.status(
                of: RawClient.exchange(
                    running.path,
                    "GET / HTTP/1.1\r\nHost: x\r\nX: " + String(repeating: "a", count: 20_000) + "\r\n\r\n"))
                == 431)
        // A broken chunk is 400, and ends the connection.
        let broken = RawClient.exchange(
            running.path, "POST /f HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
        #expect(RawClient.status(of: broken) == 400)
    }

    @Test("a client that stops sending its body is dropped at the deadline")
    func stalledBody() throws {
        let running = try StreamingServer(options: .init(requestDeadlineMilliseconds: 300))
        defer { running.stop() }
        let descriptor = try #require(RawClient.connect(running.path))
        defer { close(descriptor) }
        #expect(RawClient.send(descriptor, "POST /g HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc"))
        #expect(RawClient.status(of: RawClient.readAll(descriptor)) == 408)
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
