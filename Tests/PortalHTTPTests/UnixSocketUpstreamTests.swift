import Foundation
import Glibc
import PortalHTTP
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// The streaming transport sent to a Unix socket (client mode's `exec --proxy`, whose upstream is
/// the agent): the listener must run as this user, by the kernel's word on the connection made.
@Suite("the streaming transport on a Unix socket", .serialized)
struct UnixSocketUpstreamTests {
    /// Answers every connection `200 {"ok":true}` and records what it read.
    static let listener = #"""
        import socket, sys
        path, received = sys.argv[1], sys.argv[2]
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        server.listen(8)
        print("listening", file=sys.stderr, flush=True)
        while True:
            connection, _ = server.accept()
            connection.settimeout(1)
            data = b""
            try:
                while b"\r\n\r\n" not in data:
                    chunk = connection.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            except socket.timeout:
                pass
            with open(received, "ab") as out:
                out.write(data)
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nConnection: close\r\n\r\n{\"ok\":true}")
            connection.close()
        """#

    final class Collected: HTTPResponseSink {
        var status = 0
        var body: [UInt8] = []
        func begin(status: Int, headers: [HTTPHeader], contentLength: Int?) throws { self.status = status }
        func write(_ bytes: UnsafeRawBufferPointer) throws { body += bytes }
    }

    func exchange(_ socket: String) throws(HTTPError) -> Collected {
        var options = HTTPTransportOptions()
        options.unixSocketPath = socket
        let sink = Collected()
        let request = StreamedHTTPRequest(
            method: "GET", url: "http://localhost/api/v3/clients/me",
            headers: [HTTPHeader("X-Canary", "unix-canary")], authorization: nil, body: nil, bodyLength: nil)
        _ = try CurlStreamingTransport(options: options).exchange(request, into: sink)
        return sink
    }

    func start(as uid: UInt32?) throws -> (RunningProcess, socket: String, received: String) {
        var template = Array("/tmp/portal-token-unix-upstream.XXXXXX".utf8CString)
        let directory = String(cString: mkdtemp(&template))
        chmod(directory, 0o755)
        if let uid { chown(directory, uid, uid) }
        let socket = directory + "/agent.sock"
        let received = directory + "/received"
        let python = ["/usr/bin/python3", "-c", Self.listener, socket, received]
        let command =
            uid.map { ["/usr/bin/setpriv", "--reuid=\($0)", "--regid=\($0)", "--clear-groups"] + python } ?? python
        let process = try RunningProcess(command[0], Array(command.dropFirst()), environment: ["PATH": "/usr/bin:/bin"])
        try process.waitForStderr(containing: "listening")
        return (process, socket, received)
    }

    @Test("a listener of this user is sent the request and answers it")
    func ownListener() throws {
        let (process, socket, received) = try start(as: nil)
        defer { process.signal(SIGKILL) }
        let answer = try exchange(socket)
        #expect(answer.status == 200 && answer.body == Array(#"{"ok":true}"#.utf8))
        let seen = (try? String(contentsOfFile: received, encoding: .utf8)) ?? ""
        #expect(seen.hasPrefix("GET /api/v3/clients/me HTTP/1.1\r\n") && seen.contains("X-Canary: unix-canary"))
    }

    @Test("a listener of another uid is refused once connected, before a byte of the request is sent")
    func foreignListener() throws {
        let (process, socket, received) = try start(as: 65534)
        defer { process.signal(SIGKILL) }
        #expect {
            _ = try exchange(socket)
        } throws: { error in
            guard case .foreignListener(let endpoint) = error as? HTTPError else { return false }
            return endpoint == socket
        }
        usleep(300_000)
        let seen = (try? String(contentsOfFile: received, encoding: .utf8)) ?? ""
        #expect(!seen.contains("unix-canary"), "the listener received: \(seen)")
    }
}
