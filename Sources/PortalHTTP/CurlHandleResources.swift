import Basics
import CCurl
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

/// libcurl's fixed text for a code; unlike its error buffer it never holds a URL.
func curlErrorText(_ code: CURLcode) -> String {
    guard let text = LibCurl.functions.easyStrerror(code) else { return "libcurl error \(code.rawValue)" }
    return String(cString: text).lowercased()
}

/// A CA bundle, read within a bound.
func readCABundle(_ path: String) -> [UInt8]? {
    try? FileReading.contents(of: path, limit: 16 << 20)
}
