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
                let port = Int(digits), port <= 65535
            {
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
///
/// Since git 2.46 a credential may instead (or as well) be a pre-encoded `credential` for an
/// HTTP authentication scheme (`authtype`, e.g. `Bearer`). A credential with no password holds
/// an empty `password` and is `isBearerOnly`; only requests that advertise
/// `capability[]=authtype` ever see it.
public struct Credential: Sendable, Equatable {
    public var protocolName: String
    public var host: CredentialHost?
    public var path: String?
    public var username: String
    public var password: Secret
    /// Unix seconds after which the password must not be used (`password_expiry_utc`).
    public var passwordExpiresAt: Int64?
    public var oauthRefreshToken: Secret?
    /// The HTTP authentication scheme `credential` is for (`authtype`), e.g. `Bearer`.
    public var authType: String?
    /// The pre-encoded value of the Authorization header after the scheme (`credential`).
    public var credential: Secret?

    public init(
        protocolName: String, host: CredentialHost?, path: String? = nil, username: String,
        password: Secret, passwordExpiresAt: Int64? = nil, oauthRefreshToken: Secret? = nil,
        authType: String? = nil, credential: Secret? = nil
    ) {
        self.protocolName = protocolName
        self.host = host
        self.path = path
        self.username = username
        self.password = password
        self.passwordExpiresAt = passwordExpiresAt
        self.oauthRefreshToken = oauthRefreshToken
        self.authType = authType
        self.credential = credential
    }

    /// Whether this holds an `authtype`/`credential` pair.
    public var hasAuthTypeCredential: Bool { authType != nil && credential != nil }

    /// A credential that only a client speaking `capability[]=authtype` can use: it has no
    /// password to fall back on.
    public var isBearerOnly: Bool { hasAuthTypeCredential && password.isEmpty }

    /// What a client without `capability[]=authtype` may see: the pair is left out (git would
    /// discard it anyway), and a bearer-only credential is nothing at all.
    public var withoutAuthTypeCredential: Credential? {
        guard !isBearerOnly else { return nil }
        var stripped = self
        stripped.authType = nil
        stripped.credential = nil
        return stripped
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
    /// Given on `erase` only: then only entries holding exactly this `credential` are removed.
    public var credential: Secret?
    /// Whether bearer-only credentials match. A `get` from a client that does not advertise
    /// `capability[]=authtype` could not use one, so it does not look for them.
    public var includesBearerOnly: Bool
    /// Whether the path names one slot: equal to the credential's, an absent path matching only
    /// a credential without one (the Docker helper's server URLs), never git's "absent matches
    /// every path".
    public var pathIsExact = false

    public init(
        protocolName: String? = nil, host: CredentialHost? = nil, path: String? = nil,
        username: String? = nil, password: Secret? = nil, credential: Secret? = nil,
        includesBearerOnly: Bool = true
    ) {
        self.protocolName = protocolName
        self.host = host
        self.path = path
        self.username = username
        self.password = password
        self.credential = credential
        self.includesBearerOnly = includesBearerOnly
    }

    /// An erase pattern with no field set would remove everything; git's helpers refuse it.
    public var isEmptyPattern: Bool {
        protocolName == nil && host == nil && path == nil && username == nil
    }

    public func matches(_ credential: Credential) -> Bool {
        if let protocolName, protocolName != credential.protocolName { return false }
        if let host, host != credential.host { return false }
        if pathIsExact {
            if (path ?? "") != (credential.path ?? "") { return false }
        } else if let path, path != credential.path {
            return false
        }
        if let username, username != credential.username { return false }
        if let password, password != credential.password { return false }
        if let wanted = self.credential, wanted != credential.credential { return false }
        if !includesBearerOnly, credential.isBearerOnly { return false }
        return true
    }
}
