import Basics

/// The Portal sessions of one store with a short-lived copy of each in a secret cache (the
/// kernel user keyring), so that `portal-token get` and `api` in a script loop do not ask the
/// keyring daemon or derive a file key every time (docs/storage.md, "The session cache").
///
/// - The copy is served only while the session may be handed out without asking Portal
///   (`decision == .handOut`); otherwise the store is read.
/// - It expires by itself at the session's `expiresAt`, or after `timeoutSeconds`, whichever is
///   first.
/// - Every change goes through here under the session lock: a save replaces the copy, a delete
///   drops it first. A miss fills the copy under the lock too, so a fill can never resurrect a
///   session another process has just removed; a session that cannot be handed out is not
///   copied, so reading it takes no lock.
/// - A hit costs no unlock; when the store is the Secret Service, it costs one bounded check
///   that the collection is still unlocked (`confirmUnlocked`), since a locked keyring must lock
///   its cached answers too. A locked collection drops every cached session of its family and
///   is an error (exit 4).
public final class CachedSessions {
    private let cache: any SecretCache
    private let lock: any SessionLock
    private let scope: String
    private let family: String
    private let timeoutSeconds: Int
    private let now: () -> Int64
    private let store: SessionItems
    private let confirmUnlocked: (() throws(StoreError) -> Void)?

    /// - Parameters:
    ///   - scope: names the store behind the cache (backend, file, bus), so that two stores
    ///     never share a copy.
    ///   - family: names the stores a lock or a migration concerns together (the file and the
    ///     bus): a locked keyring drops its family's copies, and no other's (another user
    ///     session's bus, another file).
    ///   - timeoutSeconds: the longest a copy lives; 0 turns the cache off.
    ///   - confirmUnlocked: run before a copy is served; throws when the store behind it is
    ///     locked (or cannot say), nil for a store whose lock the cache does not bypass.
    public init(
        _ store: SessionItems, cache: any SecretCache, lock: any SessionLock, scope: String, family: String = "",
        timeoutSeconds: Int, now: @escaping () -> Int64, confirmUnlocked: (() throws(StoreError) -> Void)? = nil
    ) {
        self.store = store
        self.confirmUnlocked = confirmUnlocked
        self.cache = cache
        self.lock = lock
        self.scope = scope
        self.family = family
        self.timeoutSeconds = timeoutSeconds
        self.now = now
    }

    public static let namePrefix = "portal-token:session:"

    /// The start of every cache entry's name in one family: dropping by it drops that family's
    /// copies only.
    public static func namePrefix(family: String) -> String {
        namePrefix + FNV1a.hex(family) + ":"
    }

    /// The cache entry's name: a recognisable prefix, a digest of the family, and one of the
    /// scope and environment.
    func name(for authEnvironmentID: String) -> String {
        Self.namePrefix(family: family) + FNV1a.hex(scope + "\u{0}" + authEnvironmentID)
    }

    public func loadSession(authEnvironmentID: String) throws(StoreError) -> StoredSession {
        if timeoutSeconds > 0, let copy = cache.read(name(for: authEnvironmentID)),
            let session = PortalSession.decode(payload: copy, authEnvironmentID: authEnvironmentID),
            session.decision(at: now()) == .handOut
        {
            do {
                try confirmUnlocked?()
            } catch {
                if error.kind == .locked { cache.dropAll(withPrefix: Self.namePrefix(family: family)) }
                throw error
            }
            return .present(session)
        }
        let stored = try store.loadSession(authEnvironmentID: authEnvironmentID)
        if timeoutSeconds > 0, case .present(let session) = stored, session.decision(at: now()) == .handOut {
            try withLock { () throws(StoreError) in
                // Read again under the lock: the copy must be of what is stored now.
                if case .present(let current) = try store.loadSession(authEnvironmentID: authEnvironmentID) {
                    keep(current)
                }
            }
        }
        return stored
    }

    public func saveSession(_ session: PortalSession) throws(StoreError) {
        try withLock { () throws(StoreError) in
            cache.drop(name(for: session.authEnvironmentID))
            try store.saveSession(session)
            keep(session)
        }
    }

    /// Removes the environment's session; with `token`, only a session holding it. True when one
    /// was removed.
    @discardableResult
    public func deleteSession(authEnvironmentID: String, holding token: Secret? = nil) throws(StoreError) -> Bool {
        try withLock { () throws(StoreError) -> Bool in
            cache.drop(name(for: authEnvironmentID))
            return try store.deleteSession(authEnvironmentID: authEnvironmentID, holding: token)
        }
    }

    private func keep(_ session: PortalSession) {
        guard timeoutSeconds > 0, let expiresAt = session.expiresAt else { return }
        let remaining = expiresAt - now()
        guard remaining > 0 else { return }
        cache.store(
            session.payload, as: name(for: session.authEnvironmentID),
            forSeconds: Int(min(remaining, Int64(timeoutSeconds))))
    }

    private func withLock<Result>(_ body: () throws(StoreError) -> Result) throws(StoreError) -> Result {
        try lock.withStoreLock(body)
    }
}

/// FNV-1a, 64 bits: names cache entries after values that need not show (a file path); not a
/// security measure.
enum FNV1a {
    static func hex(_ text: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return Hex.encode(hash, width: 16)
    }
}
