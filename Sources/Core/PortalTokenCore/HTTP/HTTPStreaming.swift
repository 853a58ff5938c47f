import Basics

/// Bodies that are passed along while they arrive rather than held whole: the proxy's, in both
/// directions (docs/proxy.md, "Streaming"). The ports a streaming server and a streaming
/// transport meet at, and the pure, incremental readers of a request's head and chunked body.

/// A body read piece by piece.
public protocol HTTPBodySource: AnyObject {
    /// Copies up to `buffer.count` bytes of the body into `buffer`; 0 at its end. Throws when the
    /// body cannot be read (the client left, stalled past its deadline, or broke the framing).
    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int
}

/// Where an answer goes while it arrives.
public protocol HTTPResponseSink: AnyObject {
    /// Sends the status and headers; `contentLength` nil streams the body in chunks.
    func begin(status: Int, headers: [HTTPHeader], contentLength: Int?) throws
    /// Sends a piece of the body; throws when the client went away or stopped reading.
    func write(_ bytes: UnsafeRawBufferPointer) throws
}

extension HTTPResponseSink {
    /// A whole short answer.
    public func answer(_ response: HTTPServerResponse) throws {
        var body = response.body
        defer { zeroize(&body) }
        try begin(status: response.status, headers: response.headers, contentLength: body.count)
        try body.withUnsafeBytes { try write($0) }
    }
}

/// A request whose body is streamed to the server.
public struct StreamedHTTPRequest {
    public var method: String
    public var url: String
    /// Every header but `Authorization`.
    public var headers: [HTTPHeader]
    /// The whole `Authorization` value.
    public var authorization: Secret?
    public var body: (any HTTPBodySource)?
    /// The body's length; nil with a body sends it chunked.
    public var bodyLength: Int?

    public init(
        method: String, url: String, headers: [HTTPHeader], authorization: Secret?, body: (any HTTPBodySource)?,
        bodyLength: Int?
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.authorization = authorization
        self.body = body
        self.bodyLength = bodyLength
    }
}

/// How a streamed exchange ended once an answer had begun.
public struct StreamedHTTPOutcome: Sendable, Equatable {
    public var status: Int
    /// The URL that answered (no redirect is followed, so the one asked).
    public var effectiveURL: String
    /// False when the body was cut short (either side went away, or a bound passed).
    public var completed: Bool

    public init(status: Int, effectiveURL: String, completed: Bool) {
        self.status = status
        self.effectiveURL = effectiveURL
        self.completed = completed
    }
}

/// Sends a request whose bodies stream in both directions. No redirect is followed and no proxy
/// is used. Throws when no answer began; once one has, the outcome says how it ended.
public protocol StreamingHTTPTransport: Sendable {
    func exchange(_ request: StreamedHTTPRequest, into sink: any HTTPResponseSink) throws(HTTPError)
        -> StreamedHTTPOutcome
}

/// How a request's body is framed, from its head.
public enum HTTPBodyFraming: Sendable, Equatable {
    case none
    case length(Int)
    case chunked
}

extension HTTPRequestParser {
    /// The head of a request whose body is read later, piece by piece.
    public enum StreamingHeadOutcome: Sendable {
        case incomplete
        /// The request (its body empty), how its body is framed, the bytes the head took, and
        /// whether the client waits for `100 Continue`.
        case head(HTTPServerRequest, framing: HTTPBodyFraming, consumed: Int, expectsContinue: Bool)
        case invalid(HTTPRequestError)
    }

    /// Reads a request's head from the start of `bytes` under `limits`; a line or head past its
    /// bound is refused before its end arrives. The body's size is not bounded here: whoever
    /// reads the body bounds it.
    public static func parseStreamingHead(_ bytes: ArraySlice<UInt8>, limits: HTTPRequestLimits = .init())
        -> StreamingHeadOutcome
    {
        switch parseHead(bytes, limits: limits) {
        case .needMore: return .incomplete
        case .invalid(let error): return .invalid(error)
        case .head(let head):
            return .head(
                head.request, framing: head.framing, consumed: head.length, expectsContinue: head.expectsContinue)
        }
    }
}

/// Decodes a chunked body as it arrives (RFC 9112 §7.1), as strictly as `HTTPRequestParser`:
/// CRLF line ends, hexadecimal sizes of at most 8 digits, chunk extensions and trailer fields
/// read and dropped, each bounded.
public struct ChunkedBodyDecoder: Sendable {
    enum State: Sendable, Equatable {
        case sizeLine
        case data(remaining: Int)
        case dataCR
        case dataLF
        case trailerLine
        case done
    }

    private var state = State.sizeLine
    private var line: [UInt8] = []
    private var trailerBytes = 0
    private let maximumTrailerBytes: Int

    public init(maximumTrailerBytes: Int = 16_384) {
        self.maximumTrailerBytes = maximumTrailerBytes
    }

    /// Whether the last chunk and the trailer have been read.
    public var isDone: Bool { state == .done }

    /// Decodes from the start of `input`, appending body bytes to `body`; returns how many bytes
    /// of `input` it took. It stops at the end of the body: what follows belongs to the next
    /// request.
    public mutating func decode(_ input: ArraySlice<UInt8>, into body: inout [UInt8]) throws(HTTPRequestError) -> Int {
        var index = input.startIndex
        while index < input.endIndex {
            switch state {
            case .done:
                return index - input.startIndex
            case .data(let remaining):
                let take = min(remaining, input.endIndex - index)
                body += input[index..<index + take]
                index += take
                state = remaining - take == 0 ? .dataCR : .data(remaining: remaining - take)
            case .dataCR:
                guard input[index] == 0x0D else { throw .malformed("a chunk does not end where its size says") }
                index += 1
                state = .dataLF
            case .dataLF:
                guard input[index] == 0x0A else { throw .malformed("a chunk does not end where its size says") }
                index += 1
                state = .sizeLine
            case .sizeLine, .trailerLine:
                let byte = input[index]
                index += 1
                if byte != 0x0A {
                    if let last = line.last, last == 0x0D {
                        throw .malformed("a carriage return stands inside a line of the request")
                    }
                    line.append(byte)
                    if state == .sizeLine, line.count > 1024 { throw .malformed("a chunk size line is too long") }
                    if state == .trailerLine {
                        trailerBytes += 1
                        if trailerBytes > maximumTrailerBytes {
                            throw HTTPRequestError(status: 431, "the trailer fields are longer than the limit")
                        }
                    }
                    continue
                }
                guard line.last == 0x0D else {
                    throw .malformed("a line of the request ends without a carriage return")
                }
                line.removeLast()
                if state == .sizeLine {
                    let size = try Self.size(of: line)
                    state = size == 0 ? .trailerLine : .data(remaining: size)
                } else if line.isEmpty {
                    state = .done
                } else {
                    guard line.contains(UInt8(ascii: ":")), line[0] != 0x20, line[0] != 0x09 else {
                        throw .malformed("a trailer line is not NAME: VALUE")
                    }
                }
                line.removeAll(keepingCapacity: true)
            }
        }
        return index - input.startIndex
    }

    private static func size(of line: [UInt8]) throws(HTTPRequestError) -> Int {
        let digits = line.prefix { Hex.value(of: $0) != nil }
        let rest = line[digits.endIndex...]
        guard !digits.isEmpty, digits.count <= 8,
            rest.isEmpty || rest.first == UInt8(ascii: ";") || rest.first == 0x20 || rest.first == 0x09,
            rest.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) })
        else { throw .malformed("a chunk size is not a hexadecimal number") }
        var size = 0
        for digit in digits { size = size * 16 + Int(Hex.value(of: digit)!) }
        return size
    }
}
