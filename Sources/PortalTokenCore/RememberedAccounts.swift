import Basics

/// An account a sign-in on this machine recorded: the auth environment, the end user signed in
/// to it, and the API host it was signed in on. Never a secret (docs/sessions.md, "Remembered
/// accounts").
public struct RememberedAccount: Equatable, Sendable {
    public var authEnvironmentID: String
    public var endUserID: String
    /// The API host as it was configured at the sign-in; nil for the default one.
    public var apiHost: String?

    public init(authEnvironmentID: String, endUserID: String, apiHost: String?) {
        self.authEnvironmentID = authEnvironmentID
        self.endUserID = endUserID
        self.apiHost = apiHost
    }
}

/// The accounts file's contents (`$XDG_CONFIG_HOME/portal-token/accounts.json`), which
/// portal-token writes and nobody needs to edit: one entry per auth environment, as the stores
/// keep one session per environment.
///
///     {"version":1,"accounts":[{"authEnvironmentId":"…","endUserId":"…","apiHost":"…"}]}
public enum RememberedAccounts {
    public struct DecodingError: Error, Equatable {
        public let reason: String
    }

    public static func decode(_ bytes: [UInt8]) throws(DecodingError) -> [RememberedAccount] {
        let document: JSONValue
        do {
            document = try JSONValue.parse(bytes)
        } catch {
            throw DecodingError(reason: "it is not JSON (at byte \(error.offset))")
        }
        guard document["version"]?.int64Value == 1 else {
            throw DecodingError(reason: "it is not version 1 of the accounts file")
        }
        guard let entries = document["accounts"]?.arrayValue else {
            throw DecodingError(reason: "it lists no accounts")
        }
        var accounts: [RememberedAccount] = []
        for (index, entry) in entries.enumerated() {
            guard let environment = entry["authEnvironmentId"]?.stringValue, !environment.isEmpty,
                let endUser = entry["endUserId"]?.stringValue
            else { throw DecodingError(reason: "account \(index + 1) has no auth environment or end user") }
            let host = entry["apiHost"]
            guard host == nil || host == .null || host?.stringValue != nil else {
                throw DecodingError(reason: "account \(index + 1) has an API host that is not a string")
            }
            accounts.append(
                RememberedAccount(authEnvironmentID: environment, endUserID: endUser, apiHost: host?.stringValue))
        }
        return accounts
    }

    public static func encode(_ accounts: [RememberedAccount]) -> [UInt8] {
        let entries = accounts.map { account -> JSONValue in
            var members: [String: JSONValue] = [
                "authEnvironmentId": .string(account.authEnvironmentID), "endUserId": .string(account.endUserID),
            ]
            if let host = account.apiHost { members["apiHost"] = .string(host) }
            return .object(members)
        }
        return Array((JSONValue.object(["version": .int(1), "accounts": .array(entries)]).serialized + "\n").utf8)
    }

    /// `accounts` with `account` recorded: it replaces the entry of its auth environment, which
    /// keeps its place, or is added at the end.
    public static func recording(_ account: RememberedAccount, in accounts: [RememberedAccount])
        -> [RememberedAccount]
    {
        var recorded = accounts
        if let index = recorded.firstIndex(where: { $0.authEnvironmentID == account.authEnvironmentID }) {
            recorded[index] = account
        } else {
            recorded.append(account)
        }
        return recorded
    }

    /// `accounts` without the entry of `authEnvironmentID`.
    public static func forgetting(_ authEnvironmentID: String, in accounts: [RememberedAccount])
        -> [RememberedAccount]
    {
        accounts.filter { $0.authEnvironmentID != authEnvironmentID }
    }
}
