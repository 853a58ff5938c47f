import Basics
import Glibc
import PortalTokenCore

/// Completes a sign-in whose redirect URL is `http://127.0.0.1:PORT/path` or
/// `http://localhost:PORT/path` (docs/portal-api.md, "Loopback redirect URLs"): listens on that loopback address and
/// port only, waits for the browser to arrive on that path, hands the full redirect URL to the
/// caller, and answers the browser with a short page.
///
/// - `127.0.0.1` binds IPv4 loopback only. `localhost` binds 127.0.0.1 and also `[::1]` where
///   the system has IPv6, because browsers may resolve `localhost` to either; if `[::1]` is
///   there but the port is taken on it, listening fails rather than let another program
///   receive the grant. A redirect URL naming `[::1]` is not a loopback redirect here. The
///   sockets are `LoopbackTCPListener`'s.
/// - Requests are read by the agent's strict reader (`HTTPRequestParser`: docs/agent.md, "The
///   HTTP subset"). Every request on another path (`/favicon.ico`, a probe) gets 404, any
///   method but GET on the path 405, a malformed request 400 and a head past
///   `maximumRequestBytes` 431; waiting goes on after each. Many
///   connections are served at once from one `poll` loop, each under its own deadline: one that
///   has not sent a whole request head within `requestDeadlineMilliseconds` of being accepted
///   is closed however busily it trickles bytes, and answering one never waits on its reader
///   for long, so no idle, slow or hostile local client can hold up the browser
///   (docs/security.md, "Hardening rules").
/// - Waiting stops at the timeout, or on SIGINT/SIGTERM (Ctrl-C) when `handlesInterrupts`;
///   either way the sockets are closed, so the port is free again when `wait` returns.
///
/// Open the listener before sending the magic link or opening the browser, so a port that is
/// in use is reported before any grant exists. Nothing here logs; the page shows no secret.
public final class LoopbackRedirectListener: RedirectListening {
    public struct Options: Sendable {
        /// How long to wait for the redirect, from the start of `wait`.
        public var timeoutMilliseconds: Int64
        /// Bound on one request's line and headers.
        public var maximumRequestBytes: Int
        /// A connection that has not sent a whole request head this long after it was accepted
        /// is closed, whether it went quiet or trickles a byte at a time.
        public var requestDeadlineMilliseconds: Int64
        public var maximumConnections: Int
        /// How often `progress` hears `.waiting`.
        public var tickMilliseconds: Int64
        /// Stop on SIGINT and SIGTERM. Tests that must not see another test's signal set false.
        public var handlesInterrupts: Bool
        /// A monotonic clock in milliseconds.
        public var now: @Sendable () -> Int64

        public init(
            timeoutMilliseconds: Int64, maximumRequestBytes: Int = 65_536, requestDeadlineMilliseconds: Int64 = 10_000,
            maximumConnections: Int = 16, tickMilliseconds: Int64 = 1000, handlesInterrupts: Bool = true,
            now: @escaping @Sendable () -> Int64 = LoopbackRedirectListener.monotonicMilliseconds
        ) {
            self.timeoutMilliseconds = timeoutMilliseconds
            self.maximumRequestBytes = maximumRequestBytes
            self.requestDeadlineMilliseconds = requestDeadlineMilliseconds
            self.maximumConnections = maximumConnections
            self.tickMilliseconds = tickMilliseconds
            self.handlesInterrupts = handlesInterrupts
            self.now = now
        }
    }

    public let redirect: LoopbackRedirect
    public let configuredRedirectURL: String
    public let options: Options
    /// Listening sockets with the address each is bound to.
    private var listeners: [(descriptor: Int32, address: String)] = []

    /// Binds the redirect URL's loopback address and port.
    public init(redirect: LoopbackRedirect, configuredRedirectURL: String, options: Options)
        throws(RedirectListenerError)
    {
        self.redirect = redirect
        self.configuredRedirectURL = configuredRedirectURL
        self.options = options
        for (address, ipv6) in [("127.0.0.1", false), ("::1", true)] where !ipv6 || redirect.listensOnIPv6Loopback {
            do throws(SystemCallError) {
                listeners.append((try LoopbackTCPListener.listen(port: redirect.port, ipv6: ipv6).descriptor, address))
            } catch {
                // No IPv6 loopback on this system: browsers will use 127.0.0.1.
                if ipv6, error.number == EADDRNOTAVAIL || error.number == EAFNOSUPPORT { continue }
                close()
                throw .cannotListen(address: address, port: redirect.port, errorNumber: error.number)
            }
        }
    }

    deinit { close() }

    /// Closes the listening sockets; the port is free afterwards. `wait` calls it on return.
    public func close() {
        for listener in listeners { _ = Glibc.close(listener.descriptor) }
        listeners = []
    }

    // MARK: Waiting

    /// One client. What it sent holds the grant when it is the redirect, so the buffer is
    /// sized once (growing would leave copies behind) and wiped when the connection goes.
    private final class Connection {
        let descriptor: Int32
        var buffer: [UInt8] = []
        let acceptedAt: Int64

        init(descriptor: Int32, acceptedAt: Int64, capacity: Int) {
            self.descriptor = descriptor
            self.acceptedAt = acceptedAt
            buffer.reserveCapacity(capacity)
        }

        deinit { zeroize(&buffer) }
    }

    /// Waits for the browser. `handler` receives the full redirect URL (the configured scheme
    /// and authority plus the request target) and decides. Runs on the calling thread; closes
    /// the listener before returning or throwing.
    public func wait<Result>(
        progress: (RedirectListenerProgress) -> Void = { _ in },
        handler: (Secret) -> RedirectDecision<Result>
    ) throws(RedirectListenerError) -> Result {
        defer { close() }
        guard !listeners.isEmpty else { throw .socketFailure(errorNumber: EBADF) }
        let started = options.now()
        let deadline = started + options.timeoutMilliseconds
        var nextTick = started + options.tickMilliseconds
        let generation = options.handlesInterrupts ? InterruptRelay.begin() : 0
        defer { if options.handlesInterrupts { InterruptRelay.end() } }
        var connections: [Connection] = []
        defer { for connection in connections { _ = Glibc.close(connection.descriptor) } }

        progress(.listening(addresses: listeners.map(\.address), port: redirect.port))
        progress(.waiting(remainingMilliseconds: options.timeoutMilliseconds))
        while true {
            if options.handlesInterrupts, let signal = InterruptRelay.signal(since: generation) {
                throw .interrupted(signal: signal)
            }
            var now = options.now()
            guard now < deadline else { throw .timedOut(milliseconds: options.timeoutMilliseconds) }
            if now >= nextTick {
                progress(.waiting(remainingMilliseconds: deadline - now))
                nextTick = now + options.tickMilliseconds
            }
            connections.removeAll { connection in
                guard now - connection.acceptedAt >= options.requestDeadlineMilliseconds else { return false }
                _ = Glibc.close(connection.descriptor)
                return true
            }

            var descriptors = listeners.map { pollfd(fd: $0.descriptor, events: Int16(POLLIN), revents: 0) }
            let interruptIndex = descriptors.count
            if options.handlesInterrupts, InterruptRelay.readDescriptor >= 0 {
                descriptors.append(pollfd(fd: InterruptRelay.readDescriptor, events: Int16(POLLIN), revents: 0))
            }
            let firstConnection = descriptors.count
            descriptors += connections.map { pollfd(fd: $0.descriptor, events: Int16(POLLIN), revents: 0) }
            let nearestDeadline =
                connections.map { $0.acceptedAt + options.requestDeadlineMilliseconds }.min() ?? deadline
            let wait = max(0, min(deadline - now, nextTick - now, nearestDeadline - now, 1000))
            let ready = poll(&descriptors, nfds_t(descriptors.count), Int32(wait))
            if ready < 0 {
                if errno == EINTR { continue }
                throw .socketFailure(errorNumber: errno)
            }
            if ready == 0 { continue }
            if options.handlesInterrupts, descriptors.count > interruptIndex, interruptIndex < firstConnection,
                descriptors[interruptIndex].revents != 0
            {
                if let signal = InterruptRelay.signal(since: generation) { throw .interrupted(signal: signal) }
                InterruptRelay.drain()
            }
            now = options.now()

            // Read what arrived; serve each connection whose request is complete.
            var finished: [Int] = []
            for index in connections.indices where descriptors[firstConnection + index].revents != 0 {
                switch receive(into: connections[index]) {
                case .more:
                    continue
                case .closed:
                    finished.append(index)
                case .invalid(let error):
                    let page = error.status == 431 ? RedirectPage.tooLarge : .badRequest
                    respond(page, on: connections[index].descriptor)
                    progress(.ignoredRequest(status: page.status))
                    finished.append(index)
                case .complete(let request):
                    finished.append(index)
                    if let result = serve(
                        request, on: connections[index].descriptor, progress: progress, handler: handler)
                    {
                        return result
                    }
                }
            }
            for index in finished.reversed() {
                _ = Glibc.close(connections[index].descriptor)
                connections.remove(at: index)
            }

            // Accept new connections, dropping the oldest when there are too many.
            for (index, listener) in listeners.enumerated() where descriptors[index].revents != 0 {
                while true {
                    // accept4 is a GNU extension Swift's Glibc module does not export.
                    let client = accept(listener.descriptor, nil, nil)
                    if client < 0 { break }
                    _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                    _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
                    if connections.count >= options.maximumConnections,
                        let oldest = connections.indices.min(by: {
                            connections[$0].acceptedAt < connections[$1].acceptedAt
                        })
                    {
                        _ = Glibc.close(connections[oldest].descriptor)
                        connections.remove(at: oldest)
                    }
                    connections.append(
                        Connection(
                            descriptor: client, acceptedAt: now,
                            capacity: options.maximumRequestBytes + 1 + Self.receiveChunkBytes))
                }
            }
        }
    }

    private enum Received {
        case more
        case closed
        case invalid(HTTPRequestError)
        case complete(HTTPServerRequest)
    }

    private static let receiveChunkBytes = 8192

    /// Reads what arrived and the head so far. The reader refuses a head once it holds more than
    /// one byte past `maximumRequestBytes`, so the buffer never grows past its capacity.
    private func receive(into connection: Connection) -> Received {
        let limits = HTTPRequestLimits(
            maximumRequestLineBytes: options.maximumRequestBytes, maximumHeadBytes: options.maximumRequestBytes)
        var chunk = [UInt8](repeating: 0, count: Self.receiveChunkBytes)
        defer { zeroize(&chunk) }
        while true {
            let count = recv(connection.descriptor, &chunk, chunk.count, 0)
            if count < 0 {
                if errno == EINTR { continue }
                return errno == EAGAIN || errno == EWOULDBLOCK ? .more : .closed
            }
            if count == 0 { return .closed }
            connection.buffer += chunk[0..<count]
            switch HTTPRequestParser.parseStreamingHead(connection.buffer[...], limits: limits) {
            case .incomplete: continue
            case .invalid(let error): return .invalid(error)
            case .head(let request, _, _, _): return .complete(request)
            }
        }
    }

    /// Answers one complete request; returns the handler's result when it says to finish.
    private func serve<Result>(
        _ request: HTTPServerRequest, on descriptor: Int32, progress: (RedirectListenerProgress) -> Void,
        handler: (Secret) -> RedirectDecision<Result>
    ) -> Result? {
        // Judge the path before the method, so that nothing but the redirect path ever hears
        // more than "not found".
        let url = Secret(redirect.base + request.target)
        guard RedirectURL.matches(url.text, configured: configuredRedirectURL) else {
            respond(.notFound, on: descriptor)
            progress(.ignoredRequest(status: RedirectPage.notFound.status))
            return nil
        }
        guard request.method == "GET" else {
            respond(.methodNotAllowed, on: descriptor)
            progress(.ignoredRequest(status: RedirectPage.methodNotAllowed.status))
            return nil
        }
        progress(.redirectReceived)
        switch handler(url) {
        case .finish(let result, let page):
            respond(page, on: descriptor)
            return result
        case .keepWaiting(let page):
            respond(page, on: descriptor)
            return nil
        }
    }

    // MARK: Answers

    private func respond(_ page: RedirectPage, on descriptor: Int32) {
        let title = Self.escapeHTML(page.title), message = Self.escapeHTML(page.message)
        let body = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">\
            <title>\(title) · portal-token</title></head>
            <body style="font-family:system-ui,sans-serif;max-width:36em;margin:4em auto;padding:0 1em;line-height:1.5">
            <h1>\(title)</h1>
            <p>\(message)</p>
            </body></html>

            """
        let response = HTTPServerResponse(
            status: page.status,
            headers: [
                HTTPHeader("Content-Type", "text/html; charset=utf-8"), HTTPHeader("Cache-Control", "no-store"),
                HTTPHeader("Referrer-Policy", "no-referrer"), HTTPHeader("X-Content-Type-Options", "nosniff"),
                HTTPHeader("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'"),
            ], body: Array(body.utf8))
        let bytes =
            response.head(bodyLength: response.body.count, chunked: false, keepAlive: false) + response.body
        var offset = 0
        // A page is a few hundred bytes, which the socket buffer takes at once; a reader that
        // will not take them is not waited on for long.
        let giveUpAt = options.now() + 500
        while offset < bytes.count, options.now() < giveUpAt {
            let sent = bytes[offset...].withUnsafeBytes {
                send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent > 0 { offset += sent; continue }
            if sent < 0, errno == EINTR { continue }
            guard sent < 0, errno == EAGAIN || errno == EWOULDBLOCK else { return }
            var writable = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
            _ = poll(&writable, 1, 100)
        }
        // Half-close and drain what the browser still sends, so the close is not a reset that
        // would hide the page: for 200 ms at most, so a client that keeps sending a byte at a
        // time cannot hold the listener here.
        shutdown(descriptor, Int32(SHUT_WR))
        var sink = [UInt8](repeating: 0, count: 4096)
        var readable = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        var drained = 0
        let drainUntil = options.now() + 200
        while drained < 65_536, case let left = drainUntil - options.now(), left > 0,
            poll(&readable, 1, Int32(min(left, 50))) > 0
        {
            let count = recv(descriptor, &sink, sink.count, 0)
            if count <= 0 { break }
            drained += count
        }
    }

    static func escapeHTML(_ text: String) -> String {
        var output = ""
        for character in text {
            switch character {
            case "&": output += "&amp;"
            case "<": output += "&lt;"
            case ">": output += "&gt;"
            case "\"": output += "&quot;"
            case "'": output += "&#39;"
            default: output.append(character)
            }
        }
        return output
    }

    /// CLOCK_MONOTONIC in milliseconds: never moved by a wall-clock change.
    public static let monotonicMilliseconds: @Sendable () -> Int64 = { MonotonicClock.milliseconds() }
}
