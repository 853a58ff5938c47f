import Basics
import CCurl
import Glibc
import PortalTokenCore

/// The proxy's transport (docs/proxy.md, "Streaming"): one request over libcurl whose bodies
/// stream in both directions through callbacks, never held whole. The rules of `CurlTransport`
/// hold, and more strictly:
/// - http and https only; no redirect is followed (a 3xx is passed back as it is);
/// - TLS peer and host verification always on; `caBundlePath` adds to the system's trust;
/// - no proxy, whatever `http_proxy`, `https_proxy` or `ALL_PROXY` say: the proxy's requests
///   carry the session token, and go to the Portal API origin directly;
/// - the connect bound is in milliseconds; after it, a transfer that moves nothing for the total
///   bound (rounded up to whole seconds) is cut, so a large body may take as long as it keeps moving.
///
/// Nothing here logs. The `Authorization` line is wiped in libcurl's header list before it is freed.
public final class CurlStreamingTransport: StreamingHTTPTransport {
    public let options: HTTPTransportOptions

    public init(options: HTTPTransportOptions = HTTPTransportOptions()) {
        self.options = options
    }

    public func exchange(_ request: StreamedHTTPRequest, into sink: any HTTPResponseSink) throws(HTTPError)
        -> StreamedHTTPOutcome
    {
        let lowered = request.url.prefix(8).lowercased()
        guard lowered.hasPrefix("http://") || lowered.hasPrefix("https://") else { throw .unsupportedURL }
        guard let host = HTTPError.hostForMessages(request.url) else { throw .unsupportedURL }
        guard LibCurl.loaded != nil else {
            throw .other(
                host: host, detail: "libcurl (\(LibCurl.soname)) could not be loaded; install Debian's libcurl4")
        }
        guard LibCurl.globalInitialisation == CURLE_OK, let handle = LibCurl.functions.easyInit() else {
            throw .other(host: host, detail: "libcurl could not be initialised")
        }
        let context = StreamContext(sink: sink, body: request.body)
        var state = HandleState(handle: handle, host: host)
        defer {
            LibCurl.functions.easyCleanup(handle)
            state.release()
        }
        try state.configure(request, options: options, context: context)
        let code = LibCurl.functions.easyPerform(handle)
        var effective: UnsafeMutablePointer<CChar>?
        _ = LibCurl.functions.getinfoString(handle, CURLINFO_EFFECTIVE_URL, &effective)
        let url = effective.map { String(cString: $0) } ?? request.url
        if let refusal = state.listenerRefusal { throw refusal }
        if context.began {
            return StreamedHTTPOutcome(status: context.status, effectiveURL: url, completed: code == CURLE_OK)
        }
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            return try failure(.timedOut(host: host, milliseconds: options.totalTimeoutMilliseconds))
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST:
            return try failure(.cannotConnect(host: host))
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE:
            return try failure(.tlsFailure(host: host, detail: "the server's certificate could not be verified"))
        default:
            let text = LibCurl.functions.easyStrerror(code).map { String(cString: $0).lowercased() } ?? "error"
            return try failure(.other(host: host, detail: text))
        }
    }

    private func failure(_ error: HTTPError) throws(HTTPError) -> StreamedHTTPOutcome { throw error }
}

/// What the callbacks share: where the answer goes and where the request body comes from.
private final class StreamContext {
    let sink: any HTTPResponseSink
    let body: (any HTTPBodySource)?
    var status = 0
    var headers: [HTTPHeader] = []
    var began = false

    init(sink: any HTTPResponseSink, body: (any HTTPBodySource)?) {
        self.sink = sink
        self.body = body
    }
}

private struct HandleState: CurlHandleResources {
    let handle: UnsafeMutableRawPointer
    let host: String
    var cStrings: [UnsafeMutablePointer<CChar>] = []
    var headerList: UnsafeMutablePointer<curl_slist>?
    var caBlob: UnsafeMutableRawBufferPointer?
    let listenerCheck = ListenerOwnerCheck()

    init(handle: UnsafeMutableRawPointer, host: String) {
        self.handle = handle
        self.host = host
    }

    mutating func configure(
        _ request: StreamedHTTPRequest, options: HTTPTransportOptions, context: StreamContext
    ) throws(HTTPError) {
        try setTarget(request.url, connectTimeoutMilliseconds: options.connectTimeoutMilliseconds)
        try set(CURLOPT_LOW_SPEED_LIMIT, 1)
        try set(CURLOPT_LOW_SPEED_TIME, max(1, (options.totalTimeoutMilliseconds + 999) / 1000))
        // No proxy, whatever the environment says.
        try disableProxy()
        if let path = options.caBundlePath { try trustAdditionally(caBundleAt: path) }
        if let path = options.unixSocketPath { try connect(toUnixSocket: path) }

        let pointer = Unmanaged.passUnretained(context).toOpaque()
        try check(LibCurl.functions.setoptWriteCallback(handle, CURLOPT_WRITEFUNCTION, streamBody))
        try check(LibCurl.functions.setoptPointer(handle, CURLOPT_WRITEDATA, pointer))
        try check(LibCurl.functions.setoptWriteCallback(handle, CURLOPT_HEADERFUNCTION, streamHeader))
        try check(LibCurl.functions.setoptPointer(handle, CURLOPT_HEADERDATA, pointer))

        let method = request.method
        try checkMethod(method)
        if request.body != nil {
            // curl_read_callback has the write callback's C type.
            try check(LibCurl.functions.setoptWriteCallback(handle, CURLOPT_READFUNCTION, streamRequestBody))
            try check(LibCurl.functions.setoptPointer(handle, CURLOPT_READDATA, pointer))
            try set(CURLOPT_UPLOAD, 1)
            try set(CURLOPT_CUSTOMREQUEST, string: method)
            if let length = request.bodyLength {
                try check(LibCurl.functions.setoptOffT(handle, CURLOPT_INFILESIZE_LARGE, curl_off_t(length)))
            } else {
                try append(header: "Transfer-Encoding: chunked")
            }
        } else {
            try setBodilessMethod(method)
        }

        for header in request.headers {
            try checkCarriable(header)
            // "Name;" sends a header with an empty value; "Name:" would remove libcurl's own.
            try append(header: header.value.isEmpty ? "\(header.name);" : "\(header.name): \(header.value)")
        }
        // Built in memory wiped once libcurl has its copy: the client's token never lingers.
        if let authorization = request.authorization { try append(authorization: authorization) }
        // libcurl's own defaults are not the client's: no Accept it did not send, no waiting for 100.
        if !request.headers.contains(where: { $0.name.lowercased() == "accept" }) { try append(header: "Accept:") }
        try append(header: "Expect:")
        try check(LibCurl.functions.setoptPointer(handle, CURLOPT_HTTPHEADER, headerList))
    }

    mutating func release() { releaseHandleResources() }
}

/// Each header line of the answer; the blank line after a final (non-1xx) status line hands the
/// head to the sink. Trailer lines after the body are dropped.
private func streamHeader(
    _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ pointer: UnsafeMutableRawPointer?
) -> Int {
    let length = size * count
    guard let pointer, let data else { return length }
    let context = Unmanaged<StreamContext>.fromOpaque(pointer).takeUnretainedValue()
    if context.began { return length }
    var bytes = UnsafeRawBufferPointer(start: data, count: length)[...]
    while let last = bytes.last, last == UInt8(ascii: "\r") || last == UInt8(ascii: "\n") { bytes = bytes.dropLast() }
    let line = String(decoding: bytes, as: UTF8.self)
    if line.hasPrefix("HTTP/") {
        let parts = line.split(separator: " ", maxSplits: 2)
        context.status = parts.count >= 2 ? Int(parts[1]) ?? 0 : 0
        context.headers = []
    } else if line.isEmpty {
        guard context.status >= 200 else { return length }
        let (headers, contentLength) = ProxyRules.responseHeaders(context.headers)
        do {
            try context.sink.begin(status: context.status, headers: headers, contentLength: contentLength)
            context.began = true
        } catch {
            return 0
        }
    } else if let colon = line.firstIndex(of: ":") {
        let name = line[..<colon].trimmingWhitespace
        let value = line[line.index(after: colon)...].trimmingWhitespace
        if !name.isEmpty { context.headers.append(HTTPHeader(name, value)) }
    }
    return length
}

private func streamBody(
    _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ pointer: UnsafeMutableRawPointer?
) -> Int {
    let length = size * count
    guard let pointer else { return 0 }
    let context = Unmanaged<StreamContext>.fromOpaque(pointer).takeUnretainedValue()
    guard context.began else { return 0 }
    guard let data, length > 0 else { return length }
    do {
        try context.sink.write(UnsafeRawBufferPointer(start: data, count: length))
        return length
    } catch {
        return 0
    }
}

private func streamRequestBody(
    _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ pointer: UnsafeMutableRawPointer?
) -> Int {
    let abort = Int(CURL_READFUNC_ABORT)
    guard let pointer, let data else { return abort }
    let context = Unmanaged<StreamContext>.fromOpaque(pointer).takeUnretainedValue()
    guard let body = context.body else { return 0 }
    do {
        return try body.read(into: UnsafeMutableRawBufferPointer(start: data, count: size * count))
    } catch {
        return abort
    }
}
