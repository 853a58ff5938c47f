import Basics

/// Redirect handling (docs/portal-api.md, "Redirect URLs"): whether a URL delivered to portal-token is a sign-in
/// redirect for this configuration, and what to do with it.
///
/// Everything here works on the UTF-8 bytes in one or two left-to-right passes, with no regular
/// expression, so that a 200 000-character input costs linear time. Nothing here logs, and no
/// result carries the URL: it holds a single-use grant.
public enum RedirectURL {
    /// Longest input considered, in UTF-16 code units of the raw text (docs/portal-api.md, "Redirect URLs").
    public static let maximumUTF16Length = 8192
    /// Longest `error` value reported, in Characters (docs/portal-api.md, "Redirect URLs").
    public static let maximumErrorLength = 100

    // MARK: The order of checks (docs/portal-api.md, "Redirect URLs")

    /// Why a URL is not a sign-in redirect for this configuration. For traces only: no case
    /// carries any of the URL.
    public enum NotOursReason: String, Sendable, Hashable {
        case emptyOrTooLong = "empty or longer than 8192 UTF-16 units"
        case otherTarget = "not the configured redirect URL"
        case noGrant = "no token parameter"
        case noMethodMarker = "neither authMethod=EMAIL_MAGIC_LINK nor login_type=GOOGLE|APPLE"
    }

    public enum Evaluation: Sendable, Equatable {
        /// Not ours: nothing is sent, nothing stored (`redirect` exits 7).
        case notOurs(NotOursReason)
        /// The redirect carried an `error` parameter: its decoded value cut to 100 Characters.
        /// Nothing is sent, nothing stored.
        case authenticationFailed(message: String)
        /// A grant to exchange, once, at `endpoint`.
        case exchange(grant: Secret, endpoint: GrantEndpoint)
    }

    /// Runs the checks (docs/portal-api.md, "Redirect URLs") in that order: length, target, query, `error`, token,
    /// routing. `configured` is the configured redirect URL (already trimmed, docs/settings.md, "Settings Portal
    /// sign-in checks").
    ///
    /// Routing comes last here, after the token, where the SDK consults its replay memo in
    /// between; a URL without a method marker was never exchanged, so the order makes no
    /// difference to a replay.
    public static func evaluate(_ url: String, configured: String) -> Evaluation {
        // Step 1, on the raw input before any trimming. `utf16.count` is linear at worst.
        guard !url.isEmpty, url.utf16.count <= maximumUTF16Length else { return .notOurs(.emptyOrTooLong) }
        // Step 2.
        guard matches(url, configured: configured) else { return .notOurs(.otherTarget) }
        // Step 3, from the trimmed URL.
        let parameters = queryParameters(url.trimmingUnicodeWhitespace)
        // Step 4: an error wins even over a token, even when empty.
        if let error = parameters["error"] {
            return .authenticationFailed(message: String(error.prefix(maximumErrorLength)))
        }
        // Step 5.
        guard let token = parameters["token"], !token.isEmpty else { return .notOurs(.noGrant) }
        // Step 8.
        guard let endpoint = route(parameters) else { return .notOurs(.noMethodMarker) }
        return .exchange(grant: Secret(token), endpoint: endpoint)
    }

    /// docs/portal-api.md, "Redirect URLs": `authMethod` exactly `EMAIL_MAGIC_LINK` first, then `login_type` exactly
    /// `GOOGLE` or `APPLE`; anything else (other case included) is not ours.
    public static func route(_ parameters: [String: String]) -> GrantEndpoint? {
        if parameters["authMethod"] == AuthMethod.emailMagicLink.rawValue { return .magicLinkValidations }
        if let loginType = parameters["login_type"],
            loginType == AuthMethod.google.rawValue || loginType == AuthMethod.apple.rawValue
        {
            return .oauthTokens
        }
        return nil
    }

    // MARK: Target matching (docs/portal-api.md, "Matching")

    /// Both sides normalised, then compared byte for byte (not by Unicode equivalence: the path
    /// is case-sensitive and never decoded).
    public static func matches(_ incoming: String, configured: String) -> Bool {
        normalizeTarget(incoming).utf8.elementsEqual(normalizeTarget(configured).utf8)
    }

    /// Cut at the first `#`, then at the first `?`; trim; strip every trailing `/`; lowercase
    /// the scheme and authority (everything before the first `/` after a `://` that follows a
    /// non-empty scheme), or the whole text when there is no such `://`. The path keeps its case
    /// and its escapes.
    public static func normalizeTarget(_ url: String) -> String {
        var text = Substring(url)
        if let hash = text.utf8.firstIndex(of: UInt8(ascii: "#")) { text = text[..<hash] }
        if let question = text.utf8.firstIndex(of: UInt8(ascii: "?")) { text = text[..<question] }
        text = Substring(text.trimmingUnicodeWhitespace)
        text = strippingTrailingSlashes(text)
        if let separator = schemeSeparator(in: text) {
            let rest = text[separator...].utf8.dropFirst(3)
            let pathStart = rest.firstIndex(of: UInt8(ascii: "/")) ?? text.endIndex
            return text[..<pathStart].lowercased() + text[pathStart...]
        }
        return text.lowercased()
    }

    /// Every trailing `/` removed, by a backwards scan.
    public static func stripTrailingSlashes(_ text: String) -> String {
        String(strippingTrailingSlashes(Substring(text)))
    }

    static func strippingTrailingSlashes(_ text: Substring) -> Substring {
        let bytes = text.utf8
        var end = bytes.endIndex
        while end > bytes.startIndex {
            let previous = bytes.index(before: end)
            guard bytes[previous] == UInt8(ascii: "/") else { break }
            end = previous
        }
        return text[..<end]
    }

    /// The index of the first `://`, when something comes before it.
    private static func schemeSeparator(in text: Substring) -> String.Index? {
        let bytes = text.utf8
        var index = bytes.startIndex
        while index < bytes.endIndex {
            if bytes[index] == UInt8(ascii: ":") {
                let second = bytes.index(after: index)
                if second < bytes.endIndex, bytes[second] == UInt8(ascii: "/") {
                    let third = bytes.index(after: second)
                    if third < bytes.endIndex, bytes[third] == UInt8(ascii: "/") {
                        return index == bytes.startIndex ? nil : index
                    }
                }
            }
            index = bytes.index(after: index)
        }
        return nil
    }

    // MARK: Query parsing (docs/portal-api.md, "The query")

    /// The query parameters: text after the first `?` and before the first `#`, split on `&`
    /// (empty pieces skipped), each piece at its first `=`; keys and values decoded; empty
    /// keys skipped; the last occurrence of a key wins.
    public static func queryParameters(_ url: String) -> [String: String] {
        let bytes = Array(url.utf8)
        let end = bytes.firstIndex(of: UInt8(ascii: "#")) ?? bytes.endIndex
        guard let question = bytes[..<end].firstIndex(of: UInt8(ascii: "?")) else { return [:] }
        var parameters: [String: String] = [:]
        for piece in bytes[(question + 1)..<end].split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let key: String, value: String
            if let equals = piece.firstIndex(of: UInt8(ascii: "=")) {
                key = decodeComponent(piece[..<equals])
                value = decodeComponent(piece[(equals + 1)...])
            } else {
                key = decodeComponent(piece)
                value = ""
            }
            guard !key.isEmpty else { continue }
            parameters[key] = value
        }
        return parameters
    }

    /// `+` is a space and `%HH` a byte (either case of hex), read as UTF-8. A malformed escape or
    /// bytes that are not UTF-8 leave the original text, `+` included.
    public static func decodeComponent(_ text: String) -> String {
        decodeComponent(Array(text.utf8)[...])
    }

    static func decodeComponent(_ raw: ArraySlice<UInt8>) -> String {
        guard let output = PercentCoding.decodeStrictly(raw, plusAsSpace: true) else {
            return String(decoding: raw, as: UTF8.self)
        }
        // The raw slice was cut from a String at ASCII bytes, so it is valid UTF-8 itself.
        return String(validating: output, as: UTF8.self) ?? String(decoding: raw, as: UTF8.self)
    }

    // MARK: Custom scheme (docs/portal-api.md, "Loopback redirect URLs")

    /// The scheme a desktop handler registers for (`x-scheme-handler/<scheme>`): the text
    /// before the first `:`, an ASCII letter then letters, digits, `+`, `-` or `.`, lowercased.
    /// nil for `http` and `https` (the loopback listener's business) and anything else.
    public static func customScheme(_ url: String) -> String? {
        let text = Substring(url.trimmingUnicodeWhitespace)
        guard let colon = text.utf8.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        let scheme = text[..<colon].utf8
        guard let first = scheme.first, URLAuthority.isLetter(first) else { return nil }
        for byte in scheme {
            guard
                URLAuthority.isLetter(byte) || URLAuthority.isDigit(byte) || byte == UInt8(ascii: "+")
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
            else { return nil }
        }
        let lowered = String(decoding: scheme, as: UTF8.self).lowercased()
        return lowered == "http" || lowered == "https" ? nil : lowered
    }
}

/// A redirect URL that portal-token completes itself by listening on loopback
/// (docs/portal-api.md, "Loopback redirect URLs"): `http://127.0.0.1:PORT/path` or `http://localhost:PORT/path`.
public struct LoopbackRedirect: Sendable, Equatable {
    /// `127.0.0.1` or `localhost`, lowercased.
    public let host: String
    /// The port to listen on; 80 when the URL names none.
    public let port: UInt16
    /// The scheme and authority exactly as configured (`http://localhost:8765`): a request
    /// target appended to it gives the URL the browser was sent to.
    public let base: String

    /// nil when the configured redirect URL is not a plain-http loopback URL with a port that
    /// fits: it is then completed by `portal-token redirect`.
    public init?(redirectURL: String) {
        let text = Substring(redirectURL.trimmingUnicodeWhitespace)
        let scheme = "http://"
        guard text.utf8.count > scheme.utf8.count,
            text.utf8.prefix(scheme.utf8.count).map({ $0 | 0x20 }).elementsEqual(scheme.utf8)
        else { return nil }
        let afterScheme = text.utf8.index(text.startIndex, offsetBy: scheme.utf8.count)
        let rest = text[afterScheme...]
        let authorityEnd =
            rest.utf8.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
            ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        let hostPart: Substring, portPart: Substring?
        if let colon = authority.utf8.firstIndex(of: UInt8(ascii: ":")) {
            hostPart = authority[..<colon]
            portPart = authority[authority.utf8.index(after: colon)...]
        } else {
            hostPart = authority
            portPart = nil
        }
        let host = hostPart.lowercased()
        guard host == "127.0.0.1" || host == "localhost" else { return nil }
        if let portPart {
            guard !portPart.isEmpty, portPart.utf8.count <= 5, portPart.utf8.allSatisfy(URLAuthority.isDigit),
                let number = UInt16(portPart), number > 0
            else { return nil }
            port = number
        } else {
            port = 80
        }
        self.host = host
        base = String(text[..<authorityEnd])
    }

    /// The addresses to listen on: 127.0.0.1, and for `localhost` also `::1` where the system
    /// has IPv6, since browsers may resolve `localhost` to either.
    public var listensOnIPv6Loopback: Bool { host == "localhost" }
}
