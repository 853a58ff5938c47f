/// The host rules (docs/portal-api.md, "Portal hosts"): which URLs are Portal's (trace id, 401 invalidation) and
/// which may receive a bearer token. Both gates parse URLs themselves, in one left-to-right pass,
/// so that a 200 000-character input costs linear time, and they log nothing: the URLs they see
/// may carry queries and grants.
///
/// Parsing is deliberately narrower than a general URL parser. Anything unusual in the authority
/// (a `%`, a character outside `a-z 0-9 . _ -`, an empty label, an IPv6 literal other than
/// `[::1]`, a port that is not a number) makes the URL nobody's, so a gate fails closed.
public struct PortalHostGate: Sendable {
    /// Hosts that count as Portal's for the trace id and for 401 invalidation (docs/portal-api.md, "Portal hosts").
    public let registeredHosts: PortalHostRegistry
    /// Host and port pairs that may receive the bearer besides Portal's own domains (docs/portal-api.md, "Portal
    /// hosts").
    public let configuredEndpoints: [PortalEndpoint]

    public init(registeredHosts: PortalHostRegistry, configuredEndpoints: [PortalEndpoint]) {
        self.registeredHosts = registeredHosts
        self.configuredEndpoints = configuredEndpoints
    }

    /// The gate for one configured API: its host is registered (docs/portal-api.md, "Headers": a custom API host also
    /// receives the trace id) and its host and port are the one configured endpoint.
    public init(apiBase: PortalAPIBase, registeredHosts: PortalHostRegistry = PortalHostRegistry()) {
        var registry = registeredHosts
        registry.register(apiBase.url)
        self.init(registeredHosts: registry, configuredEndpoints: PortalEndpoint.normalize([apiBase.url]))
    }

    /// docs/portal-api.md, "Portal hosts" `isPortalOwnedUrl`: Portal's domains, loopback, or a registered host; any
    /// scheme, any port.
    public func isPortalOwned(_ url: String) -> Bool {
        Self.isPortalOwnedURL(url, registeredHosts: registeredHosts)
    }

    /// docs/portal-api.md, "Portal hosts": whether a bearer token may be attached to a request for `url`.
    public func allowsBearer(_ url: String) -> Bool {
        Self.allowsBearer(url, configuredEndpoints: configuredEndpoints)
    }

    /// Whether a credential-protocol request names a Portal origin (docs/sessions.md, "Portal origins in the credential
    /// protocol"): the bearer rule applied to git's `protocol` and `host` (which may end in `:port`). A host that
    /// carries anything a URL authority could smuggle (`/`, `@`, `?`, `#`, `\`, `%`, spaces or
    /// control characters) is never a Portal origin.
    public func isPortalOrigin(protocolName: String, host: String) -> Bool {
        let scheme = protocolName.lowercased()
        guard scheme == "http" || scheme == "https", !host.isEmpty else { return false }
        for byte in host.utf8 {
            switch byte {
            case UInt8(ascii: "/"), UInt8(ascii: "@"), UInt8(ascii: "?"), UInt8(ascii: "#"),
                UInt8(ascii: "\\"), UInt8(ascii: "%"), UInt8(ascii: " "), 0..<0x20, 0x7f...:
                return false
            default: continue
            }
        }
        return allowsBearer("\(scheme)://\(host)/")
    }

    /// Routing when the configured API host cannot be read: whether a credential-protocol
    /// request could still be about Portal, and so needs that setting fixed first. It could when
    /// it names one of Portal's own domains over https, or a host the unreadable value itself
    /// names. Any other host (github.com) is not Portal's whatever the setting was meant to say.
    public static func mayBePortalOrigin(protocolName: String, host: String, unreadableAPIHost: String) -> Bool {
        if PortalHostGate(registeredHosts: PortalHostRegistry(), configuredEndpoints: [])
            .isPortalOrigin(protocolName: protocolName, host: host)
        {
            return true
        }
        let name = (host.split(separator: ":", maxSplits: 1).first.map(String.init) ?? host).lowercased()
        return !name.isEmpty && unreadableAPIHost.lowercased().firstByteRange(of: name) != nil
    }

    // MARK: The rules

    /// docs/portal-api.md, "Portal hosts": parse; loopback, Portal's apex domains and their subdomains, or exactly a
    /// registered host.
    public static func isPortalOwnedURL(_ url: String, registeredHosts: PortalHostRegistry) -> Bool {
        guard let authority = URLAuthority(parsing: url) else { return false }
        switch authority.hostKind {
        case .loopback, .ipv6Loopback, .portalApex: return true
        case .other: return registeredHosts.contains(authority.host)
        }
    }

    /// docs/portal-api.md, "Portal hosts" `isPortalRpcUrl`: http or https only; Portal's apex domains over https on any
    /// port; loopback only when host and port equal a configured endpoint (http or https); any other
    /// host when it equals a configured endpoint and the scheme is https, or http where that
    /// endpoint was configured with an explicit `http://` (the user chose cleartext for it).
    /// `[::1]` can never be configured, so it never qualifies.
    public static func allowsBearer(_ url: String, configuredEndpoints: [PortalEndpoint]) -> Bool {
        guard let authority = URLAuthority(parsing: url) else { return false }
        let isHTTPS = authority.scheme == "https"
        guard isHTTPS || authority.scheme == "http" else { return false }
        switch authority.hostKind {
        case .portalApex:
            return isHTTPS
        case .ipv6Loopback:
            return false
        case .loopback:
            return configuredEndpoints.contains { $0.matches(authority) }
        case .other:
            return configuredEndpoints.contains { endpoint in
                endpoint.matches(authority) && (isHTTPS || endpoint.allowsCleartext)
            }
        }
    }
}

/// The hosts registered as Portal's (docs/portal-api.md, "Portal hosts"): the API host and any other host the
/// configuration names. Passed to the gate, never process-wide.
public struct PortalHostRegistry: Sendable, Equatable {
    public private(set) var hosts: Set<String> = []

    public init() {}

    public init(_ values: [String]) {
        for value in values { register(value) }
    }

    /// Registers a bare host, `host:port` or a full URL. Blank values, percent-encoded hosts,
    /// IP literals other than dotted decimals and values with userinfo are ignored.
    public mutating func register(_ value: String) {
        if let host = PortalEndpoint(configured: value)?.host { hosts.insert(host) }
    }

    /// Exact match only (a subdomain of a registered host is not registered).
    public func contains(_ host: String) -> Bool { hosts.contains(host) }
}

/// A configured host with an optional port (docs/portal-api.md, "Portal hosts" `normalizeEndpoints`).
public struct PortalEndpoint: Sendable, Hashable {
    public let host: String
    public let port: Int?
    /// True only for a value given with an explicit `http://` scheme: the one way a host that
    /// is not loopback can receive a bearer over cleartext.
    public let allowsCleartext: Bool

    public init(host: String, port: Int?, allowsCleartext: Bool = false) {
        self.host = host
        self.port = port
        self.allowsCleartext = allowsCleartext
    }

    /// Reads a bare host, `host:port` or a full URL; nil for blank values, userinfo, `%`,
    /// bracketed IP literals and anything that is not a valid host name or dotted decimal.
    public init?(configured value: String) {
        let trimmed = value.trimmingWhitespace
        guard !trimmed.isEmpty else { return nil }
        let authority: URLAuthority?
        if trimmed.utf8.contains(UInt8(ascii: "@")) {
            authority = nil
        } else if trimmed.firstByteRange(of: "://") != nil {
            authority = URLAuthority(parsing: trimmed)
        } else {
            authority = URLAuthority(parsing: "configured://" + trimmed)
        }
        guard let authority, authority.userinfo == nil, authority.hostKind != .ipv6Loopback else { return nil }
        self.init(host: authority.host, port: authority.port, allowsCleartext: authority.scheme == "http")
    }

    /// The endpoints a list of configured values names, in order, without repeats. (A handful at
    /// most, and routing builds the list on every run: searched in place, not hashed.)
    public static func normalize(_ values: [String]) -> [PortalEndpoint] {
        var endpoints: [PortalEndpoint] = []
        for value in values {
            guard let endpoint = PortalEndpoint(configured: value), !endpoints.contains(endpoint) else { continue }
            endpoints.append(endpoint)
        }
        return endpoints
    }

    /// Hosts equal, and ports equal once a missing port on either side reads as the default
    /// port of the URL's scheme.
    func matches(_ authority: URLAuthority) -> Bool {
        guard host == authority.host else { return false }
        let defaultPort = authority.scheme == "https" ? 443 : 80
        return (port ?? defaultPort) == (authority.port ?? defaultPort)
    }
}

/// The scheme and authority of a URL, read strictly (docs/portal-api.md, "Portal hosts" parse steps).
struct URLAuthority: Equatable {
    enum HostKind: Equatable { case loopback, ipv6Loopback, portalApex, other }

    /// Lowercased.
    let scheme: String
    /// Raw, as written; present only to tell that there was one.
    let userinfo: Substring?
    /// Lowercased, trailing dots removed.
    let host: String
    let port: Int?
    let hostKind: HostKind

    /// The longest host name DNS can carry, and the longest label.
    static let maximumHostLength = 253
    static let maximumLabelLength = 63

    init?(parsing url: String) {
        let bytes = url.utf8
        // Scheme: a letter, then letters, digits, '+', '-', '.'; then "://".
        var index = bytes.startIndex
        guard index != bytes.endIndex, Self.isLetter(bytes[index]) else { return nil }
        while index != bytes.endIndex, bytes[index] != UInt8(ascii: ":") {
            let byte = bytes[index]
            guard
                Self.isLetter(byte) || Self.isDigit(byte) || byte == UInt8(ascii: "+")
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
            else { return nil }
            index = bytes.index(after: index)
        }
        guard index != bytes.endIndex else { return nil }
        let schemeEnd = index
        for expected in [UInt8(ascii: ":"), UInt8(ascii: "/"), UInt8(ascii: "/")] {
            guard index != bytes.endIndex, bytes[index] == expected else { return nil }
            index = bytes.index(after: index)
        }
        let authorityStart = index
        // The authority ends at the first '/', '?' or '#'. Remember the last '@' on the way.
        var lastAt: String.UTF8View.Index?
        while index != bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "/") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") { break }
            if byte == UInt8(ascii: "@") { lastAt = index }
            index = bytes.index(after: index)
        }
        let authorityEnd = index

        var hostStart = authorityStart
        var userinfo: Substring?
        if let lastAt {
            let info = url[authorityStart..<lastAt]
            guard Self.isValidUserinfo(info.utf8) else { return nil }
            userinfo = info
            hostStart = bytes.index(after: lastAt)
        }
        let hostPort = bytes[hostStart..<authorityEnd]
        guard !hostPort.isEmpty, !hostPort.contains(UInt8(ascii: "%")) else { return nil }

        // Split host and port. A bracketed literal ends at ']'; otherwise the port follows the first ':'.
        var rawHost: Substring.UTF8View
        var rawPort: Substring.UTF8View?
        if hostPort.first == UInt8(ascii: "[") {
            guard let close = hostPort.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            let afterClose = bytes.index(after: close)
            rawHost = url[hostStart..<afterClose].utf8
            if afterClose != authorityEnd {
                guard bytes[afterClose] == UInt8(ascii: ":") else { return nil }
                rawPort = url[bytes.index(after: afterClose)..<authorityEnd].utf8
            }
        } else if let colon = hostPort.firstIndex(of: UInt8(ascii: ":")) {
            rawHost = url[hostStart..<colon].utf8
            rawPort = url[bytes.index(after: colon)..<authorityEnd].utf8
        } else {
            rawHost = url[hostStart..<authorityEnd].utf8
        }

        var port: Int?
        if let rawPort {
            guard !rawPort.isEmpty, rawPort.count <= 5 else { return nil }
            var value = 0
            for byte in rawPort {
                guard Self.isDigit(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            guard value <= 65_535 else { return nil }
            port = value
        }

        // Trailing dots go (a fully qualified name is the same host).
        while let last = rawHost.last, last == UInt8(ascii: ".") { rawHost = rawHost.dropLast() }
        guard !rawHost.isEmpty else { return nil }

        let hostKind: HostKind
        let host: String
        if rawHost.first == UInt8(ascii: "[") {
            // The only IPv6 literal any gate accepts is loopback.
            guard rawHost.elementsEqual("[::1]".utf8) else { return nil }
            host = "[::1]"
            hostKind = .ipv6Loopback
        } else {
            guard rawHost.count <= Self.maximumHostLength,
                let name = Self.lowercasedHostName(rawHost)
            else { return nil }
            host = name
            hostKind = Self.classify(name)
        }

        self.scheme = String(decoding: bytes[bytes.startIndex..<schemeEnd], as: UTF8.self).lowercased()
        self.userinfo = userinfo
        self.host = host
        self.port = port
        self.hostKind = hostKind
    }

    /// `^[a-z0-9][a-z0-9._-]*$` after lowercasing ASCII, with no empty label and no label longer
    /// than DNS allows; nil otherwise. Non-ASCII bytes (homoglyphs, full-width dots) fail here.
    private static func lowercasedHostName(_ raw: Substring.UTF8View) -> String? {
        var lowered: [UInt8] = []
        lowered.reserveCapacity(raw.count)
        var labelLength = 0
        var previousWasDot = true
        for byte in raw {
            var byte = byte
            if byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") { byte += 32 }
            if byte == UInt8(ascii: ".") {
                guard !previousWasDot else { return nil }
                previousWasDot = true
                labelLength = 0
            } else {
                guard isLetter(byte) || isDigit(byte) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-") else {
                    return nil
                }
                if lowered.isEmpty, !(isLetter(byte) || isDigit(byte)) { return nil }
                previousWasDot = false
                labelLength += 1
                guard labelLength <= maximumLabelLength else { return nil }
            }
            lowered.append(byte)
        }
        return String(decoding: lowered, as: UTF8.self)
    }

    private static func classify(_ host: String) -> HostKind {
        if host == "localhost" || host == "127.0.0.1" || host.hasSuffix(".localhost") { return .loopback }
        for apex in ["portalhq.io", "portalhq.dev"] where host == apex || host.hasSuffix("." + apex) {
            return .portalApex
        }
        return .other
    }

    /// RFC 3986 userinfo: unreserved, sub-delims, ':' and percent escapes. Anything else (a
    /// backslash, a space) is where parsers disagree about the host, so the URL is refused.
    private static func isValidUserinfo(_ bytes: Substring.UTF8View) -> Bool {
        var remainingHexDigits = 0
        for byte in bytes {
            if remainingHexDigits > 0 {
                guard isHexDigit(byte) else { return false }
                remainingHexDigits -= 1
                continue
            }
            switch byte {
            case UInt8(ascii: "%"): remainingHexDigits = 2
            case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"),
                UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"),
                UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"),
                UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="), UInt8(ascii: ":"):
                continue
            default:
                guard isLetter(byte) || isDigit(byte) else { return false }
            }
        }
        return remainingHexDigits == 0
    }

    static func isLetter(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
    }

    static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        isDigit(byte) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F"))
    }
}
