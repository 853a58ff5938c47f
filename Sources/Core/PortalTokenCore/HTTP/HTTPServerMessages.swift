import Basics

/// What a local HTTP/1.1 server (the agent's socket) receives and answers, and the strict, pure
/// reader of request heads (docs/agent.md, "The HTTP subset"). Bytes go in, a head or the status
/// that refuses it comes out; nothing here does I/O, so the reader is tested, fuzzed included,
/// without a socket. Bodies are read while they arrive (HTTPStreaming.swift).

/// A request as the server read it. Renderings show the method and path only: a body may carry a
/// password (a git `store`), a query may be private.
public struct HTTPServerRequest: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var method: String
    /// The request target exactly as sent (origin form: it starts with `/`).
    public var target: String
    /// `true` for HTTP/1.1, `false` for HTTP/1.0.
    public var isHTTP11: Bool
    /// Every header field in the order received, names as sent (compare them case-insensitively).
    public var headers: [HTTPHeader]
    /// The body, once a handler has read it whole (the agent's own endpoints do); the server
    /// hands a handler the head only, with this empty.
    public var body: [UInt8]
    /// Whether the client wants the connection kept open after the answer.
    public var keepAlive: Bool

    public init(
        method: String, target: String, isHTTP11: Bool = true, headers: [HTTPHeader] = [], body: [UInt8] = [],
        keepAlive: Bool = true
    ) {
        self.method = method
        self.target = target
        self.isHTTP11 = isHTTP11
        self.headers = headers
        self.body = body
        self.keepAlive = keepAlive
    }

    /// The target without its query.
    public var path: Substring { target.prefix { $0 != "?" } }

    /// The query (after `?`), nil when there is none.
    public var query: Substring? {
        guard let mark = target.firstIndex(of: "?") else { return nil }
        return target[target.index(after: mark)...]
    }

    public var description: String { "\(method) \(path)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror {
        Mirror(self, children: ["method": method, "path": String(path)], displayStyle: .struct)
    }
}

/// An answer held whole: one a handler gives `HTTPResponseSink.answer`, or the refusal the server
/// sends for a request it could not read. `Content-Length` and `Connection` are written from
/// `body` and the connection; a handler sets any other header.
public struct HTTPServerResponse: Sendable {
    public var status: Int
    public var headers: [HTTPHeader]
    public var body: [UInt8]

    public init(status: Int, headers: [HTTPHeader] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A short plain-text answer ending in a newline.
    public static func text(_ status: Int, _ text: String) -> HTTPServerResponse {
        HTTPServerResponse(
            status: status, headers: [HTTPHeader("Content-Type", "text/plain; charset=utf-8")],
            body: Array((text.hasSuffix("\n") || text.isEmpty ? text : text + "\n").utf8))
    }

    /// The reason phrase of the statuses this project answers with.
    public static func reason(_ status: Int) -> String {
        switch status {
        case 100: return "Continue"
        case 200: return "OK"
        case 204: return "No Content"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 413: return "Content Too Large"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        case 505: return "HTTP Version Not Supported"
        // What the proxy answers itself or passes on from Portal.
        case 201: return "Created"
        case 202: return "Accepted"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 303: return "See Other"
        case 304: return "Not Modified"
        case 307: return "Temporary Redirect"
        case 308: return "Permanent Redirect"
        case 409: return "Conflict"
        case 412: return "Precondition Failed"
        case 422: return "Unprocessable Content"
        case 429: return "Too Many Requests"
        default: return "Status \(status)"
        }
    }
}

/// The bounds a request's head is read under. A body is bounded by whoever reads it: the agent's
/// endpoints by `HTTPBodySource.readBody(limit:)`, the proxy not at all, since it streams.
public struct HTTPRequestLimits: Sendable, Equatable {
    /// The request line, without its CRLF.
    public var maximumRequestLineBytes: Int
    /// The request line and every header line with their line ends, and the blank line.
    public var maximumHeadBytes: Int
    public var maximumHeaderCount: Int

    public init(maximumRequestLineBytes: Int = 4096, maximumHeadBytes: Int = 16_384, maximumHeaderCount: Int = 64) {
        self.maximumRequestLineBytes = maximumRequestLineBytes
        self.maximumHeadBytes = maximumHeadBytes
        self.maximumHeaderCount = maximumHeaderCount
    }
}

/// Why a request was refused, with the status that says so. The message names what was wrong,
/// never the bytes that were.
public struct HTTPRequestError: Error, Sendable, Equatable {
    public var status: Int
    public var message: String

    public init(status: Int, _ message: String) {
        self.status = status
        self.message = message
    }

    static func malformed(_ message: String) -> HTTPRequestError { HTTPRequestError(status: 400, message) }
}

/// The strict HTTP/1.1 request head reader (RFC 9112, the subset docs/agent.md, "The HTTP
/// subset", lists): origin-form targets, CRLF line ends, no obsolete line folding, token header
/// names, `Content-Length` or `Transfer-Encoding: chunked` (never both), bounded everywhere.
/// `parseStreamingHead` (HTTPStreaming.swift) is its public face; `ChunkedBodyDecoder` reads a
/// chunked body as strictly.
public enum HTTPRequestParser {
    struct Head {
        var method: String
        var target: String
        var isHTTP11: Bool
        var headers: [HTTPHeader]
        var keepAlive: Bool
        var framing: HTTPBodyFraming
        var expectsContinue: Bool
        /// Bytes of the head, blank line included.
        var length: Int

        var request: HTTPServerRequest {
            HTTPServerRequest(
                method: method, target: target, isHTTP11: isHTTP11, headers: headers, keepAlive: keepAlive)
        }
    }

    enum HeadOutcome {
        case needMore
        case invalid(HTTPRequestError)
        case head(Head)
    }

    private static let cr: UInt8 = 0x0D
    private static let lf: UInt8 = 0x0A

    /// The next CRLF-ended line from `start`: its end (the CR) and the index after the LF; nil
    /// when no LF has come yet. A bare LF or a CR anywhere else is malformed.
    private static func line(
        in bytes: ArraySlice<UInt8>, from start: Int, limit: Int
    ) -> Result<(end: Int, next: Int)?, HTTPRequestError> {
        var index = start
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == lf {
                guard index > start, bytes[index - 1] == cr else {
                    return .failure(.malformed("a line of the request ends without a carriage return"))
                }
                return .success((index - 1, index + 1))
            }
            if byte == cr, index + 1 < bytes.endIndex, bytes[index + 1] != lf {
                return .failure(.malformed("a carriage return stands inside a line of the request"))
            }
            if index - start >= limit { return .success(nil) }
            index += 1
        }
        return .success(nil)
    }

    static func parseHead(_ bytes: ArraySlice<UInt8>, limits: HTTPRequestLimits) -> HeadOutcome {
        let start = bytes.startIndex
        // The request line.
        let requestLine: (end: Int, next: Int)
        switch line(in: bytes, from: start, limit: limits.maximumRequestLineBytes + 1) {
        case .failure(let error): return .invalid(error)
        case .success(nil):
            if bytes.count > limits.maximumRequestLineBytes + 1 {
                return .invalid(HTTPRequestError(status: 431, "the request line is longer than the limit"))
            }
            return .needMore
        case .success(let found?): requestLine = found
        }
        guard requestLine.end - start <= limits.maximumRequestLineBytes else {
            return .invalid(HTTPRequestError(status: 431, "the request line is longer than the limit"))
        }
        let parts = bytes[start..<requestLine.end].split(separator: 0x20, omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            return .invalid(.malformed("the request line is not METHOD TARGET VERSION"))
        }
        guard !parts[0].isEmpty, parts[0].allSatisfy(isTokenByte) else {
            return .invalid(.malformed("the request method is not a token"))
        }
        guard parts[1].first == UInt8(ascii: "/"), parts[1].allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            return .invalid(.malformed("the request target is not an absolute path"))
        }
        let isHTTP11: Bool
        if parts[2].elementsEqual("HTTP/1.1".utf8) {
            isHTTP11 = true
        } else if parts[2].elementsEqual("HTTP/1.0".utf8) {
            isHTTP11 = false
        } else if parts[2].starts(with: "HTTP/".utf8) {
            return .invalid(HTTPRequestError(status: 505, "only HTTP/1.1 and HTTP/1.0 are served"))
        } else {
            return .invalid(.malformed("the request line does not end in an HTTP version"))
        }

        // The header lines, up to the blank line.
        var headers: [HTTPHeader] = []
        var index = requestLine.next
        while true {
            let remaining = limits.maximumHeadBytes - (index - start)
            guard remaining >= 2 else {
                return .invalid(HTTPRequestError(status: 431, "the request head is longer than the limit"))
            }
            let found: (end: Int, next: Int)
            switch line(in: bytes, from: index, limit: remaining) {
            case .failure(let error): return .invalid(error)
            case .success(nil):
                if bytes.endIndex - index >= remaining {
                    return .invalid(HTTPRequestError(status: 431, "the request head is longer than the limit"))
                }
                return .needMore
            case .success(let line?): found = line
            }
            guard found.next - start <= limits.maximumHeadBytes else {
                return .invalid(HTTPRequestError(status: 431, "the request head is longer than the limit"))
            }
            if found.end == index {
                index = found.next
                break
            }
            guard headers.count < limits.maximumHeaderCount else {
                return .invalid(HTTPRequestError(status: 431, "the request has more header fields than the limit"))
            }
            let field = bytes[index..<found.end]
            guard let colon = field.firstIndex(of: UInt8(ascii: ":")), colon > field.startIndex,
                field[field.startIndex..<colon].allSatisfy(isTokenByte)
            else {
                // Obsolete line folding (a line starting with a space) lands here too.
                return .invalid(.malformed("a header line is not NAME: VALUE"))
            }
            var value = field[(colon + 1)...]
            while let first = value.first, first == 0x20 || first == 0x09 { value = value.dropFirst() }
            while let last = value.last, last == 0x20 || last == 0x09 { value = value.dropLast() }
            guard value.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }),
                let valueText = String(validating: value, as: UTF8.self)
            else {
                return .invalid(.malformed("a header value holds a control character or is not UTF-8"))
            }
            headers.append(
                HTTPHeader(String(decoding: field[field.startIndex..<colon], as: UTF8.self), valueText))
            index = found.next
        }

        // What the headers say about the body and the connection.
        var contentLength: Int?
        var chunked = false
        var closeRequested = false, keepAliveRequested = false
        var expectsContinue = false
        var hosts = 0
        for header in headers {
            switch header.name.lowercased() {
            case "content-length":
                guard !header.value.isEmpty, header.value.utf8.count <= 18,
                    header.value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let length = Int(header.value)
                else { return .invalid(.malformed("Content-Length is not a number")) }
                if let earlier = contentLength, earlier != length {
                    return .invalid(.malformed("Content-Length is given twice with different values"))
                }
                contentLength = length
            case "transfer-encoding":
                guard header.value.lowercased() == "chunked", !chunked else {
                    return .invalid(HTTPRequestError(status: 501, "only the chunked transfer coding is served"))
                }
                chunked = true
            case "connection":
                for option in header.value.lowercased().split(separator: ",") {
                    let word = option.trimmingWhitespace
                    if word == "close" { closeRequested = true }
                    if word == "keep-alive" { keepAliveRequested = true }
                }
            case "expect":
                guard header.value.lowercased() == "100-continue" else {
                    return .invalid(HTTPRequestError(status: 417, "only Expect: 100-continue is understood"))
                }
                expectsContinue = true
            case "host":
                hosts += 1
            default:
                break
            }
        }
        if isHTTP11, hosts != 1 {
            return .invalid(.malformed("an HTTP/1.1 request needs exactly one Host header"))
        }
        if chunked, contentLength != nil {
            return .invalid(.malformed("a request may not carry both Content-Length and Transfer-Encoding"))
        }
        let framing: HTTPBodyFraming
        if chunked {
            framing = .chunked
        } else if let length = contentLength, length > 0 {
            framing = .length(length)
        } else {
            framing = .none
        }
        return .head(
            Head(
                method: String(decoding: parts[0], as: UTF8.self), target: String(decoding: parts[1], as: UTF8.self),
                isHTTP11: isHTTP11, headers: headers,
                keepAlive: isHTTP11 ? !closeRequested : keepAliveRequested && !closeRequested, framing: framing,
                expectsContinue: expectsContinue && isHTTP11 && framing != .none, length: index - start))
    }

    /// RFC 9110's `tchar`.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }
}

extension HTTPServerResponse {
    /// The status line and headers of this answer as the server sends them, with the framing and
    /// `Connection` headers it adds. `chunked` says the streamed body is sent chunked.
    public func head(bodyLength: Int?, chunked: Bool, keepAlive: Bool) -> [UInt8] {
        var text = "HTTP/1.1 \(status) \(Self.reason(status))\r\n"
        for header in headers {
            let name = header.name.lowercased()
            if name == "content-length" || name == "transfer-encoding" || name == "connection" { continue }
            text += "\(header.name): \(header.value)\r\n"
        }
        if let bodyLength { text += "Content-Length: \(bodyLength)\r\n" }
        if chunked { text += "Transfer-Encoding: chunked\r\n" }
        text += keepAlive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n"
        return Array(text.utf8)
    }
}
