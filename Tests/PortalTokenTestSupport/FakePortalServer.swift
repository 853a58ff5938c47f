import Basics
import Foundation
import Glibc
import PortalTokenCore
import Synchronization

/// A loopback stand-in for Portal's API that follows docs/portal-api.md and is strict about it.
///
/// It listens on 127.0.0.1 on an ephemeral port, serves each connection on a thread of its own
/// (one request per connection, `Connection: close`), and records every request. Before any
/// route runs it checks the request against (docs/portal-api.md, "Headers"):
/// `Accept` and `Content-Type` are `application/json`; `X-Portal-Trace-Id` is a lowercase UUIDv4
/// never seen before; `Content-Length` is present exactly when there is a body; `User-Agent`
/// names portal-token; and `Authorization` is `Bearer <token>` where the route requires it and
/// absent where the route forbids it. A request that breaks a rule is recorded as a violation
/// and answered 400, so that a test fails loudly rather than passing by luck.
///
/// Routes are a table (`addRoute`); it starts with `GET /api/v3/clients/me` (docs/portal-api.md, "The session token's
/// life").
public final class FakePortalServer: Sendable {
    public struct Request: Sendable, CustomStringConvertible {
        public var method: String
        public var path: String
        /// The raw query, without the `?`, when there was one.
        public var query: String?
        public var headers: [HTTPHeader]
        public var body: [UInt8]

        public func header(_ name: String) -> String? { headers.value(for: name) }
        public func headerCount(_ name: String) -> Int {
            headers.filter { $0.name.lowercased() == name.lowercased() }.count
        }
        /// The token of `Authorization: Bearer <token>`, when that is the header.
        public var bearerToken: String? {
            guard let value = header("Authorization"), value.hasPrefix("Bearer ") else { return nil }
            let token = String(value.dropFirst("Bearer ".count))
            return token.isEmpty ? nil : token
        }
        public var description: String { "\(method) \(path)" }
    }

    public struct Response: Sendable {
        public var status: Int
        public var headers: [HTTPHeader]
        public var body: [UInt8]

        public init(status: Int, headers: [HTTPHeader] = [], body: [UInt8] = []) {
            self.status = status
            self.headers = headers
            self.body = body
        }

        public static func json(_ status: Int, _ text: String) -> Response {
            Response(status: status, headers: [HTTPHeader("Content-Type", "application/json")], body: Array(text.utf8))
        }

        /// A `302 Found` to `location`, as an OAuth provider sends the browser back.
        public static func redirect(to location: String) -> Response {
            Response(
                status: 302, headers: [HTTPHeader("Location", location), HTTPHeader("Content-Type", "text/html")],
                body: Array("<a href=\"\(location)\">continue</a>".utf8))
        }
    }

    public enum BearerRule: Sendable {
        /// `Authorization: Bearer <token>` must be present.
        case required
        /// No `Authorization` header at all.
        case forbidden
        /// Either; the route decides.
        case optional
    }

    /// How the server answers, whatever the route.
    public enum Behaviour: Sendable {
        case normal
        /// Check and record the request, then answer 500.
        case internalServerError
        /// Record the request and never answer; the connection is held until the client gives up.
        case stall
    }

    public struct Violation: Sendable, CustomStringConvertible {
        public var request: String
        public var rule: String
        public var description: String { "\(request): \(rule)" }
    }

    public typealias Handler = @Sendable (Request, FakePortalServer) -> Response

    struct Route: Sendable {
        var method: String
        var path: String
        var bearer: BearerRule
        /// False for routes a browser visits (the fake OAuth provider), which send no Portal headers.
        var isPortalAPI: Bool
        var handler: Handler
    }

    struct State {
        var routes: [Route] = []
        var requests: [Request] = []
        var violations: [Violation] = []
        var traceIDs: Set<String> = []
        var liveTokens: [String: String] = [:]
        var behaviour: Behaviour = .normal
        var stopped = false
        /// The accept thread has closed the listener: its number may be another socket's now.
        var listenerClosed = false
        var connections = 0
        var largeBodies = false
    }

    public let port: UInt16
    /// Whether requests are checked against the header rules; off only for clients, such as a
    /// benchmark's plain curl, that do not send portal-token's headers.
    public let isStrict: Bool
    private let listener: Int32
    let state = Mutex(State())

    public var baseURL: String { "http://127.0.0.1:\(port)" }

    public init(port: UInt16 = 0, strict: Bool = true) throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw FakeServerError("socket", errno) }
        var reuse: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(descriptor, 128) == 0 else {
            let error = errno
            close(descriptor)
            throw FakeServerError("bind/listen", error)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        self.port = UInt16(bigEndian: address.sin_port)
        self.listener = descriptor
        self.isStrict = strict
        addRoute("GET", "/api/v3/clients/me", bearer: .required) { request, server in
            server.clientsMe(request)
        }
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "fake-portal-accept"
        thread.start()
    }

    /// Stops accepting; requests in flight finish, stalled ones are released. The accept thread
    /// keeps the server alive until this is called, so every test calls it.
    public func stop() {
        // Wakes the accept thread, which closes the descriptor itself: closing it here could
        // let another server reuse the number while that thread is still about to accept. Both
        // happen under the lock, and not after the close: a shutdown of a number the accept
        // thread has closed would end whatever socket of the test process has it now.
        state.withLock { state in
            guard !state.stopped else { return }
            state.stopped = true
            if !state.listenerClosed { shutdown(listener, Int32(SHUT_RDWR)) }
        }
    }

    /// Closes the listener, once, under the lock `stop` shuts it down under.
    private func closeListener() {
        state.withLock { state in
            guard !state.listenerClosed else { return }
            state.listenerClosed = true
            close(listener)
        }
    }

    // MARK: Configuration

    /// Adds or replaces the route for `method` and `path` (the path without a query).
    /// `isPortalAPI: false` exempts the route from the header rules, for pages a browser visits.
    public func addRoute(
        _ method: String, _ path: String, bearer: BearerRule, isPortalAPI: Bool = true,
        handler: @escaping Handler
    ) {
        state.withLock { state in
            state.routes.removeAll { $0.method == method && $0.path == path }
            state.routes.append(
                Route(method: method, path: path, bearer: bearer, isPortalAPI: isPortalAPI, handler: handler))
        }
    }

    /// Records that a request broke a rule a route checks itself (a body's shape, an encoding).
    public func recordViolation(_ request: Request, _ rule: String) {
        state.withLock { $0.violations.append(Violation(request: request.description, rule: rule)) }
    }

    /// A token `/clients/me` accepts, and the client id it answers with.
    public func registerLiveToken(_ token: String, clientID: String = "client-1") {
        state.withLock { $0.liveTokens[token] = clientID }
    }

    /// From now on the token gets 401, as a session Portal ended does.
    public func revoke(_ token: String) {
        _ = state.withLock { $0.liveTokens.removeValue(forKey: token) }
    }

    /// From now on `/clients/me` answers 401, each answer held until `count` requests are in (or
    /// `seconds` have passed), so that every one of a burst of concurrent callers sees the 401.
    /// Returns the count of the requests that arrived.
    @discardableResult
    public func holdUnauthorized(until count: Int, seconds: Double = 20) -> Locked<Int> {
        let arrived = Locked(0)
        addRoute("GET", "/api/v3/clients/me", bearer: .required) { _, _ in
            arrived.update { $0 += 1 }
            let deadline = Date().addingTimeInterval(seconds)
            while arrived.value < count && Date() < deadline { usleep(1000) }
            return .json(401, #"{"error":"Unauthorized"}"#)
        }
        return arrived
    }

    public var behaviour: Behaviour {
        get { state.withLock { $0.behaviour } }
        set { state.withLock { $0.behaviour = newValue } }
    }

    // MARK: What happened

    public var requests: [Request] { state.withLock { $0.requests } }
    /// Every connection accepted, whether a request came on it or not.
    public var connectionCount: Int { state.withLock { $0.connections } }

    /// Serves the large-body routes (FakePortalServer+LargeBodies.swift) from now on.
    public func enableLargeBodies() { state.withLock { $0.largeBodies = true } }
    public var violations: [Violation] { state.withLock { $0.violations } }

    // MARK: Routes

    /// `GET /api/v3/clients/me` (docs/portal-api.md, "The session token's life"): the client as a top-level object, no
    /// `data` envelope.
    func clientsMe(_ request: Request) -> Response {
        guard let token = request.bearerToken,
            let clientID = state.withLock({ $0.liveTokens[token] })
        else {
            return .json(401, #"{"error":"Unauthorized"}"#)
        }
        return .json(200, Self.clientJSON(clientID: clientID))
    }

    public static func clientJSON(clientID: String) -> String {
        """
        {"id":"\(clientID)","createdAt":"2025-01-06T10:00:00.000Z",\
        "custodian":{"id":"custodian-1","name":"Fake Custodian"},\
        "environment":{"id":"environment-1","name":"Test","backupWithPortalEnabled":true,"isMultiBackupEnabled":false},\
        "ejectedAt":null,"isAccountAbstracted":false,\
        "metadata":{"namespaces":{"eip155":{"address":"0x1111111111111111111111111111111111111111",\
        "curve":"SECP256K1"},\
        "solana":{"address":"So1anaAddre55111111111111111111111111111111","curve":"ED25519"}}},\
        "wallets":[]}
        """
    }

    // MARK: Serving

    private func acceptLoop() {
        while true {
            let connection = accept(listener, nil, nil)
            if connection < 0 {
                if errno == EINTR { continue }
                closeListener()
                return
            }
            let stopped = state.withLock { state in
                state.connections += 1
                return state.stopped
            }
            if stopped {
                close(connection)
                closeListener()
                return
            }
            _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let thread = Thread { [self] in
                serve(connection)
                close(connection)
            }
            thread.start()
        }
    }

    private func serve(_ connection: Int32) {
        guard let (head, rest) = readHead(connection) else {
            write(.json(400, #"{"error":"fake server: unreadable request"}"#), to: connection)
            return
        }
        if state.withLock({ $0.largeBodies }), Self.largeBodyPaths.contains(head.path) {
            serveLargeBody(head, rest, connection)
            return
        }
        guard let request = readBody(head, rest, connection) else {
            write(.json(400, #"{"error":"fake server: unreadable request"}"#), to: connection)
            return
        }
        let (behaviour, route) = state.withLock { state in
            state.requests.append(request)
            return (state.behaviour, state.routes.first { $0.method == request.method && $0.path == request.path })
        }
        if behaviour == .stall {
            holdUntilClosed(connection)
            return
        }
        let problems = isStrict && route?.isPortalAPI != false ? check(request, bearer: route?.bearer ?? .optional) : []
        if !problems.isEmpty {
            state.withLock { state in
                for problem in problems {
                    state.violations.append(Violation(request: request.description, rule: problem))
                }
            }
            let text = problems.joined(separator: "; ").replacingOccurrences(of: "\"", with: "'")
            write(.json(400, #"{"error":"fake server: \#(text)"}"#), to: connection)
            return
        }
        if behaviour == .internalServerError {
            write(.json(500, #"{"error":"Internal Server Error"}"#), to: connection)
            return
        }
        guard let route else {
            write(.json(404, #"{"error":"Not Found"}"#), to: connection)
            return
        }
        write(route.handler(request, self), to: connection)
    }

    /// The rules every request must keep; an empty list when it keeps them all.
    func check(_ request: Request, bearer: BearerRule) -> [String] {
        var problems: [String] = []
        for name in ["Accept", "Content-Type", "X-Portal-Trace-Id", "User-Agent", "Authorization", "Content-Length"]
        where request.headerCount(name) > 1 {
            problems.append("\(name) sent more than once")
        }
        if request.header("Accept") != "application/json" { problems.append("Accept is not application/json") }
        if request.header("Content-Type") != "application/json" {
            problems.append("Content-Type is not application/json")
        }
        if !(request.header("User-Agent") ?? "").hasPrefix("portal-token/") {
            problems.append("User-Agent does not name portal-token")
        }
        if let traceID = request.header("X-Portal-Trace-Id") {
            if !TraceID.isValid(traceID) { problems.append("X-Portal-Trace-Id is not a lowercase UUIDv4") }
            let repeated = state.withLock { !$0.traceIDs.insert(traceID).inserted }
            if repeated { problems.append("X-Portal-Trace-Id was used before") }
        } else {
            problems.append("X-Portal-Trace-Id is missing")
        }
        if request.body.isEmpty {
            if request.header("Content-Length") != nil { problems.append("Content-Length sent without a body") }
        } else if request.header("Content-Length") == nil {
            problems.append("a body without Content-Length")
        }
        if request.header("Transfer-Encoding") != nil { problems.append("Transfer-Encoding is not expected") }
        switch bearer {
        case .required:
            if request.bearerToken == nil { problems.append("Authorization: Bearer is required here") }
        case .forbidden:
            if request.header("Authorization") != nil { problems.append("Authorization must not be sent here") }
        case .optional:
            break
        }
        return problems
    }

    private func readBody(_ head: Request, _ rest: [UInt8], _ connection: Int32) -> Request? {
        var request = head
        var body = rest
        var chunk = [UInt8](repeating: 0, count: 16_384)
        if let lengthText = request.headers.value(for: "Content-Length") {
            guard let length = Int(lengthText), length >= 0, length <= 8_388_608 else { return nil }
            while body.count < length {
                let count = chunk.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { return nil }
                body += chunk[0..<count]
            }
            body = Array(body.prefix(length))
        }
        request.body = body
        return request
    }

    /// Reads a request's head; the bytes after it (the start of the body) come back beside it.
    func readHead(_ connection: Int32) -> (Request, [UInt8])? {
        var buffer: [UInt8] = []
        let terminator: [UInt8] = Array("\r\n\r\n".utf8)
        var headerEnd: Int?
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while headerEnd == nil {
            let count = chunk.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return nil }
            let searchFrom = max(0, buffer.count - 3)
            buffer += chunk[0..<count]
            guard buffer.count <= 65_536 else { return nil }
            if buffer.count >= 4 {
                for index in searchFrom...(buffer.count - 4) where Array(buffer[index..<index + 4]) == terminator {
                    headerEnd = index
                    break
                }
            }
        }
        guard let headerEnd,
            let head = String(validating: buffer[0..<headerEnd], as: UTF8.self)
        else { return nil }
        var lines = head.components(separatedBy: "\r\n")
        let requestLine = lines.removeFirst().split(separator: " ", omittingEmptySubsequences: false)
        guard requestLine.count == 3, requestLine[2].hasPrefix("HTTP/1.") else { return nil }
        let target = String(requestLine[1])
        var path = target, query: String?
        if let mark = target.firstIndex(of: "?") {
            path = String(target[..<mark])
            query = String(target[target.index(after: mark)...])
        }
        var headers: [HTTPHeader] = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { return nil }
            headers.append(HTTPHeader(String(line[..<colon]), line[line.index(after: colon)...].trimmingWhitespace))
        }
        let rest = Array(buffer[(headerEnd + 4)...])
        return (Request(method: String(requestLine[0]), path: path, query: query, headers: headers, body: []), rest)
    }

    func write(_ response: Response, to connection: Int32) {
        var head = "HTTP/1.1 \(response.status) \(Self.reason(response.status))\r\n"
        var headers = response.headers
        if headers.value(for: "Content-Type") == nil { headers.append(HTTPHeader("Content-Type", "application/json")) }
        for header in headers { head += "\(header.name): \(header.value)\r\n" }
        head += "Content-Length: \(response.body.count)\r\nConnection: close\r\n\r\n"
        let bytes = Array(head.utf8) + response.body
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent < 0, errno == EINTR { continue }
            guard sent > 0 else { return }
            offset += sent
        }
    }

    /// Waits, answering nothing, until the client closes the connection or the server stops.
    private func holdUntilClosed(_ connection: Int32) {
        var byte: UInt8 = 0
        while !state.withLock({ $0.stopped }) {
            var descriptor = pollfd(fd: connection, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, 50)
            if ready > 0 {
                let count = recv(connection, &byte, 1, Int32(MSG_DONTWAIT))
                if count == 0 || (count < 0 && errno != EAGAIN && errno != EINTR) { return }
            }
        }
    }

    private static func reason(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 302: return "Found"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 404: return "Not Found"
        case 429: return "Too Many Requests"
        case 500: return "Internal Server Error"
        default: return "Status"
        }
    }
}

public struct FakeServerError: Error, CustomStringConvertible {
    public let operation: String
    public let errorNumber: Int32
    init(_ operation: String, _ errorNumber: Int32) {
        self.operation = operation
        self.errorNumber = errorNumber
    }
    public var description: String { "fake Portal server: \(operation) failed (errno \(errorNumber))" }
}

/// A loopback port that is bound but not listening, so connecting to it is refused; holding
/// the socket keeps the port from going to another server while a test runs.
public final class RefusingPort: Sendable {
    public let port: UInt16
    private let descriptor: Int32

    public init() throws {
        let socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socketDescriptor >= 0 else { throw FakeServerError("socket", errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socketDescriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            let error = errno
            close(socketDescriptor)
            throw FakeServerError("bind", error)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socketDescriptor, $0, &length) }
        }
        descriptor = socketDescriptor
        port = UInt16(bigEndian: address.sin_port)
    }

    deinit { close(descriptor) }
}
