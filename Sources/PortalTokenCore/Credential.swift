/// The part of git's `host` attribute that names the machine, and the port when one is given.
///
/// git sends `host=example.com:8080`; git-credential-libsecret stores that as the attributes
/// `server=example.com` and `port=8080`, so both forms must convert losslessly.
public struct CredentialHost: Sendable, Hashable {
    public var server: String
    public var port: Int?

    public init(server: String, port: Int? = nil) {
        self.server = server
        self.port = port
    }

    /// Splits git's `host` value at its last colon when what follows is a port number.
    /// A bracketed IPv6 literal keeps its inner colons.
    public init(gitHost: String) {
        var boundary = gitHost.endIndex
        if let colon = gitHost.lastIndex(of: ":") {
            let closingBracket = gitHost.lastIndex(of: "]")
            if closingBracket == nil || closingBracket! < colon { boundary = colon }
        }
        if boundary != gitHost.endIndex {
            let digits = gitHost[gitHost.index(after: boundary)...]
            if !digits.isEmpty, digits.count <= 5, digits.allSatisfy({ $0.isASCII && $0.isNumber }),
               let port = Int(digits), port <= 65535 {
                self.init(server: String(gitHost[..<boundary]), port: port)
                return
            }
        }
        self.init(server: gitHost)
    }

    /// The value git writes in its `host` attribute.
    public var gitHost: String { port.map { "\(server):\($0)" } ?? server }
}

/// One stored credential, as git's credential protocol describes it (gitcredentials(7)).
public struct Credential: Sendable, Equatable {
    public var protocolName: String
    public var host: CredentialHost?
    public var path: String?
    public var username: String
    public var password: Secret
    /// Unix seconds after which the password must not be used (`password_expiry_utc`).
    public var passwordExpiresAt: Int64?
    public var oauthRefreshToken: Secret?

    public init(protocolName: String, host: CredentialHost?, path: String? = nil, username: String,
                password: Secret, passwordExpiresAt: Int64? = nil, oauthRefreshToken: Secret? = nil) {
        self.protocolName = protocolName
        self.host = host
        self.path = path
        self.username = username
        self.password = password
        self.passwordExpiresAt = passwordExpiresAt
        self.oauthRefreshToken = oauthRefreshToken
    }

    /// Whether this credential is stored in the same slot as `other`: `store` overwrites it.
    public func occupiesSameSlot(as other: Credential) -> Bool {
        protocolName == other.protocolName && host == other.host && path == other.path
            && username == other.username
    }

    /// The item label git-credential-libsecret gives the same credential.
    public var keyringLabel: String {
        "Git: \(protocolName)://\(host?.gitHost ?? "")/\(path ?? "")"
    }

    public func isExpired(at now: Int64) -> Bool {
        guard let passwordExpiresAt else { return false }
        return passwordExpiresAt <= now
    }
}

/// What a `get` or `erase` asks for. An absent field matches anything, as in git's
/// `credential_match`; a present one must be equal (the host together with its port).
public struct CredentialQuery: Sendable {
    public var protocolName: String?
    public var host: CredentialHost?
    public var path: String?
    public var username: String?
    /// Given on `erase` only: then only entries holding exactly this password are removed.
    public var password: Secret?

    public init(protocolName: String? = nil, host: CredentialHost? = nil, path: String? = nil,
                username: String? = nil, password: Secret? = nil) {
        self.protocolName = protocolName
        self.host = host
        self.path = path
        self.username = username
        self.password = password
    }

    /// An erase pattern with no field set would remove everything; git's helpers refuse it.
    public var isEmptyPattern: Bool {
        protocolName == nil && host == nil && path == nil && username == nil
    }

    public func matches(_ credential: Credential) -> Bool {
        if let protocolName, protocolName != credential.protocolName { return false }
        if let host, host != credential.host { return false }
        if let path, path != credential.path { return false }
        if let username, username != credential.username { return false }
        if let password, password != credential.password { return false }
        return true
    }
}
