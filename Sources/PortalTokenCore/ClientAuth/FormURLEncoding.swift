/// The percent-encoding Portal's `GET /api/v3/auth/oauth/urls` expects for `redirectUrl`
/// (wire contract §2): Java's `URLEncoder` with `+` written as `%20`.
///
/// Portal compares the decoded-by-nobody query value byte for byte with the environment's
/// allow-list, so the encoding must be exactly this one: a general query encoder that leaves
/// `:` and `/` alone earns a 401.
public enum FormURLEncoding {
    /// Every UTF-8 byte outside `A–Z a–z 0–9 - _ . *` becomes `%` and two uppercase hex digits.
    public static func encode(_ text: String) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            if isUnreserved(byte) {
                output.append(byte)
            } else {
                output.append(UInt8(ascii: "%"))
                output.append(digits[Int(byte >> 4)])
                output.append(digits[Int(byte & 0x0f)])
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    static func isUnreserved(_ byte: UInt8) -> Bool {
        URLAuthority.isLetter(byte) || URLAuthority.isDigit(byte) || byte == UInt8(ascii: "-")
            || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "*")
    }

    /// The query of `GET /oauth/urls` (wire contract §2): `redirectUrl=<encoded>`, then
    /// `&isAccountAbstracted=true|false` only when account abstraction is configured.
    public static func oauthURLsQuery(redirectURL: String, accountAbstracted: Bool?) -> String {
        var query = "redirectUrl=" + encode(redirectURL)
        if let accountAbstracted {
            query += "&isAccountAbstracted=" + (accountAbstracted ? "true" : "false")
        }
        return query
    }
}
