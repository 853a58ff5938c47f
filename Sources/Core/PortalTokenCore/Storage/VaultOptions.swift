import Basics

/// What the Vault store (`--backend vault`, docs/storage.md, "Vault / OpenBao") is opened with,
/// resolved from settings: where the server is, how the TLS peer is trusted, where the items go
/// and where the token comes from. No value here is a secret: the token itself is read by the
/// adapter, from the environment or a file, when a request needs it.
public struct VaultOptions: Sendable, Equatable {
    public static let defaultMount = "secret"
    public static let defaultPathPrefix = "portal-token"
    public static let defaultAppRoleMount = "approle"

    /// Where the token comes from, in the order the adapter tries them.
    public enum TokenSource: Sendable, Equatable {
        /// `VAULT_TOKEN`: the token is in this process's environment, under this name.
        case environment(String)
        /// A file holding the token, such as the sink an OpenBao or Vault Agent keeps fresh:
        /// read when first needed and again whenever it changes.
        case file(String)
        /// AppRole: the role ID, and the file that holds the secret ID; the login's token is
        /// kept for the run and renewed before it expires.
        case appRole(roleID: String, secretIDFile: String, mount: String)
    }

    /// `https://host:port`, without `/v1`.
    public var address: String
    public var namespace: String?
    public var mount: String
    public var pathPrefix: String
    public var token: TokenSource
    public var http: HTTPTransportOptions
    /// `vault-allow-http`: cleartext `http://` may reach a server off this host (the address,
    /// and a standby's redirect to its leader).
    public var allowsRemoteHTTP: Bool

    public init(
        address: String, namespace: String? = nil, mount: String = defaultMount,
        pathPrefix: String = defaultPathPrefix, token: TokenSource, http: HTTPTransportOptions = HTTPTransportOptions(),
        allowsRemoteHTTP: Bool = false
    ) {
        self.address = address
        self.namespace = namespace
        self.mount = mount
        self.pathPrefix = pathPrefix
        self.token = token
        self.http = http
        self.allowsRemoteHTTP = allowsRemoteHTTP
    }

    /// Whether a request to `url` would carry the token in cleartext off this host without
    /// `vault-allow-http`: an `http://` URL whose host is not loopback (`localhost`, an address
    /// in 127.0.0.0/8, `[::1]`). A name is judged as written, never by what it resolves to.
    public func refusesCleartext(to url: String) -> Bool {
        !allowsRemoteHTTP && Self.isRemoteCleartext(url)
    }

    static func isRemoteCleartext(_ url: String) -> Bool {
        guard url.lowercased().hasPrefix("http://") else { return false }
        guard let authority = URLAuthority(parsing: url) else { return true }
        if authority.host == "localhost" || authority.hostKind == .ipv6Loopback { return false }
        let octets = authority.host.split(separator: ".", omittingEmptySubsequences: false)
        let isIPv4Loopback =
            octets.count == 4 && octets[0] == "127"
            && octets.allSatisfy { octet in
                !octet.isEmpty && octet.utf8.count <= 3 && octet.utf8.allSatisfy(URLAuthority.isDigit)
                    && Int(octet).map { $0 <= 255 } == true
            }
        return !isIPv4Loopback
    }

    /// The options the settings give, checked: an address that is an http or https URL, a mount
    /// and prefix of plain path segments, a token source. `home` places the vault CLI's own
    /// token file (`~/.vault-token`), the last place a token is looked for.
    public init(settings: Settings, home: String?) throws(SettingError) {
        guard let rawAddress = settings.value(.vaultAddress)?.trimmingWhitespace, !rawAddress.isEmpty else {
            throw SettingError(
                "the vault backend needs the server's address",
                hint: "set VAULT_ADDR (or vault-address in the config file) to https://HOST:PORT")
        }
        var address = rawAddress
        while address.hasSuffix("/") { address.removeLast() }
        let lowered = address.lowercased()
        guard lowered.hasPrefix("https://") || lowered.hasPrefix("http://"), URLAuthority(parsing: address) != nil
        else {
            throw SettingError(
                "\(settings.origin(of: .vaultAddress)) must be an https:// or http:// URL",
                hint: "for example https://vault.example.com:8200")
        }
        let allowsRemoteHTTP = try settings.bool(.vaultAllowHTTP) ?? false
        if !allowsRemoteHTTP, Self.isRemoteCleartext(address) {
            throw SettingError(
                "\(settings.origin(of: .vaultAddress)) is a cleartext http:// address of a server that is not on "
                    + "this host: the Vault token and the secrets would cross the network readable",
                hint:
                    "use the server's https:// address; to accept cleartext anyway, set "
                    + "PORTAL_TOKEN_VAULT_ALLOW_HTTP=true (or vault-allow-http in the config file)")
        }
        let mount = try Self.pathSetting(settings, .vaultMount, default: Self.defaultMount)
        let prefix = try Self.pathSetting(settings, .vaultPathPrefix, default: Self.defaultPathPrefix)
        var http = try HTTPTransportOptions(settings: settings)
        if let caFile = settings.value(.vaultCACert)?.trimmingWhitespace, !caFile.isEmpty {
            // As the bao and vault clients read it: the one CA the server's certificate must
            // chain to. (Parsing the system's hundred-odd certificates as well cost a run that
            // reaches the server 85 % of its instructions.)
            http.caBundlePath = caFile
            http.trustsCABundleOnly = true
        }
        let namespace = settings.value(.vaultNamespace)?.trimmingWhitespace
        let token: TokenSource
        if settings.value(.vaultToken) != nil {
            token = .environment(Setting.vaultToken.environment!)
        } else if let file = settings.value(.vaultTokenFile)?.trimmingWhitespace, !file.isEmpty {
            token = .file(file)
        } else if let roleID = settings.value(.vaultRoleID)?.trimmingWhitespace, !roleID.isEmpty {
            guard let secretIDFile = settings.value(.vaultSecretIDFile)?.trimmingWhitespace, !secretIDFile.isEmpty
            else {
                throw SettingError(
                    "\(settings.origin(of: .vaultRoleID)) is set, but no secret ID file is",
                    hint: "set PORTAL_TOKEN_VAULT_SECRET_ID_FILE (or vault-secret-id-file) to the file that holds it")
            }
            token = .appRole(
                roleID: roleID, secretIDFile: secretIDFile,
                mount: try Self.pathSetting(settings, .vaultAppRoleMount, default: Self.defaultAppRoleMount))
        } else if let home, home.hasPrefix("/") {
            token = .file(home + "/.vault-token")
        } else {
            throw SettingError(
                "the vault backend has no token",
                hint:
                    "set VAULT_TOKEN, PORTAL_TOKEN_VAULT_TOKEN_FILE (an agent's sink file), or an AppRole "
                    + "(PORTAL_TOKEN_VAULT_ROLE_ID and PORTAL_TOKEN_VAULT_SECRET_ID_FILE)")
        }
        self.init(
            address: address, namespace: namespace.flatMap { $0.isEmpty ? nil : $0 }, mount: mount,
            pathPrefix: prefix, token: token, http: http, allowsRemoteHTTP: allowsRemoteHTTP)
    }

    /// A mount or prefix: path segments of letters, digits and `-_.`, joined by `/`.
    static func pathSetting(_ settings: Settings, _ setting: Setting, default defaultValue: String)
        throws(SettingError) -> String
    {
        guard var text = settings.value(setting)?.trimmingWhitespace, !text.isEmpty else { return defaultValue }
        while text.hasPrefix("/") { text.removeFirst() }
        while text.hasSuffix("/") { text.removeLast() }
        let segments = text.split(separator: "/", omittingEmptySubsequences: false)
        let valid =
            !segments.isEmpty
            && segments.allSatisfy { segment in
                !segment.isEmpty && segment != "." && segment != ".."
                    && segment.utf8.allSatisfy { byte in
                        URLAuthority.isDigit(byte)
                            || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "z"))
                            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
                    }
            }
        guard valid else {
            throw SettingError(
                "\(settings.origin(of: setting)) must be a path of letters, digits, '-', '_' and '.' separated by '/'")
        }
        return text
    }
}

/// Where an AppRole login's token is kept between runs: the run's secret cache (the kernel user
/// keyring), with the key cache's timeouts (`key-cache-timeout`, `key-cache-max`); `portal-token
/// lock` drops it with the rest (docs/storage.md, "Vault / OpenBao").
public struct VaultLoginCache {
    public var cache: any SecretCache
    public var idleSeconds: Int
    public var maximumSeconds: Int

    public init(cache: any SecretCache, idleSeconds: Int, maximumSeconds: Int) {
        self.cache = cache
        self.idleSeconds = idleSeconds
        self.maximumSeconds = maximumSeconds
    }
}
