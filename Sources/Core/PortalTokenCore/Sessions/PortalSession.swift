/// A Portal Client Session Token and what portal-token knows of its lifetime
/// (docs/sessions.md, "Sliding expiry"; docs/portal-api.md, "The session payload", "The session token's life").
///
/// Portal expires the token 24 hours after its last accepted request and never later than 7 days
/// after it was issued. portal-token knows only the activity it saw, so `expiresAt` is a lower
/// bound: before it the token is handed out without asking Portal; after it, Portal decides.
public struct PortalSession: Sendable, Equatable, CustomStringConvertible {
    public static let idleInterval: Int64 = 24 * 60 * 60
    public static let lifetimeCap: Int64 = 7 * 24 * 60 * 60

    public var token: Secret
    public var endUserID: String
    public var authEnvironmentID: String
    /// Unix seconds when the session was stored; nil for a record another tool wrote.
    public var issuedAt: Int64?
    /// Unix seconds of the last request Portal is known to have accepted.
    public var lastActivityAt: Int64?
    /// For a session that a sign-in produced: the digest of the grant it was exchanged for
    /// (`GrantDigest`), never the grant itself. The same redirect delivered again resolves to
    /// this session without a second exchange while it is stored (docs/portal-api.md, "A redirect delivered twice").
    public var grantDigest: String?

    public init(
        token: Secret, endUserID: String, authEnvironmentID: String, issuedAt: Int64?, lastActivityAt: Int64?,
        grantDigest: String? = nil
    ) {
        self.token = token
        self.endUserID = endUserID
        self.authEnvironmentID = authEnvironmentID
        self.issuedAt = issuedAt
        self.lastActivityAt = lastActivityAt
        self.grantDigest = grantDigest
    }

    /// When the 7-day cap ends the session, if the issue time is known.
    public var capAt: Int64? { issuedAt.map { $0 + Self.lifetimeCap } }

    /// `min(lastActivityAt + 24 h, issuedAt + 7 days)`, when both are known.
    public var expiresAt: Int64? {
        guard let lastActivityAt, let capAt else { return nil }
        return min(lastActivityAt + Self.idleInterval, capAt)
    }

    /// The session after Portal accepted a request at `now`: the idle window slides. A record
    /// without an issue time starts its cap now.
    public func accepted(at now: Int64) -> PortalSession {
        var session = self
        session.lastActivityAt = max(now, lastActivityAt ?? now)
        session.issuedAt = issuedAt ?? now
        return session
    }

    public var description: String { "PortalSession(endUserID: \(endUserID), token: <redacted>)" }

    // MARK: Stored payload

    /// The secret stored in the keyring or file: the two keys Portal's mobile SDKs persist, plus
    /// the timing fields as Unix seconds and the sign-in's `grantDigest` when there is one. Keys
    /// are sorted, as the SDKs write them; readers ignore the keys they do not know.
    public var payload: Secret {
        var members: [String: JSONValue] = [
            "clientSessionToken": .string(token.text),
            "endUserId": .string(endUserID),
        ]
        if let issuedAt { members["issuedAt"] = .int(issuedAt) }
        if let lastActivityAt { members["lastActivityAt"] = .int(lastActivityAt) }
        if let grantDigest { members["grantDigest"] = .string(grantDigest) }
        return Secret(JSONValue.object(members).serialized)
    }

    /// Reads a stored payload strictly (docs/portal-api.md, "The session payload"): a JSON object whose
    /// `clientSessionToken` and `endUserId` are strings that are not blank. Unknown keys are
    /// ignored; timing fields that are missing or not whole numbers read as unknown.
    /// Returns nil for an unusable payload.
    public static func decode(payload: Secret, authEnvironmentID: String) -> PortalSession? {
        guard let value = payload.withBytes({ try? JSONValue.parse($0) }),
            case .object = value,
            let token = value["clientSessionToken"]?.stringValue, !token.trimmingWhitespace.isEmpty,
            let endUserID = value["endUserId"]?.stringValue, !endUserID.trimmingWhitespace.isEmpty
        else {
            return nil
        }
        return PortalSession(
            token: Secret(token), endUserID: endUserID, authEnvironmentID: authEnvironmentID,
            issuedAt: value["issuedAt"]?.int64Value, lastActivityAt: value["lastActivityAt"]?.int64Value,
            grantDigest: value["grantDigest"]?.stringValue)
    }
}

/// What to do with a stored session at a given moment (docs/sessions.md, "Sliding expiry").
public enum SessionDecision: Equatable, Sendable {
    /// Before `expiresAt`: hand the token out with no network call.
    case handOut
    /// Past the idle window (or timing unknown) but within the cap: one `GET /api/v3/clients/me`
    /// decides.
    case checkWithPortal
    /// At or past the 7-day cap: end the session locally, reason `expired`.
    case expired
}

extension PortalSession {
    public func decision(at now: Int64) -> SessionDecision {
        if let capAt, now >= capAt { return .expired }
        if let expiresAt, now < expiresAt { return .handOut }
        return .checkWithPortal
    }
}

/// What a session store holds for one auth environment.
public enum StoredSession: Sendable, Equatable {
    case absent
    /// Something is stored but it is not a usable session record.
    case unreadable
    case present(PortalSession)
}

/// RFC 3339 times in UTC, for `status` and `--format json`.
public enum RFC3339 {
    public static func format(_ seconds: Int64) -> String {
        // Days from the civil calendar (Howard Hinnant's algorithm), so no time zone database is
        // involved.
        let days = floorDivide(seconds, 86400)
        let secondOfDay = seconds - days * 86400
        let shifted = days + 719_468
        let era = floorDivide(shifted, 146_097)
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return
            """
            \(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondOfDay / 3600, 2))\
            :\(pad(secondOfDay % 3600 / 60, 2)):\(pad(secondOfDay % 60, 2))Z
            """
    }

    /// Reads back what `format` writes (`YYYY-MM-DDTHH:MM:SSZ`, UTC); nil for anything else.
    public static func parse(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count == 20, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
            bytes[10] == UInt8(ascii: "T"), bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
            bytes[19] == UInt8(ascii: "Z")
        else { return nil }
        func number(_ range: Range<Int>) -> Int64? {
            var value: Int64 = 0
            for byte in bytes[range] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        // Days from the civil calendar (Howard Hinnant's algorithm), the inverse of `format`'s.
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = floorDivide(shiftedYear, 400)
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return days * 86400 + hour * 3600 + minute * 60 + second
    }

    private static func floorDivide(_ value: Int64, _ divisor: Int64) -> Int64 {
        value >= 0 ? value / divisor : (value - divisor + 1) / divisor
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }
}
