import Basics

/// The Portal sessions of one store (`SessionItems`), one per auth environment, and optionally
/// a short-lived copy of each in a secret cache (the kernel user keyring), so that `portal-token
/// get` and `api` in a script loop do not ask the keyring daemon or derive a file key every time
/// (docs/storage.md, "The session cache").
///
/// - The copy is served only while the session may be handed out without asking Portal
///   (`decision == .handOut`); otherwise the store is read.
/// - It expires by itself at the session's `expiresAt`, or after `timeoutSeconds`, whichever is
///   first.
/// - With a cache, every change goes through here under the session lock: a save replaces the
///   copy, a delete drops it first. A miss fills the copy under the lock too, so a fill can never
///   resurrect a session another process has just removed; a session that cannot be handed out
///   is not copied, so reading it takes no lock.
/// - A hit costs no unlock; when the store is the Secret Service, it costs one bounded check
///   that the collection is still unlocked (`confirmUnlocked`), since a locked keyring must lock
///   its cached answers too. A locked collection drops every cached session of its family and
///   is an error (exit 4).
public final class Sessions {
    /// Where and how long copies are kept.
    public struct Cache {
        let cache: any SecretCache
        let lock: any SessionLock
        let scope: String
        let family: String
        let timeoutSeconds: Int
        let now: () -> Int64
        let confirmUnlocked: (() throws(StoreError) -> Void)?

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
            _ cache: any SecretCache, lock: any SessionLock, scope: String, family: String = "", timeoutSeconds: Int,
            now: @escaping () -> Int64, confirmUnlocked: (() throws(StoreError) -> Void)? = nil
        ) {
            self.cache = cache
            self.lock = lock
            self.scope = scope
            self.family = family
            self.timeoutSeconds = timeoutSeconds
            self.now = now
            self.confirmUnlocked = confirmUnlocked
        }
    }

    private let items: any ItemStore
    private let copies: Cache?

    public init(_ items: any ItemStore, cache: Cache? = nil) {
        self.items = items
        copies = cache.flatMap { $0.timeoutSeconds > 0 ? $0 : nil }
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
        Self.namePrefix(family: copies?.family ?? "") + FNV1a.hex((copies?.scope ?? "") + "\u{0}" + authEnvironmentID)
    }

    public func loadSession(authEnvironmentID: String) throws(StoreError) -> StoredSession {
        if let copies, let copy = copies.cache.read(name(for: authEnvironmentID)),
            let session = PortalSession.decode(payload: copy, authEnvironmentID: authEnvironmentID),
            session.decision(at: copies.now()) == .handOut
        {
            do {
                try copies.confirmUnlocked?()
            } catch {
                if error.kind == .locked { copies.cache.dropAll(withPrefix: Self.namePrefix(family: copies.family)) }
                throw error
            }
            return .present(session)
        }
        let stored = try read(authEnvironmentID)
        if let copies, case .present(let session) = stored, session.decision(at: copies.now()) == .handOut {
            try copies.lock.withStoreLock { () throws(StoreError) in
                // Read again under the lock: the copy must be of what is stored now.
                if case .present(let current) = try read(authEnvironmentID) { keep(current) }
            }
        }
        return stored
    }

    private func read(_ authEnvironmentID: String) throws(StoreError) -> StoredSession {
        guard let newest = try items.search(SessionItems.filter(authEnvironmentID)).first else { return .absent }
        return SessionItems.session(from: newest).map { .present($0) } ?? .unreadable
    }

    /// Stores `session` as the environment's only session.
    public func saveSession(_ session: PortalSession) throws(StoreError) {
        try changing { () throws(StoreError) in
            copies?.cache.drop(name(for: session.authEnvironmentID))
            try items.replace(SessionItems.filter(session.authEnvironmentID), with: SessionItems.item(for: session))
            keep(session)
        }
    }

    /// Removes the environment's session; with `token`, only a session holding it (a newer one
    /// stored meanwhile survives). True when one was removed.
    @discardableResult
    public func deleteSession(authEnvironmentID: String, holding token: Secret? = nil) throws(StoreError) -> Bool {
        try changing { () throws(StoreError) -> Bool in
            copies?.cache.drop(name(for: authEnvironmentID))
            return try items.delete(SessionItems.filter(authEnvironmentID)) { item in
                token.map { SessionItems.session(from: item)?.token == $0 } ?? true
            } > 0
        }
    }

    private func keep(_ session: PortalSession) {
        guard let copies, let expiresAt = session.expiresAt else { return }
        let remaining = expiresAt - copies.now()
        guard remaining > 0 else { return }
        copies.cache.store(
            session.payload, as: name(for: session.authEnvironmentID),
            forSeconds: Int(min(remaining, Int64(copies.timeoutSeconds))))
    }

    /// A change, under the session lock when copies are kept.
    private func changing<Result>(_ body: () throws(StoreError) -> Result) throws(StoreError) -> Result {
        guard let copies else { return try body() }
        return try copies.lock.withStoreLock(body)
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
