/// The base URL of the Portal API, resolved from the configured API host (docs/portal-api.md, "Base URL").
public struct PortalAPIBase: Sendable, Equatable {
    public static let defaultHost = "api.portalhq.io"

    /// Scheme, authority and any path prefix, without a trailing `/`: `https://api.portalhq.io`.
    public let url: String

    /// Resolves a configured API host: trimmed, trailing `/` removed; a value starting with
    /// `http://` or `https://` is used as given; otherwise `localhost` and `127.0.0.1` (with any
    /// port) mean `http://` and everything else `https://`. The result must have a non-empty
    /// host made only of `a-z A-Z 0-9 . - : [ ]`.
    public init(apiHost: String = PortalAPIBase.defaultHost) throws(InvalidAPIHostError) {
        var value = Substring(apiHost.trimmingWhitespace)
        while value.last == "/" { value = value.dropLast() }
        let lowered = value.lowercased()
        let base: String
        if lowered.hasPrefix("http://") || lowered.hasPrefix("https://") {
            base = String(value)
        } else {
            let hostAndPort = lowered.prefix { $0 != "/" }
            let host = hostAndPort.prefix { $0 != ":" }
            base = (host == "localhost" || host == "127.0.0.1" ? "http://" : "https://") + String(value)
        }
        guard Self.isValid(base) else { throw InvalidAPIHostError() }
        url = base
    }

    /// The URL of an API path such as `/api/v3/clients/me`.
    public func url(path: String) -> String {
        path.hasPrefix("/") ? url + path : url + "/" + path
    }

    private static func isValid(_ base: String) -> Bool {
        guard let separator = base.firstByteRange(of: "://") else { return false }
        let scheme = base[..<separator.lowerBound]
        guard !scheme.isEmpty else { return false }
        let rest = base[separator.upperBound...]
        let authority = rest.prefix { $0 != "/" }
        guard !authority.isEmpty else { return false }
        for byte in authority.utf8 {
            guard
                URLAuthority.isLetter(byte) || URLAuthority.isDigit(byte) || byte == UInt8(ascii: ".")
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ":") || byte == UInt8(ascii: "[")
                    || byte == UInt8(ascii: "]")
            else { return false }
        }
        // Host, then optionally ':' and a port number; a bracketed IPv6 literal keeps its colons.
        var hostPart = authority[...], portPart: Substring?
        if authority.first == "[" {
            guard let close = authority.firstIndex(of: "]") else { return false }
            hostPart = authority[...close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.first == ":" else { return false }
                portPart = after.dropFirst()
            }
        } else if let colon = authority.firstIndex(of: ":") {
            hostPart = authority[..<colon]
            portPart = authority[authority.index(after: colon)...]
        }
        guard !hostPart.isEmpty else { return false }
        if let portPart {
            guard !portPart.isEmpty, portPart.count <= 5, portPart.utf8.allSatisfy(URLAuthority.isDigit) else {
                return false
            }
        }
        // A path prefix may follow, but no query, fragment, space or control character.
        for byte in rest.utf8
        where byte <= 0x20 || byte == 0x7f || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#") {
            return false
        }
        return true
    }

    /// The URL a path such as `/api/v3/clients/me`, or a URL on this base, names; nil for any other
    /// origin, which never gets the session's bearer.
    public func resolve(_ path: String) -> String? {
        if path.hasPrefix("/") && !path.hasPrefix("//") { return self.url(path: path) }
        let lowered = path.lowercased()
        let base = url.lowercased()
        if lowered == base || lowered.hasPrefix(base + "/") || lowered.hasPrefix(base + "?") { return path }
        return nil
    }
}

/// The configured API host cannot be turned into a URL; the value itself is not repeated.
public struct InvalidAPIHostError: Error, Sendable, Equatable {
    public init() {}
    public var message: String { "the API host is not a host name, host:port or http(s) URL" }
    public var hint: String? {
        "set --api-host or PORTAL_API_HOST to a value such as api.portalhq.io or localhost:3000"
    }
}
