/// A two-factor step waiting for its code: what a sign-in keeps in the store when the grant
/// exchange answered with a `userJwt` (docs/portal-api.md, "The Client Auth endpoints"), so that
/// `portal-token verify-totp` can complete it from another process, such as after the desktop
/// handler, which has no terminal to ask on.
///
/// It holds the `userJwt` (encrypted in the store, like the session), the end user read from its
/// claims (wire §4), when it stops being usable, and the digest of the grant that produced it.
/// Never the `totpLink` or its secret: enrollment is shown once, on a terminal, and nowhere kept.
public struct PendingTwoFactor: Sendable, Equatable, CustomStringConvertible {
    /// How long a step is kept: the `userJwt` lives about 10 minutes.
    public static let lifetime: Int64 = 10 * 60

    public var userJWT: Secret
    public var endUserID: String
    public var authEnvironmentID: String
    /// Unix seconds after which the step is of no use and is removed.
    public var expiresAt: Int64
    /// `GrantDigest` of the grant whose exchange returned this step.
    public var grantDigest: String?

    public init(userJWT: Secret, endUserID: String, authEnvironmentID: String, expiresAt: Int64, grantDigest: String?) {
        self.userJWT = userJWT
        self.endUserID = endUserID
        self.authEnvironmentID = authEnvironmentID
        self.expiresAt = expiresAt
        self.grantDigest = grantDigest
    }

    public func isExpired(at now: Int64) -> Bool { now >= expiresAt }

    public var description: String {
        "PendingTwoFactor(endUserID: \(endUserID), userJWT: <redacted>, expiresAt: \(expiresAt))"
    }

    /// The stored secret: `{"endUserId","expiresAt","grantDigest","userJwt"}`.
    public var payload: Secret {
        var members: [String: JSONValue] = [
            "userJwt": .string(userJWT.text),
            "endUserId": .string(endUserID),
            "expiresAt": .int(expiresAt),
        ]
        if let grantDigest { members["grantDigest"] = .string(grantDigest) }
        return Secret(JSONValue.object(members).serialized)
    }

    /// nil for anything that is not a step record: a JSON object with a non-blank `userJwt`
    /// and `endUserId` and a whole-number `expiresAt`. Unknown keys are ignored.
    public static func decode(payload: Secret, authEnvironmentID: String) -> PendingTwoFactor? {
        guard let value = payload.withBytes({ try? JSONValue.parse($0) }), case .object = value,
            let userJWT = value["userJwt"]?.stringValue, !userJWT.isBlank,
            let endUserID = value["endUserId"]?.stringValue, !endUserID.isBlank,
            let expiresAt = value["expiresAt"]?.int64Value
        else { return nil }
        return PendingTwoFactor(
            userJWT: Secret(userJWT), endUserID: endUserID, authEnvironmentID: authEnvironmentID,
            expiresAt: expiresAt, grantDigest: value["grantDigest"]?.stringValue)
    }
}
