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

/// A directory whose commands act for one account: in it and every directory below it, unless
/// one below has its own (`portal-token accounts use`). Kept in portal-token's own accounts file,
/// never in the directory, so nothing a repository or an archive carries can choose an account.
public struct DirectoryAccount: Equatable, Sendable {
    /// Absolute and canonical, as `getcwd` gives it.
    public var path: String
    public var authEnvironmentID: String
    /// nil: the environment's one end user (an error when it has several).
    public var endUserID: String?

    public init(path: String, authEnvironmentID: String, endUserID: String?) {
        self.path = path
        self.authEnvironmentID = authEnvironmentID
        self.endUserID = endUserID
    }

    /// Whether `directory` (canonical) is this one or below it.
    public func covers(_ directory: String) -> Bool {
        directory == path || directory.hasPrefix(path == "/" ? "/" : path + "/")
    }
}

/// The accounts file's contents (`$XDG_CONFIG_HOME/portal-token/accounts.json`), which
/// portal-token writes and nobody needs to edit: one entry per auth environment and end user
/// signed in here, and the directories bound to an account.
///
///     {"version":1,"accounts":[{"authEnvironmentId":"…","endUserId":"…","apiHost":"…"}],
///      "directories":[{"path":"/…","authEnvironmentId":"…","endUserId":"…"}]}
public struct RememberedAccounts: Equatable, Sendable {
    public var accounts: [RememberedAccount]
    public var directories: [DirectoryAccount]

    public init(accounts: [RememberedAccount] = [], directories: [DirectoryAccount] = []) {
        self.accounts = accounts
        self.directories = directories
    }

    public struct DecodingError: Error, Equatable {
        public let reason: String
    }

    public static func decode(_ bytes: [UInt8]) throws(DecodingError) -> RememberedAccounts {
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
        var file = RememberedAccounts()
        for (index, entry) in entries.enumerated() {
            guard let environment = entry["authEnvironmentId"]?.stringValue, !environment.isEmpty,
                let endUser = entry["endUserId"]?.stringValue
            else { throw DecodingError(reason: "account \(index + 1) has no auth environment or end user") }
            let host = entry["apiHost"]
            guard host == nil || host == .null || host?.stringValue != nil else {
                throw DecodingError(reason: "account \(index + 1) has an API host that is not a string")
            }
            file.accounts.append(
                RememberedAccount(authEnvironmentID: environment, endUserID: endUser, apiHost: host?.stringValue))
        }
        for (index, entry) in (document["directories"]?.arrayValue ?? []).enumerated() {
            guard let path = entry["path"]?.stringValue, path.hasPrefix("/"),
                let environment = entry["authEnvironmentId"]?.stringValue, !environment.isEmpty
            else { throw DecodingError(reason: "directory \(index + 1) has no absolute path or auth environment") }
            let endUser = entry["endUserId"]
            guard endUser == nil || endUser == .null || endUser?.stringValue != nil else {
                throw DecodingError(reason: "directory \(index + 1) has an end user that is not a string")
            }
            file.directories.append(
                DirectoryAccount(path: path, authEnvironmentID: environment, endUserID: endUser?.stringValue))
        }
        return file
    }

    public func encode() -> [UInt8] {
        let entries = accounts.map { account -> JSONValue in
            var members: [String: JSONValue] = [
                "authEnvironmentId": .string(account.authEnvironmentID), "endUserId": .string(account.endUserID),
            ]
            if let host = account.apiHost { members["apiHost"] = .string(host) }
            return .object(members)
        }
        var document: [String: JSONValue] = ["version": .int(1), "accounts": .array(entries)]
        if !directories.isEmpty {
            document["directories"] = .array(
                directories.map { directory in
                    var members: [String: JSONValue] = [
                        "path": .string(directory.path), "authEnvironmentId": .string(directory.authEnvironmentID),
                    ]
                    if let endUser = directory.endUserID { members["endUserId"] = .string(endUser) }
                    return .object(members)
                })
        }
        return Array((JSONValue.object(document).serialized + "\n").utf8)
    }

    /// With `account` recorded: it replaces the entry of its auth environment and end user,
    /// which keeps its place, or is added at the end.
    public func recording(_ account: RememberedAccount) -> RememberedAccounts {
        var recorded = self
        if let index = recorded.accounts.firstIndex(where: {
            $0.authEnvironmentID == account.authEnvironmentID && $0.endUserID == account.endUserID
        }) {
            recorded.accounts[index] = account
        } else {
            recorded.accounts.append(account)
        }
        return recorded
    }

    /// Without the entry of `endUserID` in `authEnvironmentID` (every one of the environment,
    /// with none named). Directories bound to it stay bound: a command there says it is not
    /// signed in, rather than acting for another account.
    public func forgetting(_ authEnvironmentID: String, endUserID: String?) -> RememberedAccounts {
        var changed = self
        changed.accounts.removeAll {
            $0.authEnvironmentID == authEnvironmentID && (endUserID == nil || $0.endUserID == endUserID)
        }
        return changed
    }

    /// With `directory` bound as it says (replacing its own binding), or unbound when `binding`
    /// is nil.
    public func binding(_ path: String, to binding: DirectoryAccount?) -> RememberedAccounts {
        var changed = self
        changed.directories.removeAll { $0.path == path }
        if let binding { changed.directories.append(binding) }
        return changed
    }

    /// The binding that covers `directory`: the deepest one.
    public func directoryAccount(for directory: String) -> DirectoryAccount? {
        directories.filter { $0.covers(directory) }.max { $0.path.utf8.count < $1.path.utf8.count }
    }

    /// The remembered end users of an environment.
    public func accounts(of authEnvironmentID: String) -> [RememberedAccount] {
        accounts.filter { $0.authEnvironmentID == authEnvironmentID }
    }
}
