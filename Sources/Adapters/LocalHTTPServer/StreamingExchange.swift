import Basics
import Glibc
import PortalTokenCore

/// One request: its body, read while it arrives, and its answer, written while it is produced
/// (docs/proxy.md, "Streaming"). Used by the connection's thread only.
public final class StreamingExchange: HTTPBodySource, HTTPResponseSink {
    public struct Gone: Error {}

    private let connection: Connection
    /// Hears true before a wait for more of the body, false after it (`Connection.receive`).
    private let waiting: (Bool) -> Void
    private let admitted: () -> Void
    private let framing: HTTPBodyFraming
    private let idleMilliseconds: Int64
    private let requestKeepAlive: Bool
    private let isHTTP11: Bool
    private let isHead: Bool
    private var buffer: [UInt8]
    private var expectsContinue: Bool
    private var remaining: Int
    private var decoder = ChunkedBodyDecoder()
    private var decoded: [UInt8] = []
    private var decodedOffset = 0
    /// The whole request body has been read.
    private(set) var bodyDone: Bool
    private var failed = false
    /// Why reading the body failed, when it did: what the client is told if no answer began.
    private var bodyFailure: HTTPRequestError?

    /// The answer was given with `refuse`: the connection ends after it.
    private var refused = false
    private var began = false
    private var chunked = false
    private var bodyAllowed = true
    private var declaredLength: Int?
    private var written = 0
    private var keepAlive = false

    init(
        connection: Connection, request: HTTPServerRequest, framing: HTTPBodyFraming, leftover: [UInt8],
        expectsContinue: Bool, idleMilliseconds: Int64, stopping: Bool,
        waiting: @escaping (Bool) -> Void = { _ in }, admitted: @escaping () -> Void = {}
    ) {
        self.connection = connection
        self.waiting = waiting
        self.admitted = admitted
        self.framing = framing
        self.buffer = leftover
        self.expectsContinue = expectsContinue
        self.idleMilliseconds = idleMilliseconds
        self.requestKeepAlive = request.keepAlive && !stopping
        self.isHTTP11 = request.isHTTP11
        self.isHead = request.method == "HEAD"
        switch framing {
        case .none:
            remaining = 0
            bodyDone = true
        case .length(let length):
            remaining = length
            bodyDone = length == 0
        case .chunked:
            remaining = 0
            bodyDone = false
        }
    }

    deinit {
        zeroize(&buffer)
        zeroize(&decoded)
    }

    /// Whether the answer has begun (its head was sent).
    public var hasBegun: Bool { began }

    // MARK: The request body

    public func read(into output: UnsafeMutableRawBufferPointer) throws -> Int {
        guard !bodyDone, output.count > 0 else { return 0 }
        guard !failed else { throw Gone() }
        if expectsContinue {
            expectsContinue = false
            guard connection.write(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)) else { return try fail() }
        }
        while true {
            switch framing {
            case .none:
                bodyDone = true
                return 0
            case .length:
                if !buffer.isEmpty {
                    let count = min(buffer.count, remaining, output.count)
                    buffer.withUnsafeBytes { output.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: count) }
                    explicitlyRemovePrefix(count)
                    remaining -= count
                    if remaining == 0 { bodyDone = true }
                    return count
                }
            case .chunked:
                if decodedOffset < decoded.count {
                    let count = min(decoded.count - decodedOffset, output.count)
                    decoded.withUnsafeBytes {
                        output.baseAddress!.copyMemory(from: $0.baseAddress! + decodedOffset, byteCount: count)
                    }
                    decodedOffset += count
                    if decodedOffset == decoded.count {
                        zeroize(&decoded)
                        decoded.removeAll(keepingCapacity: true)
                        decodedOffset = 0
                    }
                    return count
                }
                if decoder.isDone {
                    bodyDone = true
                    return 0
                }
                if !buffer.isEmpty {
                    do {
                        let consumed = try decoder.decode(buffer[...], into: &decoded)
                        explicitlyRemovePrefix(consumed)
                    } catch {
                        bodyFailure = error
                        return try fail()
                    }
                    continue
                }
            }
            let deadline = MonotonicClock.milliseconds() + idleMilliseconds
            switch connection.receive(into: &buffer, until: deadline, waiting: waiting) {
            case .received: continue
            case .closed: return try fail()
            case .timedOut:
                bodyFailure = HTTPRequestError(status: 408, "the request body did not arrive in time")
                return try fail()
            }
        }
    }

    private func fail() throws -> Int {
        failed = true
        throw Gone()
    }

    private func explicitlyRemovePrefix(_ count: Int) {
        buffer.withUnsafeMutableBytes { raw in
            if let base = raw.baseAddress { explicit_bzero(base, min(count, raw.count)) }
        }
        buffer.removeFirst(count)
    }

    /// What arrived after this request's body: the start of the next one.
    func takeLeftover() -> [UInt8] {
        defer { buffer = [] }
        return buffer
    }

    // MARK: The answer

    public func begin(status: Int, headers: [HTTPHeader], contentLength: Int?) throws {
        // After a failed body read the server answers for it (400 or 408), or the client is gone.
        guard !began, !failed else { throw Gone() }
        began = true
        bodyAllowed = !(isHead || status == 204 || status == 304 || status < 200)
        chunked = bodyAllowed && contentLength == nil && isHTTP11
        declaredLength = bodyAllowed ? contentLength : nil
        // A body not read to its end leaves the connection unusable for another request.
        keepAlive =
            requestKeepAlive && !refused && bodyDone && !failed && (!bodyAllowed || contentLength != nil || chunked)
        let lengthHeader = (status == 204 || status == 304 || status < 200) ? nil : contentLength
        let response = HTTPServerResponse(status: status, headers: headers)
        guard connection.write(response.head(bodyLength: lengthHeader, chunked: chunked, keepAlive: keepAlive)) else {
            failed = true
            throw Gone()
        }
    }

    public func write(_ bytes: UnsafeRawBufferPointer) throws {
        guard began, !failed else { throw Gone() }
        guard bodyAllowed, bytes.count > 0 else { return }
        if let declaredLength, written + bytes.count > declaredLength {
            failed = true
            throw Gone()
        }
        written += bytes.count
        var piece: [UInt8] = []
        piece.reserveCapacity(bytes.count + 16)
        if chunked { piece += Array(String(bytes.count, radix: 16).utf8) + [0x0D, 0x0A] }
        piece += bytes
        if chunked { piece += [0x0D, 0x0A] }
        defer { zeroize(&piece) }
        guard connection.write(piece) else {
            failed = true
            throw Gone()
        }
    }

    private var completed: Bool?

    /// Ends the answer before the handler returns (the last chunk goes now).
    func completeEarly() {
        guard began, completed == nil else { return }
        completed = finishAnswer()
    }

    /// Ends the answer; true when the connection may serve another request.
    func finish() -> Bool {
        if let completed { return completed }
        completed = finishAnswer()
        return completed!
    }

    private func finishAnswer() -> Bool {
        guard began else {
            // The handler gave no answer: the client is told why, when it is still there, and
            // the connection ends.
            if let bodyFailure {
                connection.refuse(bodyFailure.status, bodyFailure.message)
            } else if !failed {
                connection.refuse(500, "the request could not be answered")
            }
            return false
        }
        guard !failed else { return false }
        if chunked {
            guard connection.write(Array("0\r\n\r\n".utf8)) else { return false }
        } else if let declaredLength, written != declaredLength {
            return false
        }
        return keepAlive
    }
}

extension StreamingExchange: LocalExchange {
    public func complete() { completeEarly() }

    public func admit() { admitted() }

    public func inform(_ headers: [HTTPHeader]) {
        guard isHTTP11, !began, !failed else { return }
        var head = "HTTP/1.1 102 Processing\r\n"
        for header in headers { head += "\(header.name): \(header.value)\r\n" }
        if !connection.write(Array((head + "\r\n").utf8)) { failed = true }
    }

    public func refuse(_ response: HTTPServerResponse) {
        refused = true
        try? answer(response)
    }
}
