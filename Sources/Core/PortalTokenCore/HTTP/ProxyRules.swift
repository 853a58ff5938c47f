import Basics

/// The proxy's decisions about one request, pure (docs/proxy.md): which requests it forwards to
/// the Portal API origin, with which headers, and what it answers the rest. Nothing here does I/O,
/// so every check is unit-tested without a socket.

/// Where a proxy listens, which decides how a caller is recognised.
public enum ProxyListenerKind: Sendable, Equatable {
    /// `127.0.0.1:port`: any local process can connect, so the `Host` header, the marker header and
    /// its credential are checked on every request.
    case loopback(port: UInt16)
    /// A Unix socket (0600 in a private directory): the kernel names the caller, checked when the
    /// connection is accepted.
    case unixSocket
}

/// What a request must be to be forwarded.
public struct ProxyRules: Sendable {
    /// The header every request to a loopback proxy carries, its value the proxy's credential
    /// (as GCE's `Metadata-Flavor`, a header a browser's cross-site request cannot carry, and a
    /// secret another local process does not know).
    public static let markerHeader = "Portal-Token-Proxy"
    /// The client API paths portal-token itself calls (docs/portal-api.md, "The session token's life").
    public static let defaultPathPrefixes = ["/api/v3/clients/me"]
    public static let defaultMethods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]

    public var listener: ProxyListenerKind
    /// Required as the marker header's value on a loopback listener.
    public var credential: Secret?
    public var methods: [String]
    /// A path is allowed when it equals a prefix or continues it after a `/`.
    public var pathPrefixes: [String]
    /// `portal-token/VERSION`, put before the client's own User-Agent.
    public var userAgent: String

    public init(
        listener: ProxyListenerKind, credential: Secret?, methods: [String] = defaultMethods,
        pathPrefixes: [String] = defaultPathPrefixes, userAgent: String
    ) {
        self.listener = listener
        self.credential = credential
        self.methods = methods
        self.pathPrefixes = pathPrefixes
        self.userAgent = userAgent
    }

    /// A fresh credential: 32 random bytes from the system's CSPRNG, in hex.
    public static func makeCredential() -> Secret {
        var generator = SystemRandomNumberGenerator()
        var bytes: [UInt8] = []
        for _ in 0..<4 {
            let word = generator.next() as UInt64
            for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: word >> shift)) }
        }
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes { Hex.appendDigits(of: byte, to: &text) }
        zeroize(&bytes)
        defer { zeroize(&text) }
        return Secret(bytes: text)
    }

    /// Headers that describe one connection, never forwarded (RFC 9110 §7.6.1), and those the
    /// proxy sets itself.
    static let hopByHop: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate", "te", "trailer",
        "transfer-encoding", "upgrade", "host", "content-length", "expect", "user-agent",
    ]

    /// Checks a request and, when it may go, the request to send upstream. `delegated`: the
    /// marker header holds a delegated credential, which the proxy checks itself in its place.
    public func decide(_ request: HTTPServerRequest, delegated: Bool = false) -> ProxyDecision {
        if case .loopback(let port) = listener {
            // DNS rebinding: a page whose name now resolves to 127.0.0.1 still sends its own name.
            guard let host = request.headers.value(for: "Host"), Self.isOwnHost(host, port: port) else {
                return .refuse(status: 403, reason: "the Host header does not name this proxy", unmarked: true)
            }
            guard let offered = request.headers.value(for: Self.markerHeader) else {
                return .refuse(status: 412, reason: "the \(Self.markerHeader) header is missing", unmarked: true)
            }
            guard delegated || credential.map({ Self.constantTimeEqual(Array(offered.utf8), $0) }) == true else {
                return .refuse(
                    status: 403, reason: "the \(Self.markerHeader) header does not hold this proxy's credential",
                    unmarked: true)
            }
        }
        guard methods.contains(request.method) else {
            return .refuse(status: 405, reason: "the method \(request.method) is not allowed through this proxy")
        }
        guard Self.isAllowed(path: request.path, prefixes: pathPrefixes) else {
            return .refuse(status: 403, reason: "this path is not allowed through this proxy")
        }
        return .forward(forwarded(request))
    }

    /// The headers sent upstream: the client's, without the connection's own and the marker; the
    /// client's `Authorization` kept apart, untouched; a trace id when the client sent none.
    func forwarded(_ request: HTTPServerRequest) -> ProxiedRequest {
        var named: Set<String> = Self.hopByHop
        named.insert(Self.markerHeader.lowercased())
        for header in request.headers where header.name.lowercased() == "connection" {
            for option in header.value.split(separator: ",") { named.insert(option.trimmingWhitespace.lowercased()) }
        }
        var headers: [HTTPHeader] = []
        var authorization: Secret?
        var clientAgent: String?
        var hasTrace = false
        for header in request.headers {
            let name = header.name.lowercased()
            if name == "authorization" {
                if authorization == nil { authorization = Secret(header.value) }
                continue
            }
            if name == "user-agent" { clientAgent = header.value }
            if named.contains(name) { continue }
            if name == "x-portal-trace-id" { hasTrace = true }
            headers.append(header)
        }
        headers.append(HTTPHeader("User-Agent", clientAgent.map { userAgent + " " + $0 } ?? userAgent))
        if !hasTrace { headers.append(HTTPHeader("X-Portal-Trace-Id", TraceID.generate())) }
        let framing: ProxiedRequest.BodyFraming
        if request.headers.contains(where: { $0.name.lowercased() == "transfer-encoding" }) {
            framing = .chunked
        } else if let length = request.headers.value(for: "Content-Length").flatMap({ Int($0) }), length > 0 {
            framing = .length(length)
        } else {
            framing = .none
        }
        return ProxiedRequest(
            method: request.method, target: request.target, headers: headers, clientAuthorization: authorization,
            body: framing)
    }

    /// The upstream answer's headers as the client gets them: the connection's own left out (the
    /// proxy frames the body itself), and the length, when the upstream gave one.
    public static func responseHeaders(_ headers: [HTTPHeader]) -> (headers: [HTTPHeader], contentLength: Int?) {
        var named: Set<String> = [
            "connection", "keep-alive", "proxy-connection", "proxy-authenticate", "te", "trailer", "transfer-encoding",
            "upgrade", "content-length",
        ]
        for header in headers where header.name.lowercased() == "connection" {
            for option in header.value.split(separator: ",") { named.insert(option.trimmingWhitespace.lowercased()) }
        }
        let chunked = headers.contains { $0.name.lowercased() == "transfer-encoding" }
        let lengths = Set(headers.filter { $0.name.lowercased() == "content-length" }.map(\.value))
        var length: Int?
        if !chunked, lengths.count == 1, let text = lengths.first, text.utf8.count <= 18,
            text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
        {
            length = Int(text)
        }
        return (headers.filter { !named.contains($0.name.lowercased()) }, length)
    }

    /// `127.0.0.1:PORT` or `localhost:PORT`, any case: the names this proxy is reached by.
    static func isOwnHost(_ host: String, port: UInt16) -> Bool {
        let lowered = host.lowercased()
        return lowered == "127.0.0.1:\(port)" || lowered == "localhost:\(port)"
    }

    /// Whether `path` is one of the prefixes or below one. Paths another server could read as
    /// something else are refused outright: dot segments, empty segments, a `;` (path parameters,
    /// `..;`), and any byte but the letters, digits and marks RFC 3986 allows unescaped in a
    /// segment. Of percent escapes, only those of printable ASCII other than `.`, `/`, backslash,
    /// `%` and `;` pass: no encoded dot, slash, backslash, NUL or second escape (`%252e`), and no
    /// byte of 0x80 or more, so no overlong UTF-8 (`%c0%ae`). So `/api/v3/clients/me/../../auth`
    /// never passes as a client API path, whatever a server behind Portal decodes.
    public static func isAllowed(path: Substring, prefixes: [String]) -> Bool {
        guard path.hasPrefix("/"), isPlainPath(Array(path.utf8)) else { return false }
        // Empty segments but the last (a trailing slash), and dot segments.
        let segments = Array(path.split(separator: "/", omittingEmptySubsequences: false).dropFirst())
        for (index, segment) in segments.enumerated()
        where segment == "." || segment == ".." || (segment.isEmpty && index < segments.count - 1) {
            return false
        }
        return prefixes.contains { prefix in
            path == prefix
                || (path.hasPrefix(prefix) && (prefix.hasSuffix("/") || path.dropFirst(prefix.count).first == "/"))
        }
    }

    /// Every byte a path character RFC 3986 allows unescaped (unreserved, `/`, `:`, `@` and the
    /// sub-delimiters but `;`), or a percent escape of a byte `isEscapable` allows.
    static func isPlainPath(_ bytes: [UInt8]) -> Bool {
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, let high = Hex.value(of: bytes[index + 1]),
                    let low = Hex.value(of: bytes[index + 2]), isEscapable(high << 4 | low)
                else { return false }
                index += 3
                continue
            }
            guard isPathCharacter(byte) else { return false }
            index += 1
        }
        return true
    }

    private static func isPathCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return Array("-._~/:@!$&'()*+,=".utf8).contains(byte)
        }
    }

    /// What a client API path may carry escaped: printable ASCII and the space, but never `%`,
    /// `.`, `/`, `;` or a backslash.
    private static func isEscapable(_ byte: UInt8) -> Bool {
        byte >= 0x20 && byte < 0x7f && !Array("%./;\\".utf8).contains(byte)
    }

    static func constantTimeEqual(_ offered: [UInt8], _ expected: Secret) -> Bool {
        expected.withBytes { wanted in
            guard offered.count == wanted.count else { return false }
            var difference: UInt8 = 0
            for index in 0..<offered.count { difference |= offered[index] ^ wanted[index] }
            return difference == 0
        }
    }
}

/// What the proxy does with a request.
public enum ProxyDecision: Sendable {
    case forward(ProxiedRequest)
    /// Answered by the proxy itself, with no upstream connection. `unmarked`: the request failed
    /// the loopback listener's `Host` or marker check, which any local process can send.
    case refuse(status: Int, reason: String, unmarked: Bool = false)
}

/// A request as the proxy sends it upstream, to the configured API origin.
public struct ProxiedRequest: Sendable, CustomStringConvertible {
    public enum BodyFraming: Sendable, Equatable {
        case none
        case length(Int)
        case chunked
    }

    public var method: String
    /// The path and query, as the client sent them.
    public var target: String
    /// Every header to send but `Authorization`.
    public var headers: [HTTPHeader]
    /// The client's own `Authorization`, sent as it came; nil means the session's bearer is added.
    public var clientAuthorization: Secret?
    public var body: BodyFraming

    public var description: String { "\(method) \(target.prefix { $0 != "?" })" }
}
