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
///   receive the grant. A redirect URL naming `[::1]` is not a loopback redirect here.
/// - Every request on another path (`/favicon.ico`, a probe) gets 404 and waiting goes on; so
///   does any method but GET. Requests are bounded (`maximumRequestBytes`), and many
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
        let ipv4 = try Self.bind(family: AF_INET, address: "127.0.0.1", port: redirect.port)
        listeners.append((ipv4, "127.0.0.1"))
        if redirect.listensOnIPv6Loopback {
            do {
                let ipv6 = try Self.bind(family: AF_INET6, address: "::1", port: redirect.port)
                listeners.append((ipv6, "::1"))
            } catch .cannotListen(_, _, let number) where number == EADDRNOTAVAIL || number == EAFNOSUPPORT {
                // No IPv6 loopback on this system: browsers will use 127.0.0.1.
            } catch {
                close()
                throw error
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
                case .tooLarge:
                    respond(.tooLarge, on: connections[index].descriptor)
                    progress(.ignoredRequest(status: RedirectPage.tooLarge.status))
                    finished.append(index)
                case .complete(var head):
                    finished.append(index)
                    let outcome = serve(head, on: connections[index].descriptor, progress: progress, handler: handler)
                    zeroize(&head)
                    if let result = outcome {
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
                            capacity: options.maximumRequestBytes + Self.receiveChunkBytes))
                }
            }
        }
    }

    private enum Received {
        case more
        case closed
        case tooLarge
        case complete(head: [UInt8])
    }

    private static let receiveChunkBytes = 8192

    private func receive(into connection: Connection) -> Received {
        var chunk = [UInt8](repeating: 0, count: Self.receiveChunkBytes)
        defer { zeroize(&chunk) }
        while true {
            let count = recv(connection.descriptor, &chunk, chunk.count, 0)
            if count < 0 {
                if errno == EINTR { continue }
                return errno == EAGAIN || errno == EWOULDBLOCK ? .more : .closed
            }
            if count == 0 { return .closed }
            let searchFrom = max(0, connection.buffer.count - 3)
            connection.buffer += chunk[0..<count]
            if let end = Self.headEnd(in: connection.buffer, from: searchFrom) {
                return .complete(head: Array(connection.buffer[..<end]))
            }
            if connection.buffer.count > options.maximumRequestBytes { return .tooLarge }
        }
    }

    /// The end of the request head (`\r\n\r\n`, or a bare `\n\n`).
    static func headEnd(in buffer: [UInt8], from start: Int) -> Int? {
        var index = max(0, start)
        while index + 1 < buffer.count {
            if buffer[index] == 0x0A {
                if buffer[index + 1] == 0x0A { return index }
                if index + 2 < buffer.count, buffer[index + 1] == 0x0D, buffer[index + 2] == 0x0A { return index }
            }
            index += 1
        }
        return nil
    }

    /// Answers one complete request; returns the handler's result when it says to finish.
    private func serve<Result>(
        _ head: [UInt8], on descriptor: Int32, progress: (RedirectListenerProgress) -> Void,
        handler: (Secret) -> RedirectDecision<Result>
    ) -> Result? {
        let lineEnd = head.firstIndex(of: 0x0A) ?? head.endIndex
        var line = head[..<lineEnd]
        if line.last == 0x0D { line = line.dropLast() }
        let parts = line.split(separator: 0x20, omittingEmptySubsequences: false)
        guard parts.count == 3, parts[2].starts(with: Array("HTTP/1.".utf8)), parts[1].first == UInt8(ascii: "/"),
            let target = String(validating: parts[1], as: UTF8.self)
        else {
            respond(.badRequest, on: descriptor)
            progress(.ignoredRequest(status: RedirectPage.badRequest.status))
            return nil
        }
        // Judge the path before the method, so that nothing but the redirect path ever hears
        // more than "not found".
        let url = Secret(redirect.base + target)
        guard RedirectURL.matches(url.text, configured: configuredRedirectURL) else {
            respond(.notFound, on: descriptor)
            progress(.ignoredRequest(status: RedirectPage.notFound.status))
            return nil
        }
        guard parts[0].elementsEqual("GET".utf8) else {
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
        let bodyBytes = Array(body.utf8)
        let head =
            "HTTP/1.1 \(page.status) \(Self.reason(page.status))\r\n"
            + "Content-Type: text/html; charset=utf-8\r\n"
            + "Content-Length: \(bodyBytes.count)\r\n"
            + "Cache-Control: no-store\r\n"
            + "Referrer-Policy: no-referrer\r\n"
            + "X-Content-Type-Options: nosniff\r\n"
            + "Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'\r\n"
            + "Connection: close\r\n\r\n"
        let bytes = Array(head.utf8) + bodyBytes
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

    private static func reason(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 400: return "Bad Request"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 431: return "Request Header Fields Too Large"
        default: return "Status"
        }
    }

    // MARK: Sockets

    private static func bind(family: Int32, address: String, port: UInt16) throws(RedirectListenerError) -> Int32 {
        let descriptor = socket(
            family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard descriptor >= 0 else { throw .cannotListen(address: address, port: port, errorNumber: errno) }
        var yes: Int32 = 1
        // Lets a new run bind while an earlier run's connections sit in TIME_WAIT.
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var result: Int32
        if family == AF_INET6 {
            setsockopt(descriptor, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &yes, socklen_t(MemoryLayout<Int32>.size))
            var socketAddress = sockaddr_in6()
            socketAddress.sin6_family = sa_family_t(AF_INET6)
            socketAddress.sin6_port = port.bigEndian
            socketAddress.sin6_addr = in6addr_loopback
            result = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        } else {
            var socketAddress = sockaddr_in()
            socketAddress.sin_family = sa_family_t(AF_INET)
            socketAddress.sin_port = port.bigEndian
            socketAddress.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
            result = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        if result == 0 { result = listen(descriptor, 16) }
        guard result == 0 else {
            let number = errno
            _ = Glibc.close(descriptor)
            throw .cannotListen(address: address, port: port, errorNumber: number)
        }
        return descriptor
    }

    /// CLOCK_MONOTONIC in milliseconds: never moved by a wall-clock change.
    public static let monotonicMilliseconds: @Sendable () -> Int64 = { MonotonicClock.milliseconds() }
}
