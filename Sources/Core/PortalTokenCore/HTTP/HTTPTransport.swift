import Basics

/// One header line. Names compare case-insensitively wherever they are looked up.
public struct HTTPHeader: Sendable, Equatable {
    public var name: String
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

extension Array where Element == HTTPHeader {
    /// The first value of a header, by case-insensitive name.
    public func value(for name: String) -> String? {
        let wanted = name.lowercased()
        return first { $0.name.lowercased() == wanted }?.value
    }
}

/// A request as the transport sends it.
///
/// The `Authorization` value is held apart from the other headers, as a `Secret`, so that no
/// rendering of a request (description, reflection, a debugger's dump) can show it, and so the
/// transport can wipe its copy after use. Renderings show the method and the host only: a URL
/// may carry a query that is private.
public struct HTTPRequest: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var method: String
    public var url: String
    /// Every header except `Authorization`.
    public var headers: [HTTPHeader]
    /// The whole `Authorization` header value (`Bearer <token>`), when the request carries one.
    public var authorization: Secret?
    public var body: [UInt8]?

    public init(
        method: String, url: String, headers: [HTTPHeader] = [], authorization: Secret? = nil, body: [UInt8]? = nil
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.authorization = authorization
        self.body = body
    }

    public var description: String { "\(method) \(HTTPError.hostForMessages(url) ?? "<unparsed URL>")" }
    public var debugDescription: String { description }
    public var customMirror: Mirror {
        Mirror(
            self, children: ["method": method, "host": HTTPError.hostForMessages(url) ?? "<unparsed URL>"],
            displayStyle: .struct)
    }
}

/// What came back. No redirect is ever followed, so `effectiveURL` is the URL that answered;
/// docs/portal-api.md, "When a 401 ends a session" decides invalidation on it.
public struct HTTPResponse: Sendable, CustomStringConvertible {
    public var status: Int
    /// The headers of the final response, in the order received.
    public var headers: [HTTPHeader]
    public var body: [UInt8]
    public var effectiveURL: String

    public init(status: Int, headers: [HTTPHeader] = [], body: [UInt8] = [], effectiveURL: String) {
        self.status = status
        self.headers = headers
        self.body = body
        self.effectiveURL = effectiveURL
    }

    public var isSuccess: Bool { (200..<300).contains(status) }

    /// The status only: bodies (a 401's above all) and URLs stay out of renderings.
    public var description: String { "HTTP \(status)" }
}

/// Why a request got no HTTP response. Messages name the host at most: never a path, query,
/// header value or body.
public enum HTTPError: Error, Sendable, Equatable {
    /// The connection (TCP and TLS handshake) did not complete within the connect timeout.
    case connectTimedOut(host: String, milliseconds: Int)
    /// The whole exchange did not complete within the total timeout.
    case timedOut(host: String, milliseconds: Int)
    /// Refused, unreachable, or the name did not resolve.
    case cannotConnect(host: String)
    /// The server's certificate could not be verified, or the handshake failed. `detail` is a
    /// fixed text chosen by the transport.
    case tlsFailure(host: String, detail: String)
    /// The extra CA bundle could not be read.
    case caBundleUnreadable(path: String)
    /// The response body passed the size bound.
    case responseTooLarge(host: String, limitBytes: Int)
    /// A URL the transport will not send to (not http or https, or unparseable).
    case unsupportedURL
    /// Anything else; `detail` is a fixed text chosen by the transport.
    case other(host: String, detail: String)
    /// A request carrying `Authorization` reached a loopback socket another user owns; nothing
    /// was sent (docs/security.md, "Bearers on loopback"). `endpoint` is its address and port.
    case foreignListener(endpoint: String)

    public var message: String {
        switch self {
        case .connectTimedOut(let host, let milliseconds):
            return "could not connect to \(host) within \(milliseconds) ms"
        case .timedOut(let host, let milliseconds):
            return "\(host) did not answer within \(milliseconds) ms"
        case .cannotConnect(let host):
            return "could not connect to \(host)"
        case .tlsFailure(let host, let detail):
            return "TLS with \(host) failed: \(detail)"
        case .caBundleUnreadable(let path):
            return "the CA bundle \(path) could not be read"
        case .responseTooLarge(let host, let limit):
            return "the response from \(host) was larger than \(limit) bytes"
        case .unsupportedURL:
            return "the request URL is not an http or https URL"
        case .other(let host, let detail):
            return "the request to \(host) failed: \(detail)"
        case .foreignListener(let endpoint):
            return "the listener on \(endpoint) belongs to another user; the session token was not sent"
        }
    }

    public var hint: String? {
        switch self {
        case .connectTimedOut:
            return "check the network, or raise PORTAL_TOKEN_HTTP_CONNECT_TIMEOUT_MS"
        case .timedOut:
            return "try again later, or raise PORTAL_TOKEN_HTTP_TIMEOUT_MS"
        case .tlsFailure:
            return "behind a proxy that intercepts TLS, point PORTAL_TOKEN_CA_BUNDLE at its CA certificate"
        case .caBundleUnreadable:
            return "check PORTAL_TOKEN_CA_BUNDLE (or ca-bundle in the config file)"
        case .foreignListener:
            return
                "the proxy or server that had this port has gone: start it again, or check PORTAL_API_HOST"
        default:
            return nil
        }
    }

    /// The host of a URL, lowercased, with its port when the URL names one (a connection refused
    /// on loopback is about a port), for messages; nil when the URL does not parse. Userinfo, path
    /// and query never appear.
    public static func hostForMessages(_ url: String) -> String? {
        guard let authority = URLAuthority(parsing: url) else { return nil }
        return authority.port.map { "\(authority.host):\($0)" } ?? authority.host
    }
}

/// Sends one request and returns the response, whatever its status. Redirects are returned,
/// never followed.
public protocol HTTPTransport: Sendable {
    func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse
}

/// How the transport is bounded, from settings (docs/settings.md, "Every setting").
public struct HTTPTransportOptions: Sendable, Equatable {
    public static let defaultConnectTimeoutMilliseconds = 3000
    public static let defaultTotalTimeoutMilliseconds = 10_000
    /// Portal's JSON answers are small; a body past this bound is refused, not buffered.
    public static let defaultMaximumResponseBytes = 8 * 1024 * 1024

    public var connectTimeoutMilliseconds: Int
    public var totalTimeoutMilliseconds: Int
    /// A PEM file of CA certificates trusted in addition to the system's.
    public var caBundlePath: String?
    /// When set, the certificates of `caBundlePath` are the only ones trusted, as every Vault
    /// client reads `VAULT_CACERT`; the system's are neither trusted nor parsed.
    public var trustsCABundleOnly = false
    public var maximumResponseBytes: Int
    /// A Unix socket every request goes to instead of the URL's host (the agent's, whose
    /// listener must be this user's); the URL's path and Host still name the request.
    public var unixSocketPath: String?

    public init(
        connectTimeoutMilliseconds: Int = defaultConnectTimeoutMilliseconds,
        totalTimeoutMilliseconds: Int = defaultTotalTimeoutMilliseconds,
        caBundlePath: String? = nil,
        maximumResponseBytes: Int = defaultMaximumResponseBytes
    ) {
        self.connectTimeoutMilliseconds = connectTimeoutMilliseconds
        self.totalTimeoutMilliseconds = totalTimeoutMilliseconds
        self.caBundlePath = caBundlePath
        self.maximumResponseBytes = maximumResponseBytes
    }

    public init(settings: Settings) throws(SettingError) {
        self.init(
            connectTimeoutMilliseconds: try settings.milliseconds(
                .httpConnectTimeout, default: Self.defaultConnectTimeoutMilliseconds),
            totalTimeoutMilliseconds: try settings.milliseconds(
                .httpTimeout, default: Self.defaultTotalTimeoutMilliseconds),
            caBundlePath: settings.value(.caBundle).map { $0.trimmingWhitespace }.flatMap { $0.isEmpty ? nil : $0 })
    }
}

/// Builds every request portal-token sends to Portal, with the header policy of
/// docs/portal-api.md, "Headers" in one place:
/// - `Accept` and `Content-Type: application/json` on every request, GETs included;
/// - `Content-Length` only when there is a body;
/// - a fresh lowercase UUIDv4 `X-Portal-Trace-Id` on every Portal-owned request (docs/portal-api.md, "Portal hosts"),
///   and none on any other;
/// - `User-Agent: portal-token/<version>`;
/// - `Authorization: Bearer <token>` only when the URL passes the bearer gate (docs/portal-api.md, "Portal hosts"); a
///   token offered for any other URL is dropped, and the request goes without it.
public struct PortalRequestBuilder: Sendable {
    public let gate: PortalHostGate
    public let userAgent: String
    private let makeTraceID: @Sendable () -> String

    public init(
        gate: PortalHostGate, version: String,
        traceID: @escaping @Sendable () -> String = { TraceID.generate() }
    ) {
        self.gate = gate
        self.userAgent = "portal-token/\(version)"
        self.makeTraceID = traceID
    }

    /// Names the policy owns; callers' extra headers with these names are ignored.
    /// Headers only portal-token sets (docs/portal-api.md, "Headers"): an extra header by one of these names
    /// is dropped.
    public static let ownedHeaderNames: Set<String> = [
        "accept", "content-type", "content-length", "x-portal-trace-id", "user-agent", "authorization", "host",
    ]

    /// - Parameters:
    ///   - bearer: the token for `Authorization: Bearer`; attached only if the gate allows `url`.
    ///   - extraHeaders: headers of a particular call (e.g. `x-portal-auth-environment-id`).
    public func request(
        _ method: String, _ url: String, body: [UInt8]? = nil, bearer: Secret? = nil,
        extraHeaders: [HTTPHeader] = []
    ) -> HTTPRequest {
        var headers = [
            HTTPHeader("Accept", "application/json"),
            HTTPHeader("Content-Type", "application/json"),
            HTTPHeader("User-Agent", userAgent),
        ]
        if let body, !body.isEmpty {
            headers.append(HTTPHeader("Content-Length", String(body.count)))
        }
        if gate.isPortalOwned(url) {
            headers.append(HTTPHeader("X-Portal-Trace-Id", makeTraceID()))
        }
        for header in extraHeaders where !Self.ownedHeaderNames.contains(header.name.lowercased()) {
            headers.append(header)
        }
        var authorization: Secret?
        if let bearer, !bearer.isEmpty, gate.allowsBearer(url) {
            authorization = bearer.withBytes { token in Secret(bytes: Array("Bearer ".utf8) + token) }
        }
        let sentBody = body.flatMap { $0.isEmpty ? nil : $0 }
        return HTTPRequest(method: method, url: url, headers: headers, authorization: authorization, body: sentBody)
    }
}

/// Trace ids: lowercase RFC 9562 version 4 UUIDs from the system's CSPRNG (`getrandom`).
public enum TraceID {
    public static func generate() -> String {
        var generator = SystemRandomNumberGenerator()
        return generate(using: &generator)
    }

    public static func generate<Generator: RandomNumberGenerator>(using generator: inout Generator) -> String {
        var bytes = [UInt8](repeating: 0, count: 16)
        for half in 0..<2 {
            let random = generator.next() as UInt64
            for offset in 0..<8 { bytes[half * 8 + offset] = UInt8(truncatingIfNeeded: random >> (offset * 8)) }
        }
        bytes[6] = (bytes[6] & 0x0f) | 0x40  // version 4
        bytes[8] = (bytes[8] & 0x3f) | 0x80  // variant 10xx
        var text: [UInt8] = []
        text.reserveCapacity(36)
        for (index, byte) in bytes.enumerated() {
            if index == 4 || index == 6 || index == 8 || index == 10 { text.append(UInt8(ascii: "-")) }
            Hex.appendDigits(of: byte, to: &text)
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// `xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx` in lowercase hex.
    public static func isValid(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            switch index {
            case 8, 13, 18, 23:
                guard byte == UInt8(ascii: "-") else { return false }
            case 14:
                guard byte == UInt8(ascii: "4") else { return false }
            case 19:
                guard
                    byte == UInt8(ascii: "8") || byte == UInt8(ascii: "9") || byte == UInt8(ascii: "a")
                        || byte == UInt8(ascii: "b")
                else { return false }
            default:
                guard URLAuthority.isDigit(byte) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f")) else {
                    return false
                }
            }
        }
        return true
    }
}

/// Names each request and its status in the debug trace (`--verbose`, `PORTAL_TOKEN_TRACE`):
/// the method, the host and the path, never the query, a header value or a body.
public struct TracingTransport: HTTPTransport {
    public let base: any HTTPTransport
    public let trace: @Sendable (String) -> Void

    public init(_ base: any HTTPTransport, trace: @escaping @Sendable (String) -> Void) {
        self.base = base
        self.trace = trace
    }

    public func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        let target = Self.hostAndPath(request.url)
        do {
            let response = try base.send(request)
            trace("http: \(request.method) \(target) -> HTTP \(response.status)")
            return response
        } catch {
            trace("http: \(request.method) \(target) failed: \(error.message)")
            throw error
        }
    }

    /// `host[:port]/path`, the query and fragment cut off; the scheme and any userinfo dropped.
    static func hostAndPath(_ url: String) -> String {
        var rest = Substring(url)
        if let separator = rest.firstByteRange(of: "://") { rest = rest[separator.upperBound...] }
        rest = rest.prefix { $0 != "?" && $0 != "#" }
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        if let at = rest[..<authorityEnd].lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        return String(rest)
    }
}
