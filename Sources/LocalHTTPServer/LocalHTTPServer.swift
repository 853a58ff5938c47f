import Basics
import Glibc
import PortalTokenCore
import Synchronization

/// A small, strict HTTP/1.1 server on listening sockets this process already holds: Unix
/// sockets (the agent's), or a loopback TCP socket, since it only ever calls `accept` on them
/// (docs/agent.md, "The HTTP subset").
///
/// - Each connection runs on a thread of its own, up to `maximumConnections` at once; past
///   that, new clients wait in the listen backlog until a connection ends.
/// - Heads are read by `HTTPRequestParser` under `Options.limits`: a request line or head too
///   long is answered 431, anything else malformed 400 (and the connection closed); keep-alive
///   and pipelining follow the client's `Connection` header.
/// - `stream` gets each request as soon as its head has been read. It reads the body piece by
///   piece from the `StreamingExchange` while it arrives (`Content-Length` or chunked, of any
///   size: whoever reads a body bounds it) and answers through the same exchange, streaming its
///   own body. A body left unread closes the connection after the answer.
/// - Every connection has a deadline: a whole head must arrive within
///   `requestDeadlineMilliseconds` of the accept or of the previous answer, however busily a
///   client trickles bytes, and each piece of a body within as long of the last. A client that
///   sent part of a request is answered 408 then; a silent one is closed. Every write has its
///   own deadline too, so a client that stops reading is dropped rather than waited on.
/// - `accept` runs first on each connection's thread, with the connected socket and which
///   listener took it; it learns who the caller is (the agent reads the kernel's peer
///   credentials there) or returns nil to close the connection at once.
/// - `stream` runs on the connection's thread, so several run at once: a handler that touches
///   shared state serialises itself.
/// - `run` blocks until `stop` is called (from any thread) or, with `idleExitMilliseconds`, until
///   no connection has been open for that long.
///
/// Nothing here logs. Receive buffers, which may hold a password (a git `store` body), are
/// wiped when a connection ends.
public final class LocalHTTPServer<Peer>: @unchecked Sendable {
    public struct Options: Sendable {
        public var limits: HTTPRequestLimits
        /// How long a connection has to deliver a request's head, from the accept or the previous
        /// answer, and each piece of its body, from the last.
        public var requestDeadlineMilliseconds: Int64
        /// How long one write (the head, the body, a chunk) may wait for the client to read.
        public var writeDeadlineMilliseconds: Int64
        public var maximumConnections: Int
        /// `run` returns once no connection has been open for this long; nil serves until `stop`.
        public var idleExitMilliseconds: Int64?
        /// The stack of each connection's thread.
        public var threadStackBytes: Int

        public init(
            limits: HTTPRequestLimits = .init(), requestDeadlineMilliseconds: Int64 = 5000,
            writeDeadlineMilliseconds: Int64 = 5000, maximumConnections: Int = 256, idleExitMilliseconds: Int64? = nil,
            threadStackBytes: Int = 1 << 20
        ) {
            self.limits = limits
            self.requestDeadlineMilliseconds = requestDeadlineMilliseconds
            self.writeDeadlineMilliseconds = writeDeadlineMilliseconds
            self.maximumConnections = maximumConnections
            self.idleExitMilliseconds = idleExitMilliseconds
            self.threadStackBytes = threadStackBytes
        }
    }

    /// Learns who is on a new connection; nil closes it unanswered.
    public typealias Accept = (_ descriptor: Int32, _ listenerIndex: Int) -> Peer?
    /// Answers one request, through `exchange`: reads its body, writes the answer.
    public typealias Stream = (_ request: HTTPServerRequest, _ exchange: StreamingExchange, _ peer: Peer) -> Void

    public let options: Options
    private let listeners: [Int32]
    private let acceptPeer: Accept
    private let handler: Stream

    private struct State {
        var open: Set<Int32> = []
        var stopping = false
        var lastClosedAt: Int64
    }

    private let state: Mutex<State>
    /// Wakes `run`: written by `stop` and whenever a connection ends.
    private let wakeRead: Int32
    private let wakeWrite: Int32

    /// `listeners` are listening sockets (the caller made and bound them; see `UnixSocketListener`).
    /// They stay open when `run` returns: the caller closes them.
    public init(
        listeners: [Int32], options: Options = .init(), accept: @escaping Accept, stream: @escaping Stream
    ) throws(SystemCallError) {
        self.listeners = listeners
        self.options = options
        self.acceptPeer = accept
        self.handler = stream
        self.state = Mutex(State(lastClosedAt: MonotonicClock.milliseconds()))
        var descriptors: [Int32] = [-1, -1]
        guard pipe(&descriptors) == 0 else { throw SystemCallError(path: "pipe", errno: errno) }
        for descriptor in descriptors {
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        }
        wakeRead = descriptors[0]
        wakeWrite = descriptors[1]
    }

    deinit {
        _ = close(wakeRead)
        _ = close(wakeWrite)
    }

    /// Stops accepting, ends open connections after the answer in progress, and makes `run` return.
    public func stop() {
        let open = state.withLock { state in
            state.stopping = true
            return state.open
        }
        // Wakes each connection's wait for its next request; an answer being written is finished.
        for descriptor in open { _ = shutdown(descriptor, Int32(SHUT_RD)) }
        wake()
    }

    private func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    /// Serves until `stop`, or until idle for `idleExitMilliseconds`; returns once every
    /// connection has ended.
    public func run() throws(SystemCallError) {
        while true {
            let (count, stopping, lastClosedAt) = state.withLock { ($0.open.count, $0.stopping, $0.lastClosedAt) }
            if stopping { break }
            let now = MonotonicClock.milliseconds()
            var timeout: Int64 = -1
            if let idle = options.idleExitMilliseconds, count == 0 {
                if now - lastClosedAt >= idle { break }
                timeout = idle - (now - lastClosedAt)
            }
            // At the cap, listeners are left out of the poll: clients wait in the backlog.
            var descriptors = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            if count < options.maximumConnections {
                descriptors += listeners.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            }
            let ready = poll(&descriptors, nfds_t(descriptors.count), Int32(clamping: timeout))
            if ready < 0 {
                if errno == EINTR { continue }
                throw SystemCallError(path: "poll", errno: errno)
            }
            if descriptors[0].revents != 0 {
                var sink = [UInt8](repeating: 0, count: 64)
                while read(wakeRead, &sink, sink.count) > 0 {}
            }
            for index in descriptors.indices.dropFirst() where descriptors[index].revents != 0 {
                acceptOne(listenerIndex: index - 1)
            }
        }
        // Wait for the connections still open; `stop` shut their reading side.
        while state.withLock({ !$0.open.isEmpty }) {
            var descriptor = pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)
            _ = poll(&descriptor, 1, 100)
            var sink = [UInt8](repeating: 0, count: 64)
            while read(wakeRead, &sink, sink.count) > 0 {}
        }
    }

    private func acceptOne(listenerIndex: Int) {
        // accept4 is a GNU extension Swift's Glibc module does not export.
        let client = accept(listeners[listenerIndex], nil, nil)
        guard client >= 0 else { return }
        _ = fcntl(client, F_SETFD, FD_CLOEXEC)
        _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
        let admitted = state.withLock { state in
            guard !state.stopping, state.open.count < options.maximumConnections else { return false }
            state.open.insert(client)
            return true
        }
        guard admitted else {
            _ = close(client)
            return
        }
        let started = DetachedThread.start(stackBytes: options.threadStackBytes) { [self] in
            serve(client, listenerIndex: listenerIndex)
            finish(client)
        }
        if !started { finish(client) }
    }

    private func finish(_ descriptor: Int32) {
        _ = close(descriptor)
        state.withLock { state in
            state.open.remove(descriptor)
            state.lastClosedAt = MonotonicClock.milliseconds()
        }
        wake()
    }

    // MARK: One connection

    private func serve(_ descriptor: Int32, listenerIndex: Int) {
        guard let peer = acceptPeer(descriptor, listenerIndex) else { return }
        let connection = Connection(
            descriptor: descriptor, writeDeadlineMilliseconds: options.writeDeadlineMilliseconds)
        var buffer: [UInt8] = []
        defer { zeroize(&buffer) }
        var deadline = MonotonicClock.milliseconds() + options.requestDeadlineMilliseconds
        while true {
            switch HTTPRequestParser.parseStreamingHead(buffer[...], limits: options.limits) {
            case .head(let request, let framing, let consumed, let expectsContinue):
                var rest = Array(buffer[consumed...])
                zeroize(&buffer)
                let exchange = StreamingExchange(
                    connection: connection, request: request, framing: framing, leftover: rest,
                    expectsContinue: expectsContinue, idleMilliseconds: options.requestDeadlineMilliseconds,
                    stopping: state.withLock { $0.stopping })
                zeroize(&rest)
                handler(request, exchange, peer)
                guard exchange.finish() else { return }
                buffer = exchange.takeLeftover()
                deadline = MonotonicClock.milliseconds() + options.requestDeadlineMilliseconds
                continue
            case .invalid(let error):
                connection.refuse(error.status, error.message)
                return
            case .incomplete:
                break
            }
            switch connection.receive(into: &buffer, until: deadline) {
            case .received:
                continue
            case .closed:
                return
            case .timedOut:
                if !buffer.isEmpty { connection.refuse(408, "the request did not arrive in time") }
                return
            }
        }
    }
}

/// The connected socket of one client, non-blocking, with every wait bounded.
final class Connection {
    enum Received {
        case received
        case closed
        case timedOut
    }

    let descriptor: Int32
    let writeDeadlineMilliseconds: Int64

    init(descriptor: Int32, writeDeadlineMilliseconds: Int64) {
        self.descriptor = descriptor
        self.writeDeadlineMilliseconds = writeDeadlineMilliseconds
    }

    /// Reads what has arrived into `buffer`, waiting for it until `deadline` (monotonic ms).
    func receive(into buffer: inout [UInt8], until deadline: Int64) -> Received {
        var chunk = [UInt8](repeating: 0, count: 16_384)
        defer { zeroize(&chunk) }
        while true {
            let count = recv(descriptor, &chunk, chunk.count, 0)
            if count > 0 {
                buffer += chunk[0..<count]
                return .received
            }
            if count == 0 { return .closed }
            if errno == EINTR { continue }
            guard errno == EAGAIN || errno == EWOULDBLOCK else { return .closed }
            let left = deadline - MonotonicClock.milliseconds()
            guard left > 0 else { return .timedOut }
            var readable = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&readable, 1, Int32(clamping: left))
            if ready < 0, errno != EINTR { return .closed }
        }
    }

    /// Writes all of `bytes` within the write deadline; false when the client stalled or left.
    func write(_ bytes: [UInt8]) -> Bool {
        let deadline = MonotonicClock.milliseconds() + writeDeadlineMilliseconds
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent > 0 {
                offset += sent
                continue
            }
            if sent < 0, errno == EINTR { continue }
            guard sent < 0, errno == EAGAIN || errno == EWOULDBLOCK else { return false }
            let left = deadline - MonotonicClock.milliseconds()
            guard left > 0 else { return false }
            var writable = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
            _ = poll(&writable, 1, Int32(clamping: left))
        }
        return true
    }

    /// Answers a request the server could not read or the handler did not answer, in plain text,
    /// and says the connection ends (the caller closes it).
    func refuse(_ status: Int, _ message: String) {
        let response = HTTPServerResponse.text(status, message)
        var bytes = response.head(bodyLength: response.body.count, chunked: false, keepAlive: false) + response.body
        defer { zeroize(&bytes) }
        _ = write(bytes)
    }
}
