import Basics

/// The Client Auth settings (docs/settings.md, "Settings Portal sign-in checks"), checked before any request.
///
/// The auth environment ID is checked first (so it is the one named when both it and the
/// redirect URL are blank). The redirect URL is required by `login` and `redirect` only, so it
/// may be absent here and is demanded by `requireRedirectURL()`.
public struct ClientAuthConfiguration: Sendable, Equatable {
    /// Sent as `x-portal-auth-environment-id` on all six endpoints; trimmed.
    public let authEnvironmentID: String
    /// Trimmed (docs/settings.md, "Settings Portal sign-in checks"); nil when not configured.
    public let redirectURL: String?
    /// nil: omitted from every request, so the environment's default applies (docs/portal-api.md, "The Client Auth
    /// endpoints"; docs/settings.md, "Settings Portal sign-in checks").
    public let accountAbstracted: Bool?
    /// Sender address and template for magic links; trimmed, nil when blank.
    public let magicLinkFromEmail: String?
    public let magicLinkTemplateID: String?

    public init(
        authEnvironmentID: String, redirectURL: String?, accountAbstracted: Bool? = nil,
        magicLinkFromEmail: String? = nil, magicLinkTemplateID: String? = nil
    ) throws(ClientAuthError) {
        let environment = authEnvironmentID.trimmingUnicodeWhitespace
        guard !environment.isEmpty else { throw .invalidArgument(.authEnvironmentID) }
        guard !Self.hasControlCharacter(environment) else { throw .argumentNotOneLine(.authEnvironmentID) }
        let redirect = redirectURL?.trimmingUnicodeWhitespace
        if let redirect, Self.hasControlCharacter(redirect) { throw .argumentNotOneLine(.redirectURL) }
        let from = magicLinkFromEmail?.trimmingUnicodeWhitespace
        let template = magicLinkTemplateID?.trimmingUnicodeWhitespace
        self.authEnvironmentID = environment
        self.redirectURL = redirect.flatMap { $0.isEmpty ? nil : $0 }
        self.accountAbstracted = accountAbstracted
        self.magicLinkFromEmail = from.flatMap { $0.isEmpty ? nil : $0 }
        self.magicLinkTemplateID = template.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Reads the settings (docs/settings.md, "Settings Portal sign-in checks"). Throws `ClientAuthError` for a blank
    /// environment or a value that is not one line, `SettingError` for an account-abstraction
    /// value that is not a boolean.
    public init(settings: Settings) throws {
        let accountAbstracted = try settings.bool(.accountAbstracted)
        try self.init(
            authEnvironmentID: settings.value(.authEnvironmentID) ?? "",
            redirectURL: settings.value(.redirectURL),
            accountAbstracted: accountAbstracted,
            magicLinkFromEmail: settings.value(.magicLinkFromEmail),
            magicLinkTemplateID: settings.value(.magicLinkTemplateID))
    }

    /// The redirect URL, for `login` and `redirect`; blank or unset is a usage error.
    public func requireRedirectURL() throws(ClientAuthError) -> String {
        guard let redirectURL else { throw .invalidArgument(.redirectURL) }
        return redirectURL
    }

    /// The sender and template, for `login --email` (docs/portal-api.md, "Email addresses"): both or a usage error
    /// naming the missing ones.
    public func requireMagicLink() throws(ClientAuthError) -> (fromEmail: String, templateID: String) {
        guard let magicLinkFromEmail, let magicLinkTemplateID else {
            var missing: [Setting] = []
            if magicLinkFromEmail == nil { missing.append(.magicLinkFromEmail) }
            if magicLinkTemplateID == nil { missing.append(.magicLinkTemplateID) }
            throw .magicLinkNotConfigured(missing: missing)
        }
        return (magicLinkFromEmail, magicLinkTemplateID)
    }

    static func hasControlCharacter(_ text: String) -> Bool {
        text.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }
}

/// Email addresses for `login --email` (docs/portal-api.md, "Email addresses").
public enum EmailAddress {
    /// Trimmed of white space and line breaks, then lowercased: Portal requires lowercase and
    /// trims nothing. Blank is a usage error. The address is private, so it leaves as a `Secret`.
    public static func normalize(_ text: String) throws(ClientAuthError) -> Secret {
        let trimmed = text.trimmingUnicodeWhitespace
        guard !trimmed.isEmpty else { throw .invalidArgument(.email) }
        return Secret(trimmed.lowercased())
    }
}

/// Two-factor codes (docs/portal-api.md, "Two-factor codes and enrollment").
///
/// Portal's iOS SDK posts whatever it is given. portal-token refuses, before sending, a code
/// that is not exactly six ASCII digits once surrounding white space is trimmed: every
/// authenticator app shows six, and a typo caught here costs no attempt at Portal.
public enum TOTPCode {
    public static func validate(_ text: String) throws(ClientAuthError) -> Secret {
        let trimmed = text.trimmingUnicodeWhitespace
        guard trimmed.utf8.count == 6, trimmed.utf8.allSatisfy(URLAuthority.isDigit) else {
            throw .invalidArgument(.totpCode)
        }
        return Secret(trimmed)
    }
}

/// The enrollment secret in a `totpLink` (docs/portal-api.md, "Two-factor codes and enrollment"), shown beside the QR
/// code for users whose authenticator cannot scan.
public enum TOTPEnrollment {
    /// The base32 secret, uppercased: trim the link; when it does not start with `otpauth://`
    /// (any case), percent-decode it whole; drop the fragment; take the last `secret=` value,
    /// percent-decode, trim, uppercase; accept only `A–Z 2–7` with optional trailing `=` and at
    /// least one data character. nil otherwise.
    public static func secret(in link: Secret?) -> Secret? {
        guard let link else { return nil }
        var text = link.text.trimmingUnicodeWhitespace
        guard !text.isEmpty else { return nil }
        if !hasOTPAuthScheme(text) {
            guard let decoded = percentDecodedStrictly(text), hasOTPAuthScheme(decoded) else { return nil }
            text = decoded
        }
        if let hash = text.firstIndex(of: "#") { text = String(text[..<hash]) }
        guard let question = text.firstIndex(of: "?") else { return nil }
        var value: Substring?
        for piece in text[text.index(after: question)...].split(separator: "&") {
            let parts = piece.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if parts[0] == "secret" { value = parts.count > 1 ? parts[1] : "" }
        }
        guard let value, let decoded = percentDecodedStrictly(String(value)) else { return nil }
        let secret = decoded.trimmingUnicodeWhitespace.uppercased()
        guard isBase32(secret) else { return nil }
        return Secret(secret)
    }

    private static func hasOTPAuthScheme(_ text: String) -> Bool {
        text.utf8.count >= 10
            && text.utf8.prefix(10).map { $0 | 0x20 }.elementsEqual("otpauth://".utf8.map { $0 | 0x20 })
    }

    /// `A–Z 2–7`, at least one, then only `=`.
    private static func isBase32(_ text: String) -> Bool {
        var dataCount = 0
        var inPadding = false
        for byte in text.utf8 {
            if byte == UInt8(ascii: "=") {
                inPadding = true
            } else if !inPadding,
                (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                    || (byte >= UInt8(ascii: "2") && byte <= UInt8(ascii: "7"))
            {
                dataCount += 1
            } else {
                return false
            }
        }
        return dataCount > 0
    }

    /// `%HH` escapes decoded (`+` kept); nil for a malformed escape or bytes that are not UTF-8.
    static func percentDecodedStrictly(_ text: String) -> String? {
        guard text.utf8.contains(UInt8(ascii: "%")) else { return text }
        guard let output = PercentCoding.decodeStrictly(Array(text.utf8)[...]) else { return nil }
        return String(validating: output, as: UTF8.self)
    }
}
