/// The port of a local HTTP server whose bodies stream (the proxy's), so commands can serve one
/// without naming the adapter (docs/development.md, "Modules and the dependency rule").

/// Where a local server listens.
public enum LocalListenAddress: Sendable, Equatable {
    /// `127.0.0.1:port`; 0 picks a free port.
    case loopback(port: UInt16)
    /// A Unix socket at the path, 0600 in a private directory.
    case unixSocket(path: String)
}

/// One request of a streaming server: its body to read, its answer to write.
public protocol LocalExchange: HTTPBodySource, HTTPResponseSink {
    /// Whether the answer's head has been sent.
    var hasBegun: Bool { get }
    /// Ends the answer now (the last chunk), before the handler returns.
    func complete()
    /// Answers with a refusal (a 403, 405, 412 and the like), after which the connection ends: a
    /// refused client cannot keep its connection by asking again (docs/agent.md, "Connections").
    func refuse(_ response: HTTPServerResponse)
    /// Says the caller passed the checks and rules before its answer is done (a proxied request
    /// whose body streams): its connection is then not ended to make room for a new one while it
    /// waits on the client (docs/agent.md, "Connections").
    func admit()
    /// Tells an HTTP/1.1 client, before the answer, that it is to wait (`102 Processing` with
    /// `headers`); nothing once the answer has begun, or to an HTTP/1.0 client.
    func inform(_ headers: [HTTPHeader])
}

extension HTTPBodySource {
    /// The whole body, when it holds at most `limit` bytes; nil when it holds more (the answer
    /// is then 413). Throws when the client left or broke the framing.
    /// What was read of a body too large is wiped.
    public func readBody(limit: Int) throws -> [UInt8]? {
        var body: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        defer { zeroize(&chunk) }
        while true {
            let count = try chunk.withUnsafeMutableBytes { try read(into: $0) }
            if count == 0 { return body }
            guard body.count + count <= limit else {
                zeroize(&body)
                return nil
            }
            body += chunk[0..<count]
        }
    }
}

/// Answers each request, on the connection's thread; several run at once. The caller is the
/// kernel's word on a Unix socket (`CallerIdentity`), nil on a loopback port, where it cannot say.
public typealias LocalStreamHandler = @Sendable (HTTPServerRequest, any LocalExchange, CallerIdentity?) -> Void

/// A bound listener, serving once started.
public protocol LocalStreamingServer: AnyObject, Sendable {
    /// The port of a loopback listener; nil for a Unix socket.
    var port: UInt16? { get }
    /// Serves on a thread of its own until `stop`.
    func start(_ handler: @escaping LocalStreamHandler) throws
    /// Serves on this thread until `stop`.
    func run(_ handler: @escaping LocalStreamHandler) throws
    func stop()
}

extension HTTPHeader {
    /// The header of the agent's `102 Processing` (docs/agent.md, "Asking the user"): how many
    /// milliseconds it may hold the request while it asks its user, which its client waits too.
    public static let askingMilliseconds = "Portal-Token-Asking-Ms"
}

extension LocalExchange {
    /// Tells the client that its request waits, at most `milliseconds`, while the agent asks its
    /// user: a `102 Processing` naming the wait.
    public func informAsking(milliseconds: Int64) {
        inform([HTTPHeader(HTTPHeader.askingMilliseconds, String(milliseconds))])
    }
}
