/// The attributes of one credential-protocol request (gitcredentials(7), "Custom helpers").
///
/// Only the attributes portal-token acts on are kept; every other key (`wwwauth[]`,
/// `capability[]`, `state[]`, …) is read and ignored, so newer versions of git keep working.
public struct CredentialRequest: Sendable {
    public var protocolName: String?
    public var host: CredentialHost?
    public var path: String?
    public var username: String?
    public var password: Secret?
    public var passwordExpiresAt: Int64?
    public var oauthRefreshToken: Secret?
    /// Whether the input held any `key=value` line at all, known or not. A request with none
    /// (EOF or a lone blank line) is how a script asks for the bare session token.
    public var hasAttributes = false

    public init() {}

    public var query: CredentialQuery {
        CredentialQuery(protocolName: protocolName, host: host, path: path, username: username)
    }
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
            return "line \(line) of the credential input: url has no protocol"
        case .unwritableValue(let key):
            return "the stored \(key) contains a newline, CR or NUL and cannot be written to git"
        }
    }
}

/// Reads and writes git's credential protocol: `key=value` lines ended by a blank line or EOF.
/// The reader is lenient about what it does not know and strict about framing.
public enum CredentialProtocol {
    public static func parse(_ input: some Collection<UInt8>) throws(CredentialProtocolError) -> CredentialRequest {
        var request = CredentialRequest()
        var lineNumber = 0
        var lineStart = input.startIndex
        while lineStart != input.endIndex {
            let lineEnd = input[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? input.endIndex
            lineNumber += 1
            let line = input[lineStart..<lineEnd]
            lineStart = lineEnd == input.endIndex ? lineEnd : input.index(after: lineEnd)
            if line.isEmpty { break }
            try read(line: line, number: lineNumber, into: &request)
        }
        return request
    }

    private static func read(line: some Collection<UInt8>, number: Int,
                             into request: inout CredentialRequest) throws(CredentialProtocolError) {
        if line.contains(0) { throw .forbiddenCharacter(line: number, character: "NUL") }
        if line.contains(UInt8(ascii: "\r")) { throw .forbiddenCharacter(line: number, character: "CR") }
        guard let separator = line.firstIndex(of: UInt8(ascii: "=")) else {
            throw .missingSeparator(line: number)
        }
        guard let key = String(validating: line[line.startIndex..<separator], as: UTF8.self),
              let value = String(validating: line[line.index(after: separator)...], as: UTF8.self) else {
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
        case "password_expiry_utc":
            guard let seconds = Int64(value) else { throw .invalidExpiry(line: number) }
            request.passwordExpiresAt = seconds
        case "url":
            guard let url = GitURL(value) else { throw .invalidURL(line: number) }
            request.protocolName = url.protocolName
            request.host = CredentialHost(gitHost: url.host)
            if let path = url.path { request.path = path }
            if let username = url.username { request.username = username }
            if let password = url.password { request.password = Secret(password) }
        default:
            break
        }
    }

    /// The answer to `get`: the attributes git merges into its request.
    public static func format(_ credential: Credential) throws(CredentialProtocolError) -> [UInt8] {
        var output: [UInt8] = []
        try append("username", credential.username, to: &output)
        try append("password", credential.password.text, to: &output)
        if let passwordExpiresAt = credential.passwordExpiresAt {
            try append("password_expiry_utc", String(passwordExpiresAt), to: &output)
        }
        if let oauthRefreshToken = credential.oauthRefreshToken {
            try append("oauth_refresh_token", oauthRefreshToken.text, to: &output)
        }
        return output
    }

    public static func append(_ key: String, _ value: String, to output: inout [UInt8]) throws(CredentialProtocolError) {
        if value.utf8.contains(where: { $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "\r") || $0 == 0 }) {
            throw .unwritableValue(key: key)
        }
        output.append(contentsOf: key.utf8)
        output.append(UInt8(ascii: "="))
        output.append(contentsOf: value.utf8)
        output.append(UInt8(ascii: "\n"))
    }
}

/// The `url` attribute, split as git's `url_to_credential` does: components missing from the
/// URL are left unset, and user, password, host and path are percent-decoded.
struct GitURL {
    var protocolName: String
    var host: String
    var path: String?
    var username: String?
    var password: String?

    init?(_ text: String) {
        guard let colon = text.firstIndex(of: ":"), colon != text.startIndex,
              text[colon...].hasPrefix("://") else { return nil }
        protocolName = String(text[..<colon])
        var rest = text[text.index(colon, offsetBy: 3)...]
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        var authority = rest[..<authorityEnd]
        rest = rest[authorityEnd...]
        if let at = authority.lastIndex(of: "@") {
            let userinfo = authority[..<at]
            authority = authority[authority.index(after: at)...]
            if let colon = userinfo.firstIndex(of: ":") {
                username = PercentDecoding.decode(userinfo[..<colon])
                password = PercentDecoding.decode(userinfo[userinfo.index(after: colon)...])
            } else {
                username = PercentDecoding.decode(userinfo)
            }
        }
        host = PercentDecoding.decode(authority)
        if rest.count > 1 { path = PercentDecoding.decode(rest.dropFirst()) }
    }
}

enum PercentDecoding {
    /// Decodes `%HH` escapes; text with a malformed escape or invalid UTF-8 is kept as it is.
    static func decode(_ text: Substring) -> String {
        guard text.contains("%") else { return String(text) }
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8)[...]
        while let byte = iterator.popFirst() {
            guard byte == UInt8(ascii: "%") else { bytes.append(byte); continue }
            guard iterator.count >= 2,
                  let high = hexValue(iterator[iterator.startIndex]),
                  let low = hexValue(iterator[iterator.startIndex + 1]) else { return String(text) }
            bytes.append(high << 4 | low)
            iterator = iterator.dropFirst(2)
        }
        return String(validating: bytes, as: UTF8.self) ?? String(text)
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
