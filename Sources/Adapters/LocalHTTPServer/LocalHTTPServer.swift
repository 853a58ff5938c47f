import Basics
import Glibc
import PortalTokenCore
import Synchronization

/// A small, strict HTTP/1.1 server on listening sockets this process already holds: Unix
/// sockets (the agent's), or a loopback TCP socket, since it only ever calls `accept` on them
/// (docs/agent.md, "The HTTP subset").
///
/// - Each connection runs on a thread of its own. Each listener has its own cap,
///   `maximumConnections`; past it, that listener's new clients wait in its backlog until one of
///   its connections ends, while the other listeners go on accepting.
/// - A connection is proven once it has been answered without a refusal, or the handler said
///   `admit` on it. A listener at its cap still accepts while one of its connections is idle:
///   unproven, open for `graceMilliseconds` or more, waiting for more of a request (its head, or
///   a body the handler reads before it judges), with nothing sent that the server has not read.
///   The new one takes the slot of the oldest idle one, which is ended. So clients that are only
///   ever refused, or that send nothing, half a head or part of a body, cannot hold a slot
///   against a new client; a connection whose request has come, or that has only just
///   connected, is never ended for room, so a burst of clients past the cap waits in the backlog
///   and is served whole.
/// - An answer given with `StreamingExchange.refuse` ends its connection.
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
        /// The cap on each listener's open connections.
        public var maximumConnections: Int
        /// How long a new, unproven connection keeps its slot at the cap before it may be ended
        /// for another, if it has sent nothing unread.
        public var graceMilliseconds: Int64
        /// `run` returns once no connection has been open for this long; nil serves until `stop`.
        public var idleExitMilliseconds: Int64?
        /// The stack of each connection's thread.
        public var threadStackBytes: Int

        public init(
            limits: HTTPRequestLimits = .init(), requestDeadlineMilliseconds: Int64 = 5000,
            writeDeadlineMilliseconds: Int64 = 5000, maximumConnections: Int = 256, graceMilliseconds: Int64 = 200,
            idleExitMilliseconds: Int64? = nil, threadStackBytes: Int = 1 << 20
        ) {
            self.limits = limits
            self.requestDeadlineMilliseconds = requestDeadlineMilliseconds
            self.writeDeadlineMilliseconds = writeDeadlineMilliseconds
            self.maximumConnections = maximumConnections
            self.graceMilliseconds = graceMilliseconds
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

    /// One open connection, as the accepting thread sees it.
    private struct Slot {
        var listenerIndex: Int
        /// Accepted before every connection with a larger one.
        var sequence: UInt64
        /// When it was accepted (monotonic ms).
        var acceptedAt: Int64
        /// Answered without a refusal, or its request admitted by the handler.
        var proven = false
        /// Its thread waits for more of a request (head or body) and has read all that came: set
        /// and cleared under the lock, the clearing before the thread reads again.
        var waiting = false
        /// Ended to make room: counted as unproven no more.
        var evicted = false
    }

    private struct State {
        var open: [Int32: Slot] = [:]
        var nextSequence: UInt64 = 0
        var stopping = false
        var lastClosedAt: Int64

        /// A listener's connections not ended to make room.
        func live(of listenerIndex: Int) -> Int {
            open.values.count(where: { $0.listenerIndex == listenerIndex && !$0.evicted })
        }

        /// The oldest of a listener's idle connections: unproven, accepted `grace` ms or more
        /// before `now`, waiting for more of a request, with nothing unread on its socket, so its
        /// thread holds no whole request. (Descriptors in `open` are open: `finish` closes them
        /// under the lock.)
        func evictable(of listenerIndex: Int, now: Int64, grace: Int64) -> Int32? {
            let candidates = open.filter {
                $0.value.listenerIndex == listenerIndex && !$0.value.proven && $0.value.waiting
                    && !$0.value.evicted && now - $0.value.acceptedAt >= grace
            }
            for (descriptor, _) in candidates.sorted(by: { $0.value.sequence < $1.value.sequence }) {
                var byte: UInt8 = 0
                let waiting = recv(descriptor, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
                // Bytes not read yet: a request may have come; 0 is a client that has gone.
                if waiting > 0 { continue }
                return descriptor
            }
            return nil
        }
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
        for descriptor in open.keys { _ = shutdown(descriptor, Int32(SHUT_RD)) }
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
            let now = MonotonicClock.milliseconds()
            let (count, full, stopping, lastClosedAt) = state.withLock { state in
                (
                    state.open.count,
                    listeners.indices.map {
                        state.live(of: $0) >= options.maximumConnections
                            && state.evictable(of: $0, now: now, grace: options.graceMilliseconds) == nil
                    },
                    state.stopping, state.lastClosedAt
                )
            }
            if stopping { break }
            var timeout: Int64 = -1
            if let idle = options.idleExitMilliseconds, count == 0 {
                if now - lastClosedAt >= idle { break }
                timeout = idle - (now - lastClosedAt)
            }
            // A listener at its cap with no connection to end is left out of the poll: its
            // clients wait in its backlog. One of its connections may turn idle without a
            // connection ending (its grace runs out, its thread reads what it sent), so the
            // poll looks again soon.
            if full.contains(true) { timeout = timeout < 0 ? 50 : min(timeout, 50) }
            var descriptors = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            var polled: [Int] = []
            for index in listeners.indices where !full[index] {
                descriptors.append(pollfd(fd: listeners[index], events: Int16(POLLIN), revents: 0))
                polled.append(index)
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
            for (offset, index) in polled.enumerated() where descriptors[offset + 1].revents != 0 {
                acceptOne(listenerIndex: index)
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

    /// Runs `run` on a detached thread of its own, then `finished`; false when the system
    /// refused a thread.
    public func runInBackground(finished: @escaping @Sendable () -> Void) -> Bool {
        DetachedThread.start(stackBytes: options.threadStackBytes) { [self] in
            try? run()
            finished()
        }
    }

    private func acceptOne(listenerIndex: Int) {
        // A listener at its cap with no connection to end leaves the client in its backlog.
        let room = state.withLock { state in
            state.live(of: listenerIndex) < options.maximumConnections
                || state.evictable(
                    of: listenerIndex, now: MonotonicClock.milliseconds(), grace: options.graceMilliseconds) != nil
        }
        guard room else { return }
        // accept4 is a GNU extension Swift's Glibc module does not export.
        let client = accept(listeners[listenerIndex], nil, nil)
        guard client >= 0 else { return }
        _ = fcntl(client, F_SETFD, FD_CLOEXEC)
        _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
        let admitted = state.withLock { state in
            guard !state.stopping else { return false }
            let now = MonotonicClock.milliseconds()
            // Room is made by ending the oldest idle connection. Should it have just turned
            // busy since the look above, the client is taken anyway, one past the cap.
            if state.live(of: listenerIndex) >= options.maximumConnections,
                let oldest = state.evictable(of: listenerIndex, now: now, grace: options.graceMilliseconds)
            {
                state.open[oldest]?.evicted = true
                _ = shutdown(oldest, Int32(SHUT_RDWR))
            }
            state.open[client] = Slot(listenerIndex: listenerIndex, sequence: state.nextSequence, acceptedAt: now)
            state.nextSequence += 1
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
        // Closed under the lock, with its slot: the next accept may get the same number, and a
        // slot is never taken for another connection's, nor shut after the close.
        state.withLock { state in
            _ = close(descriptor)
            state.open[descriptor] = nil
            state.lastClosedAt = MonotonicClock.milliseconds()
        }
        wake()
    }

    /// Marks whether a connection's thread waits for more of a request.
    private func setWaiting(_ descriptor: Int32, _ waiting: Bool) {
        state.withLock { $0.open[descriptor]?.waiting = waiting }
    }

    /// Marks a connection as proven: answered without a refusal, or its caller admitted.
    private func setProven(_ descriptor: Int32) {
        state.withLock { $0.open[descriptor]?.proven = true }
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
                    stopping: state.withLock { $0.stopping },
                    waiting: { [self] waiting in setWaiting(descriptor, waiting) },
                    admitted: { [self] in setProven(descriptor) })
                zeroize(&rest)
                handler(request, exchange, peer)
                // A refusal, or an answer after which the connection cannot go on, ends it.
                guard exchange.finish() else { return }
                setProven(descriptor)
                buffer = exchange.takeLeftover()
                deadline = MonotonicClock.milliseconds() + options.requestDeadlineMilliseconds
                continue
            case .invalid(let error):
                connection.refuse(error.status, error.message)
                return
            case .incomplete:
                break
            }
            let received = connection.receive(into: &buffer, until: deadline) { waiting in
                setWaiting(descriptor, waiting)
            }
            switch received {
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
    /// `waiting` hears true before each wait and false after it, before the next read.
    func receive(
        into buffer: inout [UInt8], until deadline: Int64, waiting: (Bool) -> Void = { _ in }
    ) -> Received {
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
            waiting(true)
            let ready = poll(&readable, 1, Int32(clamping: left))
            let failed = ready < 0 && errno != EINTR
            waiting(false)
            if failed { return .closed }
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
