import Basics
import CCurl
import Glibc
import PortalTokenCore
import Synchronization

/// The HTTP transport, over libcurl (the only module that imports it).
///
/// Why libcurl and not URLSession: FoundationNetworking costs every invocation 6–12 ms of start-up
/// even when it sends nothing, rounds timeouts to whole seconds and ignores a test CA bundle.
///
/// Every request gets a fresh easy handle, so one transport may be used from several threads;
/// or, for a transport made `reusingConnections`, one easy handle serves every request in turn
/// (one at a time), and with it libcurl's cache of open connections: a run that sends several
/// requests to one server (the Vault store's listing, metadata and data reads) opens one TCP
/// connection and makes one TLS handshake, not one per request.
/// The rules it enforces on every request, whatever the caller asks:
/// - http and https only, and no redirect is ever followed: a 3xx comes back as it is;
/// - TLS peer and host verification are always on;
/// - the connect bound (TCP and TLS handshake) and the total bound are in milliseconds;
/// - a response body past the size bound is refused, never buffered in full;
/// - proxies come from libcurl's standard variables (`http_proxy`, `HTTPS_PROXY`, `no_proxy`, …)
///   and nothing else, except that a cleartext `http://` request, and any request to a loopback
///   target, never goes through a proxy (docs/security.md, "Hardening rules"): libcurl 7.88 would send a request
///   for `http://127.1:3000` or `http://localhost:3000` to `http_proxy`, bearer and all, in
///   cleartext, and no list of loopback spellings (`127.1`, `2130706433`, `0x7f.1`, …) is
///   complete, so the rule goes by the scheme.
///
/// Nothing here prints or logs. The `Authorization` line is copied into libcurl's header list
/// and wiped there before the list is freed; the request body buffer is wiped after the exchange.
public final class CurlTransport: HTTPTransport {
    public let options: HTTPTransportOptions
    private let reusesConnections: Bool
    /// The easy handle kept between requests (its address; 0 before the first), when
    /// connections are reused.
    private let kept = Mutex<UInt>(0)

    public init(options: HTTPTransportOptions = HTTPTransportOptions(), reusingConnections: Bool = false) {
        self.options = options
        reusesConnections = reusingConnections
    }

    deinit {
        if let handle = kept.withLock({ UnsafeMutableRawPointer(bitPattern: $0) }) {
            LibCurl.functions.easyCleanup(handle)
        }
    }

    /// Hosts that name this machine: `localhost` and its subdomains, 127.0.0.0/8 and `[::1]`.
    static func isLoopback(host: String) -> Bool {
        if host == "localhost" || host.hasSuffix(".localhost") || host == "[::1]" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }

    public func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        let lowered = request.url.prefix(8).lowercased()
        guard lowered.hasPrefix("http://") || lowered.hasPrefix("https://") else { throw .unsupportedURL }
        guard let host = HTTPError.hostForMessages(request.url) else { throw .unsupportedURL }
        guard LibCurl.loaded != nil else {
            throw .other(
                host: host, detail: "libcurl (\(LibCurl.soname)) could not be loaded; install Debian's libcurl4")
        }
        guard LibCurl.globalInitialisation == CURLE_OK else {
            throw .other(host: host, detail: "libcurl could not be initialised")
        }
        if reusesConnections {
            return try kept.withLock { address throws(HTTPError) -> HTTPResponse in
                let handle: UnsafeMutableRawPointer
                if let existing = UnsafeMutableRawPointer(bitPattern: address) {
                    // Every option back to its default; open connections and TLS sessions stay.
                    LibCurl.functions.easyReset(existing)
                    handle = existing
                } else {
                    guard let created = LibCurl.functions.easyInit() else {
                        throw .other(host: host, detail: "libcurl could not be initialised")
                    }
                    address = UInt(bitPattern: created)
                    handle = created
                }
                var exchange = Exchange(handle: handle, host: host, options: options)
                defer {
                    // The handle lets go of the header list, body and CA blob before they are freed.
                    LibCurl.functions.easyReset(handle)
                    exchange.release()
                }
                return try perform(request, on: &exchange, lowered: lowered, host: host)
            }
        }
        guard let handle = LibCurl.functions.easyInit() else {
            throw .other(host: host, detail: "libcurl could not be initialised")
        }
        var exchange = Exchange(handle: handle, host: host, options: options)
        defer {
            // The handle goes first: it may still point at the header list and the CA blob.
            LibCurl.functions.easyCleanup(handle)
            exchange.release()
        }
        return try perform(request, on: &exchange, lowered: lowered, host: host)
    }

    private func perform(_ request: HTTPRequest, on exchange: inout Exchange, lowered: String, host: String)
        throws(HTTPError) -> HTTPResponse
    {
        try exchange.configure(request)
        if lowered.hasPrefix("http://") || Self.isLoopback(host: host) { try exchange.disableProxy() }
        return try exchange.perform()
    }
}

/// One request's libcurl state: the C strings, header list and body buffer that must outlive
/// `curl_easy_perform`, and the accumulator its callbacks fill.
private struct Exchange: CurlHandleResources {
    let handle: UnsafeMutableRawPointer
    let host: String
    let options: HTTPTransportOptions
    let accumulator: ResponseAccumulator
    var cStrings: [UnsafeMutablePointer<CChar>] = []
    var headerList: UnsafeMutablePointer<curl_slist>?
    var body: UnsafeMutableRawBufferPointer?
    var caBlob: UnsafeMutableRawBufferPointer?
    let listenerCheck = ListenerOwnerCheck()
    var isHTTPS = false

    init(handle: UnsafeMutableRawPointer, host: String, options: HTTPTransportOptions) {
        self.handle = handle
        self.host = host
        self.options = options
        self.accumulator = ResponseAccumulator(limit: options.maximumResponseBytes)
    }

    mutating func configure(_ request: HTTPRequest) throws(HTTPError) {
        isHTTPS = request.url.prefix(8).lowercased() == "https://"
        try setTarget(request.url, connectTimeoutMilliseconds: options.connectTimeoutMilliseconds)
        try set(CURLOPT_TIMEOUT_MS, options.totalTimeoutMilliseconds)
        try set(CURLOPT_PROXY_SSL_VERIFYPEER, 1)
        try set(CURLOPT_PROXY_SSL_VERIFYHOST, 2)
        try check(
            LibCurl.functions.setoptOffT(handle, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(options.maximumResponseBytes)))
        if let path = options.caBundlePath {
            if options.trustsCABundleOnly {
                try trustOnly(caBundleAt: path)
            } else {
                try trustAdditionally(caBundleAt: path)
            }
        }

        let context = Unmanaged.passUnretained(accumulator).toOpaque()
        try check(LibCurl.functions.setoptWriteCallback(handle, CURLOPT_WRITEFUNCTION, receiveBody))
        try check(LibCurl.functions.setoptPointer(handle, CURLOPT_WRITEDATA, context))
        try check(LibCurl.functions.setoptWriteCallback(handle, CURLOPT_HEADERFUNCTION, receiveHeader))
        try check(LibCurl.functions.setoptPointer(handle, CURLOPT_HEADERDATA, context))

        try configureMethodAndBody(request)
        try configureHeaders(request)
    }

    private mutating func configureMethodAndBody(_ request: HTTPRequest) throws(HTTPError) {
        let method = request.method.uppercased()
        try checkMethod(method)
        if let bytes = request.body, !bytes.isEmpty {
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 1)
            buffer.copyBytes(from: bytes)
            body = buffer
            try check(LibCurl.functions.setoptOffT(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bytes.count)))
            try check(LibCurl.functions.setoptPointer(handle, CURLOPT_POSTFIELDS, buffer.baseAddress))
            if method != "POST" { try set(CURLOPT_CUSTOMREQUEST, string: method) }
        } else {
            try setBodilessMethod(method)
        }
    }

    private mutating func configureHeaders(_ request: HTTPRequest) throws(HTTPError) {
        for header in request.headers {
            try checkCarriable(header)
            try append(header: "\(header.name): \(header.value)")
        }
        if let authorization = request.authorization { try append(authorization: authorization) }
        // A body never waits for "100 Continue": one round trip, and no server needs it.
        try append(header: "Expect:")
        try check(LibCurl.functions.setoptPointer(handle, CURLOPT_HTTPHEADER, headerList))
    }

    func perform() throws(HTTPError) -> HTTPResponse {
        let code = LibCurl.functions.easyPerform(handle)
        guard code == CURLE_OK else { throw listenerRefusal ?? error(for: code) }
        var status = 0
        _ = LibCurl.functions.getinfoLong(handle, CURLINFO_RESPONSE_CODE, &status)
        var effective: UnsafeMutablePointer<CChar>?
        _ = LibCurl.functions.getinfoString(handle, CURLINFO_EFFECTIVE_URL, &effective)
        return HTTPResponse(
            status: status, headers: accumulator.headers, body: accumulator.body,
            effectiveURL: effective.map { String(cString: $0) } ?? "")
    }

    private func error(for code: CURLcode) -> HTTPError {
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            var connected: curl_off_t = 0
            _ = LibCurl.functions.getinfoOffT(
                handle, isHTTPS ? CURLINFO_APPCONNECT_TIME_T : CURLINFO_CONNECT_TIME_T, &connected)
            if connected == 0, options.connectTimeoutMilliseconds < options.totalTimeoutMilliseconds {
                return .connectTimedOut(host: host, milliseconds: options.connectTimeoutMilliseconds)
            }
            return .timedOut(host: host, milliseconds: options.totalTimeoutMilliseconds)
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            return .cannotConnect(host: host)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM,
            CURLE_SSL_CIPHER, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
            CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CRL_BADFILE, CURLE_SSL_CACERT_BADFILE,
            CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED,
            CURLE_SSL_SHUTDOWN_FAILED, CURLE_USE_SSL_FAILED:
            return .tlsFailure(host: host, detail: curlErrorText(code))
        case CURLE_FILESIZE_EXCEEDED:
            return .responseTooLarge(host: host, limitBytes: options.maximumResponseBytes)
        case CURLE_WRITE_ERROR where accumulator.exceededLimit:
            return .responseTooLarge(host: host, limitBytes: options.maximumResponseBytes)
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT:
            return .unsupportedURL
        default:
            return .other(host: host, detail: curlErrorText(code))
        }
    }

    mutating func release() {
        if let body {
            explicit_bzero(body.baseAddress!, body.count)
            body.deallocate()
            self.body = nil
        }
        releaseHandleResources()
    }

}

/// What libcurl's callbacks collect: the body within its bound and the final response's headers.
private final class ResponseAccumulator {
    let limit: Int
    var body: [UInt8] = []
    var headers: [HTTPHeader] = []
    var exceededLimit = false

    init(limit: Int) { self.limit = limit }
}

private func receiveBody(
    _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int,
    _ context: UnsafeMutableRawPointer?
) -> Int {
    guard let context else { return 0 }
    let accumulator = Unmanaged<ResponseAccumulator>.fromOpaque(context).takeUnretainedValue()
    let length = size * count
    guard accumulator.body.count + length <= accumulator.limit else {
        accumulator.exceededLimit = true
        return 0
    }
    if let data, length > 0 { accumulator.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: length)) }
    return length
}

/// Called once per header line, status lines included. Each status line (an interim 1xx, then
/// the final one) starts the header set afresh.
private func receiveHeader(
    _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int,
    _ context: UnsafeMutableRawPointer?
) -> Int {
    let length = size * count
    guard let context, let data else { return length }
    let accumulator = Unmanaged<ResponseAccumulator>.fromOpaque(context).takeUnretainedValue()
    var bytes = UnsafeRawBufferPointer(start: data, count: length)[...]
    while let last = bytes.last, last == UInt8(ascii: "\r") || last == UInt8(ascii: "\n") { bytes = bytes.dropLast() }
    let line = String(decoding: bytes, as: UTF8.self)
    if line.hasPrefix("HTTP/") {
        accumulator.headers = []
    } else if let colon = line.firstIndex(of: ":") {
        let name = line[..<colon].trimmingWhitespace
        let value = line[line.index(after: colon)...].trimmingWhitespace
        if !name.isEmpty { accumulator.headers.append(HTTPHeader(name, value)) }
    }
    return length
}

/// A CA bundle: a regular file (never a FIFO waited on) of at most 16 MiB, far above the
/// system's few hundred kilobytes.
/// Byte classes of RFC 9110 that the transport checks before anything reaches the wire.
enum HTTPSyntax {
    /// `tchar`: what a method or header name may hold.
    static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    /// A header value may hold visible characters, spaces and tabs, never CR, LF or NUL.
    static func isHeaderValueByte(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "\t") || (byte >= 0x20 && byte != 0x7f)
    }
}
