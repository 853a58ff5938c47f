import Basics

/// The attributes of one credential-protocol request (gitcredentials(7), "Custom helpers").
///
/// Only the attributes portal-token acts on are kept; every other key (`wwwauth[]`, `continue`,
/// `quit`, an unknown capability, another helper's `state[]`, …) is read and ignored, so newer
/// versions of git keep working.
public struct CredentialRequest: Sendable {
    public var protocolName: String?
    public var host: CredentialHost?
    public var path: String?
    public var username: String?
    public var password: Secret?
    public var passwordExpiresAt: Int64?
    public var oauthRefreshToken: Secret?
    /// `authtype` and `credential` (git 2.46+): a pre-encoded Authorization value and its scheme.
    public var authType: String?
    public var credential: Secret?
    /// `ephemeral`: the credential is short-lived and must not be stored.
    public var isEphemeral = false
    /// `capability[]=authtype`: the client understands `authtype`, `credential` and `ephemeral`.
    public var advertisesAuthType = false
    /// `capability[]=state`: the client passes `state[]` values back on the next call.
    public var advertisesState = false
    /// The `state[]` values addressed to portal-token (those starting with `portal-token:`),
    /// prefix removed. Other helpers' values are ignored.
    public var state: [String] = []
    /// Whether the input held any `key=value` line at all, known or not. A request with none
    /// (EOF or a lone blank line) is how a script asks for the bare session token.
    public var hasAttributes = false

    public init() {}

    public var query: CredentialQuery {
        CredentialQuery(
            protocolName: protocolName, host: host, path: path, username: username,
            includesBearerOnly: advertisesAuthType)
    }

    /// The token a request carries for an origin: its password, else (git 2.46+) its
    /// pre-encoded `credential`.
    public var passwordOrCredential: Secret? { password ?? credential }
}

/// The `state[]` values portal-token emits and reads back.
public enum CredentialState {
    /// Every value portal-token emits starts with this; values without it belong to others.
    public static let prefix = "portal-token:"
    /// Emitted with a credential `get` served from the store: the `store` git sends after using
    /// it has nothing new to write.
    public static let served = "served"
}

public enum CredentialProtocolError: Error, Equatable, Sendable {
    /// A line without `=`; only its number is reported, since the line may hold a secret.
    case missingSeparator(line: Int)
    case forbiddenCharacter(line: Int, character: String)
    case invalidUTF8(line: Int)
    case invalidExpiry(line: Int)
    case invalidURL(line: Int)
    /// The writer refuses a value that would break the line framing.
    case unwritableValue(key: String)

    public var message: String {
        switch self {
        case .missingSeparator(let line):
            return "line \(line) of the credential input is not of the form key=value"
        case .forbiddenCharacter(let line, let character):
            return "line \(line) of the credential input contains \(character), which git's credential protocol forbids"
        case .invalidUTF8(let line):
            return "line \(line) of the credential input is not valid UTF-8"
        case .invalidExpiry(let line):
            return "line \(line) of the credential input: password_expiry_utc is not a number of seconds"
        case .invalidURL(let line):
            return
                """
                line \(line) of the credential input: url cannot be parsed (no protocol://, a newline or CR once \
                decoded, or not UTF-8)
                """
        case .unwritableValue(let key):
            return "the stored \(key) contains a newline, CR or NUL and cannot be written to git"
        }
    }
}

/// Reads and writes git's credential protocol: `key=value` lines ended by a blank line or EOF.
/// The reader is lenient about what it does not know and strict about framing.
public enum CredentialProtocol {
    /// The request in `input`. Callers in other modules pass an array: this overload compiles the
    /// reader for it here, where a generic call from another module would run unspecialised.
    public static func parse(_ input: [UInt8]) throws(CredentialProtocolError) -> CredentialRequest {
        try parse(input[...])
    }

    public static func parse(_ input: some Collection<UInt8>) throws(CredentialProtocolError) -> CredentialRequest {
        var request = CredentialRequest()
        var lineNumber = 0
        var lineStart = input.startIndex
        while lineStart != input.endIndex {
            let lineEnd = input[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? input.endIndex
            lineNumber += 1
            var line = input[lineStart..<lineEnd]
            // git reads lines with strbuf_getline: a CR right before the newline belongs to the
            // line ending, not to the value.
            if lineEnd != input.endIndex, !line.isEmpty,
                line[line.index(line.startIndex, offsetBy: line.count - 1)] == UInt8(ascii: "\r")
            {
                line = line[line.startIndex..<line.index(line.startIndex, offsetBy: line.count - 1)]
            }
            lineStart = lineEnd == input.endIndex ? lineEnd : input.index(after: lineEnd)
            if line.isEmpty { break }
            try read(line: line, number: lineNumber, into: &request)
        }
        return request
    }

    private static func read(
        line: some Collection<UInt8>, number: Int,
        into request: inout CredentialRequest
    ) throws(CredentialProtocolError) {
        if line.contains(0) { throw .forbiddenCharacter(line: number, character: "NUL") }
        if line.contains(UInt8(ascii: "\r")) { throw .forbiddenCharacter(line: number, character: "CR") }
        guard let separator = line.firstIndex(of: UInt8(ascii: "=")) else {
            throw .missingSeparator(line: number)
        }
        guard let key = String(validating: line[line.startIndex..<separator], as: UTF8.self),
            let value = String(validating: line[line.index(after: separator)...], as: UTF8.self)
        else {
            throw .invalidUTF8(line: number)
        }
        request.hasAttributes = true
        // A repeated key replaces the earlier value, as in git's credential_read.
        switch key {
        case "protocol": request.protocolName = value
        case "host": request.host = CredentialHost(gitHost: value)
        case "path": request.path = value
        case "username": request.username = value
        case "password": request.password = Secret(value)
        case "oauth_refresh_token": request.oauthRefreshToken = Secret(value)
        case "authtype": request.authType = value
        case "credential": request.credential = Secret(value)
        case "ephemeral": request.isEphemeral = GitBoolean.parse(value)
        case "capability[]":
            if value == "authtype" { request.advertisesAuthType = true }
            if value == "state" { request.advertisesState = true }
        case "state[]":
            if value.hasPrefix(CredentialState.prefix) {
                request.state.append(String(value.dropFirst(CredentialState.prefix.count)))
            }
        case "password_expiry_utc":
            guard let seconds = Int64(value) else { throw .invalidExpiry(line: number) }
            // git reads 0 as "never expires" (credential_read), not as 1970.
            request.passwordExpiresAt = seconds == 0 ? nil : seconds
        case "url":
            // As git's credential_from_url: the URL's parts replace the request's, and the
            // parts it lacks are unset. (git's reader also forgets every other attribute read
            // before url=; capabilities and the rest are kept here, since git never sends url=.)
            guard let url = GitURL(value) else { throw .invalidURL(line: number) }
            request.protocolName = url.protocolName
            request.host = CredentialHost(gitHost: url.host)
            request.path = url.path
            request.username = url.username
            request.password = url.password.map { Secret($0) }
        default:
            break
        }
    }

    /// What a `get` answers with.
    public struct Answer {
        public var credential: Credential
        /// Answer with `authtype`/`credential`; only for a request that advertised
        /// `capability[]=authtype`.
        public var authType = false
        /// Mark the `credential` `ephemeral=1` (with `authType` only).
        public var ephemeral = false
        /// Leave `password` out when `authtype`/`credential` are given (a Portal session).
        public var omitPassword = false
        /// `state[]` values to emit, without the prefix; only for a request that advertised
        /// `capability[]=state`.
        public var state: [String] = []

        public init(credential: Credential) { self.credential = credential }
    }

    /// The answer to `get`, in the order git 2.46+ requires: every `capability[]` line before
    /// the values that depend on it. A bearer-only credential answers without `password`.
    public static func format(_ answer: Answer) throws(CredentialProtocolError) -> [UInt8] {
        var output: [UInt8] = []
        let credential = answer.credential
        let pair =
            answer.authType ? credential.authType.flatMap { type in credential.credential.map { (type, $0) } } : nil
        if pair != nil { try append("capability[]", "authtype", to: &output) }
        if !answer.state.isEmpty { try append("capability[]", "state", to: &output) }
        if let (authType, value) = pair {
            try append("authtype", authType, to: &output)
            try append("credential", value.text, to: &output)
            if answer.ephemeral { try append("ephemeral", "1", to: &output) }
        }
        let givesPassword = !credential.isBearerOnly && !(answer.omitPassword && pair != nil)
        if givesPassword || !credential.username.isEmpty {
            try append("username", credential.username, to: &output)
        }
        if givesPassword { try append("password", credential.password.text, to: &output) }
        if let passwordExpiresAt = credential.passwordExpiresAt {
            try append("password_expiry_utc", String(passwordExpiresAt), to: &output)
        }
        if let oauthRefreshToken = credential.oauthRefreshToken {
            try append("oauth_refresh_token", oauthRefreshToken.text, to: &output)
        }
        for value in answer.state { try append("state[]", CredentialState.prefix + value, to: &output) }
        return output
    }

    /// The answer to a `get` from a client that advertised no capability.
    public static func format(_ credential: Credential) throws(CredentialProtocolError) -> [UInt8] {
        try format(Answer(credential: credential))
    }

    /// Writes one line; a value that would break the framing (newline, CR, NUL) is refused.
    public static func append(_ key: String, _ value: String, to output: inout [UInt8]) throws(CredentialProtocolError)
    {
        if value.utf8.contains(where: { $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "\r") || $0 == 0 }) {
            throw .unwritableValue(key: key)
        }
        output.append(contentsOf: key.utf8)
        output.append(UInt8(ascii: "="))
        output.append(contentsOf: value.utf8)
        output.append(UInt8(ascii: "\n"))
    }
}

/// git's boolean values (git-config(1)): true, yes, on, or a non-zero number; anything else is
/// false.
enum GitBoolean {
    static func parse(_ value: String) -> Bool {
        switch value.lowercased() {
        case "true", "yes", "on": return true
        default: return Int(value).map { $0 != 0 } ?? false
        }
    }
}

/// The `url` attribute, split exactly as git's `credential_from_url` splits it: the scheme ends
/// at the first `://` and must not be empty; the host ends at the first `/`, `?` or `#` after
/// it; a user (and a password, after the first `:`) comes before the first `@` when that `@`
/// lies before the host's end; what follows the host, query and fragment included, is the path
/// with its leading and trailing slashes trimmed. User, password, host and path are
/// percent-decoded; one holding a newline or CR once decoded refuses the URL (nil).
struct GitURL {
    var protocolName: String
    var host: String
    var path: String?
    var username: String?
    var password: String?

    init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard let schemeEnd = Self.firstIndex(of: Array("://".utf8), in: bytes), schemeEnd > 0 else { return nil }
        protocolName = String(decoding: bytes[..<schemeEnd], as: UTF8.self)
        let start = schemeEnd + 3
        let rest = bytes[start...]
        let hostEnd =
            rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
            ?? bytes.endIndex
        var hostStart = start
        if let at = rest.firstIndex(of: UInt8(ascii: "@")), at < hostEnd {
            if let colon = rest.firstIndex(of: UInt8(ascii: ":")), colon < at {
                guard let user = decodeLeniently(bytes[start..<colon]),
                    let pass = decodeLeniently(bytes[(colon + 1)..<at])
                else { return nil }
                username = user
                password = pass
            } else {
                guard let user = decodeLeniently(bytes[start..<at]) else { return nil }
                username = user
            }
            hostStart = at + 1
        }
        guard let host = decodeLeniently(bytes[hostStart..<hostEnd]) else { return nil }
        self.host = host
        var pathStart = hostEnd
        while pathStart < bytes.endIndex, bytes[pathStart] == UInt8(ascii: "/") { pathStart += 1 }
        if pathStart < bytes.endIndex {
            guard var decoded = decodeLeniently(bytes[pathStart...]) else { return nil }
            while decoded.utf8.count > 1, decoded.hasSuffix("/") { decoded.removeLast() }
            path = decoded
        }
        for part in [protocolName, host, path, username, password] {
            if let part, part.utf8.contains(where: { $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "\r") }) {
                return nil
            }
        }
    }

    private static func firstIndex(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        return (0...(haystack.count - needle.count)).first {
            haystack[$0..<($0 + needle.count)].elementsEqual(needle)
        }
    }
}

/// Percent-decoding as git's url_decode does it; nil when the result is not UTF-8.
private func decodeLeniently(_ text: ArraySlice<UInt8>) -> String? {
    String(validating: PercentCoding.decodeLeniently(text), as: UTF8.self)
}
