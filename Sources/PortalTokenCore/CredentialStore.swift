/// A place that keeps git credentials. Every backend (keyring, encrypted file, the in-memory
/// test store) passes the same contract suite.
public protocol CredentialStore {
    /// Every stored credential the query matches (its password, if any, is ignored),
    /// most recently stored first. The order is deterministic.
    func lookup(_ query: CredentialQuery) throws(StoreError) -> [Credential]
    /// Stores `credential`, replacing the one in the same slot (protocol, host, path, username).
    func store(_ credential: Credential) throws(StoreError)
    /// Removes every credential the query matches, its password included when given.
    /// Returns how many were removed.
    @discardableResult
    func erase(_ query: CredentialQuery) throws(StoreError) -> Int
}

/// Why a store could not do what was asked. Every case means "retrying may work, and nothing
/// was deleted" (product contract §4, exit 4). Messages name the store and the reason, never a
/// stored value.
public struct StoreError: Error, Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// No session bus, no Secret Service provider, no usable file: another backend may serve.
        case unavailable
        /// The store exists but is locked; unlocking it is the user's move, not a switch.
        case locked
        /// The store did not answer within its bound.
        case timedOut
        /// Anything else the store reported.
        case failed
    }

    public var kind: Kind
    public var message: String
    public var hint: String?

    /// The hint every "keyring is locked" error carries.
    public static let keyringLockedHint =
        "unlock it (log in to the desktop session, or open Passwords and Keys / seahorse) and try again"

    public init(_ kind: Kind, _ message: String, hint: String? = nil) {
        self.kind = kind
        self.message = message
        self.hint = hint
    }
}

/// How git-credential-libsecret packs the extra attributes into one secret: the password on the
/// first line, then `password_expiry_utc=` and `oauth_refresh_token=` lines. portal-token adds
/// `authtype=` and `credential=` lines (git 2.46+), which git's helper skips as it skips every
/// line it does not know; a bearer-only credential has an empty first line. Unknown lines are
/// ignored here too, so items written by newer helpers still read.
public enum SecretPacking {
    public struct Unpacked: Sendable {
        public var password: Secret
        public var passwordExpiresAt: Int64?
        public var oauthRefreshToken: Secret?
        public var authType: String?
        public var credential: Secret?
    }

    public static func pack(password: Secret, passwordExpiresAt: Int64?, oauthRefreshToken: Secret?) -> Secret {
        pack(
            Credential(
                protocolName: "", host: nil, username: "", password: password,
                passwordExpiresAt: passwordExpiresAt, oauthRefreshToken: oauthRefreshToken))
    }

    public static func pack(_ credential: Credential) -> Secret {
        var bytes: [UInt8] = []
        credential.password.withBytes { bytes.append(contentsOf: $0) }
        if let passwordExpiresAt = credential.passwordExpiresAt {
            bytes.append(contentsOf: "\npassword_expiry_utc=\(passwordExpiresAt)".utf8)
        }
        if let oauthRefreshToken = credential.oauthRefreshToken {
            bytes.append(contentsOf: "\noauth_refresh_token=".utf8)
            oauthRefreshToken.withBytes { bytes.append(contentsOf: $0) }
        }
        if let authType = credential.authType, let value = credential.credential {
            bytes.append(contentsOf: "\nauthtype=\(authType)\ncredential=".utf8)
            value.withBytes { bytes.append(contentsOf: $0) }
        }
        let secret = Secret(bytes: bytes)
        zeroize(&bytes)
        return secret
    }

    public static func unpack(_ packed: Secret) -> Unpacked {
        packed.withBytes { raw in
            let lines = raw.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            var result = Unpacked(password: Secret(bytes: lines.first.map { Array($0) } ?? []))
            for line in lines.dropFirst() {
                if let value = value(of: line, after: "password_expiry_utc=") {
                    result.passwordExpiresAt = Int64(String(decoding: value, as: UTF8.self))
                } else if let value = value(of: line, after: "oauth_refresh_token=") {
                    result.oauthRefreshToken = Secret(bytes: Array(value))
                } else if let value = value(of: line, after: "authtype=") {
                    result.authType = String(decoding: value, as: UTF8.self)
                } else if let value = value(of: line, after: "credential=") {
                    result.credential = Secret(bytes: Array(value))
                }
            }
            // Half a pair is no credential.
            if result.authType == nil || result.credential == nil {
                result.authType = nil
                result.credential = nil
            }
            return result
        }
    }

    private static func value(of line: UnsafeRawBufferPointer.SubSequence, after prefix: String)
        -> UnsafeRawBufferPointer.SubSequence?
    {
        let prefixBytes = Array(prefix.utf8)
        guard line.count >= prefixBytes.count, line.prefix(prefixBytes.count).elementsEqual(prefixBytes) else {
            return nil
        }
        return line.dropFirst(prefixBytes.count)
    }
}

extension SecretPacking.Unpacked {
    init(password: Secret) {
        self.password = password
        passwordExpiresAt = nil
        oauthRefreshToken = nil
        authType = nil
        credential = nil
    }

    /// Fills the secret fields of `credential` (read from an item's attributes).
    public func apply(to credential: inout Credential) {
        credential.password = password
        credential.passwordExpiresAt = passwordExpiresAt
        credential.oauthRefreshToken = oauthRefreshToken
        credential.authType = authType
        credential.credential = self.credential
    }
}

/// A credential store whose every write runs under the cross-process store lock (product
/// contract §6): parallel `store`s of one slot leave one item, since each one's search, create
/// and removal of the previous item happen while no other process writes.
public struct LockedCredentialStore: CredentialStore {
    public let store: any CredentialStore
    public let lock: any SessionLock

    public init(_ store: any CredentialStore, lock: any SessionLock) {
        self.store = store
        self.lock = lock
    }

    public func lookup(_ query: CredentialQuery) throws(StoreError) -> [Credential] {
        try store.lookup(query)
    }

    public func store(_ credential: Credential) throws(StoreError) {
        try lock.withStoreLock { () throws(StoreError) in try store.store(credential) }
    }

    @discardableResult
    public func erase(_ query: CredentialQuery) throws(StoreError) -> Int {
        try lock.withStoreLock { () throws(StoreError) in try store.erase(query) }
    }
}

extension SessionLock {
    /// `withLock` for a body that throws only store errors; a failure of the lock itself is a
    /// store error too (exit 4).
    public func withStoreLock<Result>(_ body: () throws(StoreError) -> Result) throws(StoreError) -> Result {
        do {
            return try withLock { try body() }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.failed, "the store lock failed (\(type(of: error)))")
        }
    }
}
