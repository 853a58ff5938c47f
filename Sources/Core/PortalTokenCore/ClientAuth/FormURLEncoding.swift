import Basics

/// The percent-encoding Portal's `GET /api/v3/auth/oauth/urls` expects for `redirectUrl`
/// (docs/portal-api.md, "Form encoding"): Java's `URLEncoder` with `+` written as `%20`.
///
/// Portal compares the decoded-by-nobody query value byte for byte with the environment's
/// allow-list, so the encoding must be exactly this one: a general query encoder that leaves
/// `:` and `/` alone earns a 401.
public enum FormURLEncoding {
    /// Every UTF-8 byte outside `A–Z a–z 0–9 - _ . *` becomes `%` and two uppercase hex digits.
    public static func encode(_ text: String) -> String {
        PercentCoding.encode(text, keeping: isUnreserved)
    }

    static func isUnreserved(_ byte: UInt8) -> Bool {
        URLAuthority.isLetter(byte) || URLAuthority.isDigit(byte) || byte == UInt8(ascii: "-")
            || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "*")
    }

    /// The query of `GET /oauth/urls` (docs/portal-api.md, "Form encoding"): `redirectUrl=<encoded>`, then
    /// `&isAccountAbstracted=true|false` only when account abstraction is configured.
    public static func oauthURLsQuery(redirectURL: String, accountAbstracted: Bool?) -> String {
        var query = "redirectUrl=" + encode(redirectURL)
        if let accountAbstracted {
            query += "&isAccountAbstracted=" + (accountAbstracted ? "true" : "false")
        }
        return query
    }
}
