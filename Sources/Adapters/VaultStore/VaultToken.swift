import Basics
import Glibc
import PortalTokenCore

/// Where the Vault token comes from (docs/settings.md, "The Vault store"), read only when a
/// request needs it and never written anywhere but the request's `Authorization` header:
/// - `VAULT_TOKEN`;
/// - a token file, such as the sink an OpenBao or Vault Agent keeps fresh: read again whenever
///   the file changes (another inode, size or modification time), and after a refusal;
/// - AppRole: a login with the role ID and the secret ID read from its file; the token it gives
///   is renewed (`auth/token/renew-self`) once more than half its lease has passed, and a new
///   login is made when it is refused or cannot be renewed. The token is kept in the login cache
///   for the runs that follow, until half its lease has passed, so a host makes one login per
///   half lease rather than one per process (each login is a new token on the server).
final class VaultToken {
    private let source: VaultOptions.TokenSource
    private let environment: (String) -> String?
    private let monotonicNow: () -> Int64
    private let loginCache: VaultLoginCache?
    private let loginCacheName: String
    private var cached: Secret?
    private var fileIdentity: FileVersion?
    /// For an AppRole token: when it was obtained (monotonic seconds), its lease, and whether
    /// it may be renewed.
    private var leaseStart: Int64 = 0
    private var leaseSeconds: Int64 = 0
    private var renewable = false

    init(
        _ source: VaultOptions.TokenSource, environment: @escaping (String) -> String?,
        monotonicNow: @escaping () -> Int64, loginCache: VaultLoginCache? = nil, loginCacheName: String = ""
    ) {
        self.source = source
        self.environment = environment
        self.monotonicNow = monotonicNow
        self.loginCache = loginCache
        self.loginCacheName = loginCacheName
    }

    /// The login cache's name for the token of one role on one server: a digest of the server,
    /// namespace, auth mount and role ID, so `keyctl show` names none of them.
    static func loginCacheName(_ options: VaultOptions) -> String {
        guard case .appRole(let roleID, _, let mount) = options.token else { return "" }
        let identity = Array([options.address, options.namespace ?? "", mount, roleID].joined(separator: "\u{0}").utf8)
        let digest = Sodium.sha256(identity)
        return SecretCacheNames.prefix + "vault-login:" + Hex.encode(digest.prefix(16))
    }

    /// Where the token came from, for messages: a variable or a path, never the token.
    var origin: String {
        switch source {
        case .environment(let name): return name
        case .file(let path): return "the token file \(path)"
        case .appRole(_, _, let mount): return "the AppRole login at auth/\(mount)"
        }
    }

    /// The token to send now.
    func current(using client: VaultClient) throws(StoreError) -> Secret {
        switch source {
        case .environment(let name):
            if let cached { return cached }
            guard let text = environment(name)?.trimmingWhitespace, !text.isEmpty else {
                throw StoreError(.failed, "\(name) is empty", hint: "set VAULT_TOKEN to a token, or unset it")
            }
            let token = Secret(text)
            cached = token
            return token
        case .file(let path):
            let identity = FileVersion.of(path)
            if let cached, identity == fileIdentity { return cached }
            let token = try Self.readToken(path, what: "the Vault token file")
            cached = token
            fileIdentity = identity
            return token
        case .appRole(let roleID, let secretIDFile, let mount):
            if let cached {
                guard renewable, monotonicNow() - leaseStart > leaseSeconds / 2 else { return cached }
                if (try? renew(cached, using: client)) == true, let renewed = self.cached { return renewed }
            }
            // An earlier run's login, kept no longer than half its lease: this run uses it as it
            // is, and logs in afresh when it is refused.
            if cached == nil, let kept = loginCache?.cache.read(loginCacheName) {
                cached = kept
                renewable = false
                return kept
            }
            return try logIn(roleID: roleID, secretIDFile: secretIDFile, mount: mount, using: client)
        }
    }

    /// After a 403: whether a fresh token may do better (the file changed, a new AppRole login).
    func renewAfterDenial(using client: VaultClient) -> Bool {
        switch source {
        case .environment:
            return false
        case .file(let path):
            guard let previous = cached, let token = try? Self.readToken(path, what: "the Vault token file"),
                token != previous
            else { return false }
            cached = token
            fileIdentity = FileVersion.of(path)
            return true
        case .appRole:
            guard cached != nil else { return false }
            cached = nil
            loginCache?.cache.drop(loginCacheName)
            return true
        }
    }

    private func logIn(roleID: String, secretIDFile: String, mount: String, using client: VaultClient)
        throws(StoreError) -> Secret
    {
        let secretID = try Self.readToken(secretIDFile, what: "the AppRole secret ID file")
        var body = VaultClient.body { writer in
            writer.beginObject()
            writer.key("role_id")
            writer.string(roleID)
            writer.key("secret_id")
            writer.string(secretID)
            writer.endObject()
        }
        defer { zeroize(&body) }
        let path = "auth/\(mount)/login"
        let started = monotonicNow()
        var response = try client.exchange("POST", path, body: body, bearer: nil)
        defer { zeroize(&response.body) }
        guard response.isSuccess else {
            if response.status == 400 || response.status == 403 {
                throw StoreError(
                    .failed, "the AppRole login at \(path) on \(client.server) was refused (HTTP \(response.status))",
                    hint: "check PORTAL_TOKEN_VAULT_ROLE_ID and the secret ID in PORTAL_TOKEN_VAULT_SECRET_ID_FILE")
            }
            throw client.failure(response, path: path)
        }
        guard let auth = try? Self.readAuth(response.body) else {
            throw StoreError(.failed, "the AppRole login at \(path) on \(client.server) answered no token")
        }
        cached = auth.token
        leaseStart = started
        leaseSeconds = auth.leaseSeconds
        renewable = auth.renewable
        keep(auth.token, leaseSeconds: auth.leaseSeconds)
        return auth.token
    }

    /// Keeps a new login's token for later runs: for half its lease at most (so a run never
    /// uses one that is about to expire), and within the cache's own timeouts. A token with no
    /// lease (one that never expires) is kept for the cache's timeouts alone.
    private func keep(_ token: Secret, leaseSeconds: Int64) {
        guard let loginCache else { return }
        let limit = leaseSeconds > 0 ? Int(clamping: leaseSeconds / 2) : Int.max
        let maximum = min(loginCache.maximumSeconds, limit)
        guard maximum > 0, loginCache.idleSeconds > 0 else { return }
        loginCache.cache.store(
            token, as: loginCacheName, idleSeconds: min(loginCache.idleSeconds, maximum), maximumSeconds: maximum)
    }

    /// `auth/token/renew-self`; true when the token was renewed.
    private func renew(_ token: Secret, using client: VaultClient) throws(StoreError) -> Bool {
        let started = monotonicNow()
        var response = try client.exchange("POST", "auth/token/renew-self", body: Array("{}".utf8), bearer: token)
        defer { zeroize(&response.body) }
        guard response.isSuccess, let auth = try? Self.readAuth(response.body) else { return false }
        cached = auth.token
        leaseStart = started
        leaseSeconds = auth.leaseSeconds
        renewable = auth.renewable
        return true
    }

    /// The `auth` object of a login or renewal answer.
    static func readAuth(_ body: [UInt8]) throws(JSONError) -> (token: Secret, leaseSeconds: Int64, renewable: Bool) {
        var reader = JSONReader(body)
        var token: Secret?
        var lease: Int64 = 0
        var renewable = false
        try reader.object { reader, key throws(JSONError) in
            guard key == "auth", !reader.null() else { return try reader.skipValue() }
            try reader.object { reader, key throws(JSONError) in
                switch key {
                case "client_token": token = try reader.secret()
                case "lease_duration": lease = try reader.int64()
                case "renewable": renewable = try reader.bool()
                default: try reader.skipValue()
                }
            }
        }
        guard let token, !token.isEmpty else { throw JSONError(offset: 0) }
        return (token, lease, renewable)
    }

    /// A token or secret ID from a file: the first line, whitespace trimmed. The file must be
    /// the user's own and writable by no one else, as ssh wants of its keys.
    static func readToken(_ path: String, what: String) throws(StoreError) -> Secret {
        var bytes: [UInt8]
        do {
            bytes = try FileReading.contents(of: path, limit: 64 * 1024, ownOnly: true)
        } catch {
            throw StoreError(.failed, "\(what) \(path) could not be read: \(error.reason)")
        }
        defer { zeroize(&bytes) }
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
        let line = bytes.prefix { $0 != 0x0A }
        guard let start = line.firstIndex(where: { !isSpace($0) }), let end = line.lastIndex(where: { !isSpace($0) })
        else {
            throw StoreError(.failed, "\(what) \(path) is empty")
        }
        return Secret(bytes: Array(line[start...end]))
    }
}
