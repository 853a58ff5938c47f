import Basics
import CCurl
import CPeerCredentials
import Glibc
import PortalTokenCore

/// What a libcurl easy handle is given for one request and must outlive it: the option strings
/// (libcurl keeps pointers to them), the header list (one line may be `Authorization`) and the
/// CA blob. Both transports set their options through this and free them the same way: the
/// header lines are wiped before libcurl frees them.
protocol CurlHandleResources {
    var handle: UnsafeMutableRawPointer { get }
    /// The host named in errors.
    var host: String { get }
    var cStrings: [UnsafeMutablePointer<CChar>] { get set }
    var headerList: UnsafeMutablePointer<curl_slist>? { get set }
    var caBlob: UnsafeMutableRawBufferPointer? { get set }
    /// What the connection check found; the request's error names it.
    var listenerCheck: ListenerOwnerCheck { get }
}

extension CurlHandleResources {
    mutating func append(header: String) throws(HTTPError) {
        guard let list = LibCurl.functions.slistAppend(headerList, header) else {
            throw .other(host: host, detail: "out of memory")
        }
        headerList = list
    }

    mutating func set(_ option: CURLoption, string: String) throws(HTTPError) {
        guard let copy = strdup(string) else { throw .other(host: host, detail: "out of memory") }
        cStrings.append(copy)
        try check(LibCurl.functions.setoptPointer(handle, option, copy))
    }

    func set(_ option: CURLoption, _ value: Int) throws(HTTPError) {
        try check(LibCurl.functions.setoptLong(handle, option, value))
    }

    /// Where the request goes, and the rules both transports keep for it: http or https only,
    /// no redirect followed, no signals (libcurl's threaded resolver needs none), the connect
    /// bound, and the TLS peer and host name verified.
    mutating func setTarget(_ url: String, connectTimeoutMilliseconds: Int) throws(HTTPError) {
        try set(CURLOPT_URL, string: url)
        try set(CURLOPT_PROTOCOLS_STR, string: "http,https")
        try set(CURLOPT_REDIR_PROTOCOLS_STR, string: "http,https")
        try set(CURLOPT_FOLLOWLOCATION, 0)
        try set(CURLOPT_MAXREDIRS, 0)
        try set(CURLOPT_NOSIGNAL, 1)
        try set(CURLOPT_CONNECTTIMEOUT_MS, connectTimeoutMilliseconds)
        try set(CURLOPT_SSL_VERIFYPEER, 1)
        try set(CURLOPT_SSL_VERIFYHOST, 2)
    }

    /// The method of a request without a body: GET and HEAD as libcurl names them, any other as
    /// a custom method on a GET, so that no Content-Length is sent (docs/portal-api.md, "Headers").
    mutating func setBodilessMethod(_ method: String) throws(HTTPError) {
        if method == "HEAD" { return try set(CURLOPT_NOBODY, 1) }
        try set(CURLOPT_HTTPGET, 1)
        if method != "GET" { try set(CURLOPT_CUSTOMREQUEST, string: method) }
    }

    /// Throws unless `method` is an HTTP token.
    func checkMethod(_ method: String) throws(HTTPError) {
        guard !method.isEmpty, method.utf8.allSatisfy({ HTTPSyntax.isTokenCharacter($0) }) else {
            throw .other(host: host, detail: "the request method is not a valid HTTP token")
        }
    }

    /// An empty CURLOPT_PROXY turns proxies off for this request, whatever the environment says;
    /// CURLOPT_NOPROXY "*" says the same to any proxy setting libcurl finds later.
    mutating func disableProxy() throws(HTTPError) {
        try set(CURLOPT_PROXY, string: "")
        try set(CURLOPT_NOPROXY, string: "*")
    }

    /// Throws unless the header's name is an HTTP token and its value holds only bytes a field
    /// value may.
    func checkCarriable(_ header: HTTPHeader) throws(HTTPError) {
        guard !header.name.isEmpty, header.name.utf8.allSatisfy({ HTTPSyntax.isTokenCharacter($0) }),
            header.value.utf8.allSatisfy({ HTTPSyntax.isHeaderValueByte($0) })
        else {
            throw .other(host: host, detail: "a request header has a name or value HTTP cannot carry")
        }
    }

    /// Appends `Authorization: <value>`, built in memory that is wiped once libcurl has its copy
    /// (the list's own copy is wiped on release).
    mutating func append(authorization: Secret) throws(HTTPError) {
        try requireOwnListenerOnLoopback()
        let prefix = Array("Authorization: ".utf8)
        var list: UnsafeMutablePointer<curl_slist>?
        let carriable: Bool = authorization.withBytes { value in
            guard value.allSatisfy({ HTTPSyntax.isHeaderValueByte($0) }) else { return false }
            let line = UnsafeMutablePointer<CChar>.allocate(capacity: prefix.count + value.count + 1)
            defer {
                explicit_bzero(line, prefix.count + value.count + 1)
                line.deallocate()
            }
            let raw = UnsafeMutableRawPointer(line)
            raw.copyMemory(from: prefix, byteCount: prefix.count)
            if let base = value.baseAddress { (raw + prefix.count).copyMemory(from: base, byteCount: value.count) }
            line[prefix.count + value.count] = 0
            list = LibCurl.functions.slistAppend(headerList, line)
            return true
        }
        guard carriable else {
            throw .other(host: host, detail: "the Authorization value has a character HTTP cannot carry")
        }
        guard let list else { throw .other(host: host, detail: "out of memory") }
        headerList = list
    }

    /// Once the connection is made (or reused) and before a byte of the request is sent, a
    /// connection to a loopback address goes on only when the socket it reached belongs to this
    /// user (docs/security.md, "Bearers on loopback"): another user may hold a port the proxy or a
    /// local server has left. Set with every request that carries `Authorization`, and with every
    /// request to a Unix socket (the agent's), whose listener must be this user's too.
    func requireOwnListenerOnLoopback() throws(HTTPError) {
        try check(LibCurl.functions.setoptPrereqCallback(handle, checkListenerOwner))
        let context = Unmanaged.passUnretained(listenerCheck).toOpaque()
        try check(LibCurl.functions.setoptPointer(handle, CURLOPT_PREREQDATA, context))
    }

    /// Sends the request to the Unix socket at `path` (the agent's), whose listener must run as
    /// this user: the check above reads the kernel's word on the connection libcurl made.
    mutating func connect(toUnixSocket path: String) throws(HTTPError) {
        try set(CURLOPT_UNIX_SOCKET_PATH, string: path)
        listenerCheck.unixSocketPath = path
        try check(LibCurl.functions.setoptSockoptCallback(handle, noteSocket))
        try check(
            LibCurl.functions.setoptPointer(
                handle, CURLOPT_SOCKOPTDATA, Unmanaged.passUnretained(listenerCheck).toOpaque()))
        try requireOwnListenerOnLoopback()
    }

    /// The error for a transfer the connection check stopped, if it did.
    var listenerRefusal: HTTPError? {
        listenerCheck.refusedEndpoint.map { .foreignListener(endpoint: $0) }
    }

    func check(_ code: CURLcode) throws(HTTPError) {
        guard code == CURLE_OK else {
            throw .other(host: host, detail: "libcurl refused an option (\(curlErrorText(code)))")
        }
    }

    /// Trusts the bundle's CA certificates and no others: neither the system's bundle (which a
    /// blob replaces) nor its directory of hashed certificates (`CURLOPT_CAPATH`, unset).
    mutating func trustOnly(caBundleAt path: String) throws(HTTPError) {
        guard let bundle = readCABundle(path) else { throw .caBundleUnreadable(path: path) }
        try setCABlob(bundle)
        try check(LibCurl.functions.setoptPointer(handle, CURLOPT_CAPATH, nil))
    }

    /// Trusts the system's CA certificates and the bundle's: libcurl's `CURLOPT_CAINFO` alone
    /// would replace the system bundle, so the two files go to OpenSSL together as one blob.
    mutating func trustAdditionally(caBundleAt path: String) throws(HTTPError) {
        guard let extra = readCABundle(path) else { throw .caBundleUnreadable(path: path) }
        var systemBundle: [UInt8] = []
        var defaultPath: UnsafeMutablePointer<CChar>?
        if LibCurl.functions.getinfoString(handle, CURLINFO_CAINFO, &defaultPath) == CURLE_OK, let defaultPath {
            systemBundle = readCABundle(String(cString: defaultPath)) ?? []
        }
        var combined = systemBundle
        if !combined.isEmpty, combined.last != UInt8(ascii: "\n") { combined.append(UInt8(ascii: "\n")) }
        combined += extra
        try setCABlob(combined)
    }

    private mutating func setCABlob(_ bytes: [UInt8]) throws(HTTPError) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 1)
        buffer.copyBytes(from: bytes)
        caBlob = buffer
        var blob = curl_blob(data: buffer.baseAddress, len: bytes.count, flags: UInt32(CURL_BLOB_NOCOPY))
        try check(LibCurl.functions.setoptPointer(handle, CURLOPT_CAINFO_BLOB, &blob))
    }

    /// Frees what the request was given, wiping every header line (one is `Authorization`)
    /// before libcurl frees the copies.
    mutating func releaseHandleResources() {
        if let list = headerList {
            var node: UnsafeMutablePointer<curl_slist>? = list
            while let current = node {
                if let data = current.pointee.data { explicit_bzero(data, strlen(data)) }
                node = current.pointee.next
            }
            LibCurl.functions.slistFreeAll(list)
            headerList = nil
        }
        if let caBlob {
            caBlob.deallocate()
            self.caBlob = nil
        }
        for string in cStrings { free(string) }
        cStrings = []
    }
}

/// What `checkListenerOwner` found for one request: the loopback endpoint it refused, if any.
final class ListenerOwnerCheck {
    var refusedEndpoint: String?
    /// The Unix socket the request goes to, and the descriptor libcurl made for it (told by
    /// `noteSocket` before it connects).
    var unixSocketPath: String?
    var socket: Int32 = -1

    /// Whether the listener at the far end of the request's Unix socket runs as this user
    /// (`SO_PEERCRED` of the very connection).
    var unixPeerIsOwnUser: Bool {
        var peer = portal_token_peer_credentials()
        guard socket >= 0, portal_token_read_peer_credentials(socket, &peer) == 0 else { return false }
        return OwnUser.isListener(uid: peer.uid)
    }
}

/// libcurl's CURLOPT_SOCKOPTFUNCTION: the socket of a new connection, before it connects.
private func noteSocket(_ context: UnsafeMutableRawPointer?, _ socket: curl_socket_t, _ purpose: curlsocktype)
    -> Int32
{
    guard let context else { return Int32(CURL_SOCKOPT_ERROR) }
    Unmanaged<ListenerOwnerCheck>.fromOpaque(context).takeUnretainedValue().socket = socket
    return Int32(CURL_SOCKOPT_OK)
}

/// libcurl's CURLOPT_PREREQFUNCTION: the connection is open, nothing is sent yet. A loopback peer
/// must be this user's socket (docs/security.md, "Bearers on loopback"); anything else goes on
/// (TLS and the host gate judge remote hosts). The kernel names the owner of the far end of this
/// very connection, one exact sock_diag lookup: the listener the connection reached, not whatever
/// holds the port by the time it is asked.
private func checkListenerOwner(
    _ context: UnsafeMutableRawPointer?, _ primaryIP: UnsafeMutablePointer<CChar>?,
    _ localIP: UnsafeMutablePointer<CChar>?, _ primaryPort: Int32, _ localPort: Int32
) -> Int32 {
    let abort = Int32(CURL_PREREQFUNC_ABORT)
    guard let context else { return abort }
    let check = Unmanaged<ListenerOwnerCheck>.fromOpaque(context).takeUnretainedValue()
    if let path = check.unixSocketPath {
        guard check.unixPeerIsOwnUser else {
            check.refusedEndpoint = path
            return abort
        }
        return Int32(CURL_PREREQFUNC_OK)
    }
    let primaryText = primaryIP.map { String(cString: $0) } ?? ""
    guard let remote = SocketAddress(primaryText, port: primaryPort) else {
        check.refusedEndpoint = "the server's address"
        return abort
    }
    guard remote.isLoopback else { return Int32(CURL_PREREQFUNC_OK) }
    let shown = primaryText.contains(":") ? "[\(primaryText)]:\(primaryPort)" : "\(primaryText):\(primaryPort)"
    guard let local = SocketAddress(localIP.map { String(cString: $0) } ?? "", port: localPort),
        local.family == remote.family
    else {
        check.refusedEndpoint = shown
        return abort
    }
    var owner: UInt32 = 0
    let found = remote.bytes.withUnsafeBufferPointer { far in
        local.bytes.withUnsafeBufferPointer { near in
            portal_token_tcp_socket_owner(
                remote.family, far.baseAddress, remote.port, near.baseAddress, local.port, &owner)
        }
    }
    guard found == 0, owner == geteuid() else {
        check.refusedEndpoint = shown
        return abort
    }
    return Int32(CURL_PREREQFUNC_OK)
}

/// An address as libcurl prints it (`127.0.0.1`, `::1`) and a port.
private struct SocketAddress {
    let family: Int32
    /// 4 or 16 bytes, in network order.
    let bytes: [UInt8]
    let port: UInt16

    init?(_ text: String, port: Int32) {
        guard let port = UInt16(exactly: port) else { return nil }
        self.port = port
        var ipv4 = in_addr()
        var ipv6 = in6_addr()
        if inet_pton(AF_INET, text, &ipv4) == 1 {
            (family, bytes) = (AF_INET, withUnsafeBytes(of: &ipv4) { Array($0) })
        } else if inet_pton(AF_INET6, text, &ipv6) == 1 {
            (family, bytes) = (AF_INET6, withUnsafeBytes(of: &ipv6) { Array($0) })
        } else {
            return nil
        }
    }

    /// 127.0.0.0/8 (plain or IPv4-mapped) or `::1`.
    var isLoopback: Bool {
        if family == AF_INET { return bytes[0] == 127 }
        let mapped: [UInt8] = Array(repeating: 0, count: 10) + [0xff, 0xff]
        return bytes.starts(with: mapped) ? bytes[12] == 127 : bytes == Array(repeating: 0, count: 15) + [1]
    }
}

/// libcurl's fixed text for a code; unlike its error buffer it never holds a URL.
func curlErrorText(_ code: CURLcode) -> String {
    guard let text = LibCurl.functions.easyStrerror(code) else { return "libcurl error \(code.rawValue)" }
    return String(cString: text).lowercased()
}

/// A CA bundle, read within a bound.
func readCABundle(_ path: String) -> [UInt8]? {
    try? FileReading.contents(of: path, limit: 16 << 20)
}
