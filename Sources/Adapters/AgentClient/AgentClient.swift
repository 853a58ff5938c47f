import Basics
import CPeerCredentials
import Glibc
import PortalTokenCore

/// One HTTP/1.1 exchange with the agent over its Unix socket (docs/agent.md, "Client mode"):
/// connect, send the request with `Connection: close`, read the answer, every step under one
/// deadline, so a dead, stopped or stalled agent is an error within the bound, never a hang.
///
/// Why not the libcurl transport: `token` and `get` in client mode run in every script loop, and
/// loading libcurl with the libraries it needs and initialising it takes about 5.7 ms on the
/// reference machine (a C program that dlopens libcurl.so.4 and calls curl_global_init and
/// curl_easy_init: 6.4 ms against 0.7 ms without, `hyperfine -N`), more than a whole client-mode
/// `token`. A request and an answer of this shape need a few dozen lines. The proxy of
/// `exec --proxy` in client mode, whose bodies stream, does use libcurl on the socket.
public enum AgentClient {
    /// The most an answer may hold: a Portal answer `api` takes through the agent's proxy
    /// (8 MiB) and its head.
    public static let maximumResponseBytes = HTTPTransportOptions.defaultMaximumResponseBytes + 65_536

    /// Sends `request` (its `url` is the target, such as `/v1/token`) to the socket at `path`.
    public static func exchange(socketPath path: String, request: HTTPRequest, timeoutMilliseconds: Int)
        throws(HTTPError) -> HTTPResponse
    {
        var deadline = MonotonicClock.milliseconds() + Int64(timeoutMilliseconds)
        var extended = false
        let name = "the agent at \(path)"
        let descriptor = try connectedSocket(path: path, deadline: deadline, timeoutMilliseconds: timeoutMilliseconds)
        defer { _ = close(descriptor) }

        var head = "\(request.method) \(request.url) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        for header in request.headers { head += "\(header.name): \(header.value)\r\n" }
        var bytes = Array(head.utf8)
        if let body = request.body {
            bytes += Array("Content-Length: \(body.count)\r\n\r\n".utf8) + body
        } else {
            bytes += Array("\r\n".utf8)
        }
        defer { zeroize(&bytes) }
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent > 0 {
                offset += sent
                continue
            }
            if sent < 0, errno == EINTR { continue }
            guard sent < 0, errno == EAGAIN || errno == EWOULDBLOCK else {
                throw .other(host: name, detail: "the connection was closed while sending")
            }
            guard wait(descriptor, for: Int16(POLLOUT), until: deadline) else {
                throw .timedOut(host: name, milliseconds: timeoutMilliseconds)
            }
        }

        var response: [UInt8] = []
        defer { zeroize(&response) }
        var chunk = [UInt8](repeating: 0, count: 16_384)
        defer { zeroize(&chunk) }
        while true {
            if let parsed = try parse(response, complete: false, name: name) {
                guard (100..<200).contains(parsed.status) else { return parsed }
                // The agent asks its user first (docs/agent.md, "Asking the user"): the wait it
                // names, and the usual bound after it.
                // Once: a stream of interim answers cannot hold the client without end.
                if !extended,
                    let waited = parsed.headers.value(for: HTTPHeader.askingMilliseconds).flatMap({ Int64($0) }),
                    waited > 0, waited <= 3_600_000
                {
                    extended = true
                    deadline = max(deadline, MonotonicClock.milliseconds() + waited + Int64(timeoutMilliseconds))
                }
                response.removeSubrange(..<(headEnd(response)! + 4))
                continue
            }
            let count = recv(descriptor, &chunk, chunk.count, 0)
            if count > 0 {
                response += chunk[0..<count]
                guard response.count <= maximumResponseBytes else {
                    throw .responseTooLarge(host: name, limitBytes: maximumResponseBytes)
                }
                continue
            }
            if count == 0 {
                if let parsed = try parse(response, complete: true, name: name) { return parsed }
                throw .other(host: name, detail: "the agent closed the connection without an answer")
            }
            if errno == EINTR { continue }
            guard errno == EAGAIN || errno == EWOULDBLOCK else {
                throw .other(host: name, detail: "the connection failed while reading")
            }
            guard wait(descriptor, for: Int16(POLLIN), until: deadline) else {
                throw .timedOut(host: name, milliseconds: timeoutMilliseconds)
            }
        }
    }

    /// A socket connected to the agent at `path`: non-blocking, close-on-exec, for the caller to
    /// close. Connecting waits for room in a full backlog until `timeoutMilliseconds` have passed.
    /// Nothing is sent to a listener of another uid (`SO_PEERCRED`): a socket at a mistyped or
    /// shared path, bound by another user, is an error, not an agent.
    public static func connectedSocket(path: String, timeoutMilliseconds: Int) throws(HTTPError) -> Int32 {
        try connectedSocket(
            path: path, deadline: MonotonicClock.milliseconds() + Int64(timeoutMilliseconds),
            timeoutMilliseconds: timeoutMilliseconds)
    }

    private static func connectedSocket(path: String, deadline: Int64, timeoutMilliseconds: Int) throws(HTTPError)
        -> Int32
    {
        let name = "the agent at \(path)"
        guard path.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
            throw .cannotConnect(host: name)
        }
        let descriptor = socket(
            AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard descriptor >= 0 else { throw .cannotConnect(host: name) }
        var connectedOrClosed = false
        defer { if !connectedOrClosed { _ = close(descriptor) } }

        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if connected != 0 {
            // A full backlog answers EAGAIN: wait for room until the deadline.
            guard errno == EAGAIN || errno == EINPROGRESS else { throw .cannotConnect(host: name) }
            guard wait(descriptor, for: Int16(POLLOUT), until: deadline) else {
                throw .connectTimedOut(host: name, milliseconds: timeoutMilliseconds)
            }
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &error, &length)
            guard error == 0 else { throw .cannotConnect(host: name) }
        }
        var peer = portal_token_peer_credentials()
        guard portal_token_read_peer_credentials(descriptor, &peer) == 0 else {
            throw .other(host: name, detail: "the uid of the process listening on it could not be read")
        }
        guard OwnUser.isListener(uid: peer.uid) else {
            throw .other(
                host: name,
                detail: "another user (uid \(peer.uid)) listens on the socket: it is not this user's agent")
        }
        connectedOrClosed = true
        return descriptor
    }

    private static func wait(_ descriptor: Int32, for events: Int16, until deadline: Int64) -> Bool {
        while true {
            let left = deadline - MonotonicClock.milliseconds()
            guard left > 0 else { return false }
            var entry = pollfd(fd: descriptor, events: events, revents: 0)
            let ready = poll(&entry, 1, Int32(clamping: left))
            if ready > 0 { return true }
            if ready < 0, errno != EINTR { return false }
        }
    }

    /// The answer once it is whole: its head read and `Content-Length` bytes of body (or, with
    /// no length, everything up to the close). Nil while more is needed.
    static func parse(_ bytes: [UInt8], complete: Bool, name: String) throws(HTTPError) -> HTTPResponse? {
        guard let end = headEnd(bytes) else {
            if complete { throw .other(host: name, detail: "the agent's answer was cut short") }
            return nil
        }
        let lines = bytes[..<end].split(separator: 0x0A).map { line in
            String(decoding: line.last == 0x0D ? line.dropLast() : line, as: UTF8.self)
        }
        guard let statusLine = lines.first, statusLine.hasPrefix("HTTP/1."),
            let status = Int(statusLine.dropFirst(9).prefix(3))
        else { throw .other(host: name, detail: "the agent's answer is not HTTP") }
        var headers: [HTTPHeader] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append(HTTPHeader(String(line[..<colon]), line[line.index(after: colon)...].trimmingWhitespace))
        }
        let bodyStart = end + 4
        // An interim answer has no body: the real one follows it.
        if (100..<200).contains(status) {
            return HTTPResponse(status: status, headers: headers, body: [], effectiveURL: "unix:")
        }
        if let lengthText = headers.value(for: "Content-Length"), let length = Int(lengthText) {
            guard bytes.count - bodyStart >= length else {
                if complete { throw .other(host: name, detail: "the agent's answer was cut short") }
                return nil
            }
            return HTTPResponse(
                status: status, headers: headers, body: Array(bytes[bodyStart..<bodyStart + length]),
                effectiveURL: "unix:")
        }
        guard complete else { return nil }
        return HTTPResponse(status: status, headers: headers, body: Array(bytes[bodyStart...]), effectiveURL: "unix:")
    }

    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 0x0D && bytes[index + 1] == 0x0A && bytes[index + 2] == 0x0D && bytes[index + 3] == 0x0A {
            return index
        }
        return nil
    }
}
