/// The port of a local HTTP server whose bodies stream (the proxy's), so commands can serve one
/// without naming the adapter (docs/development.md, "Modules and the dependency rule").

/// Where a local server listens.
public enum LocalListenAddress: Sendable, Equatable {
    /// `127.0.0.1:port`; 0 picks a free port.
    case loopback(port: UInt16)
    /// A Unix socket at the path, 0600 in a private directory.
    case unixSocket(path: String)
}

/// Who connected, as the kernel says (`SO_PEERCRED`); all nil over TCP, where it cannot say.
public struct LocalCaller: Sendable, Equatable {
    public var pid: Int32?
    public var uid: UInt32?
    public var gid: UInt32?

    public init(pid: Int32? = nil, uid: UInt32? = nil, gid: UInt32? = nil) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }
}

/// One request of a streaming server: its body to read, its answer to write.
public protocol LocalExchange: HTTPBodySource, HTTPResponseSink {
    /// Whether the answer's head has been sent.
    var hasBegun: Bool { get }
    /// Ends the answer now (the last chunk), before the handler returns.
    func complete()
}

/// Answers each request, on the connection's thread; several run at once.
public typealias LocalStreamHandler = @Sendable (HTTPServerRequest, any LocalExchange, LocalCaller) -> Void

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
