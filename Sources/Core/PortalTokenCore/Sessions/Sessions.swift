import Basics

/// The Portal sessions of one store (`SessionItems`), one per auth environment and end user, and
/// optionally
/// a short-lived copy of each in a secret cache (the kernel keyring), so that `portal-token
/// get` and `api` in a script loop do not ask the keyring daemon or derive a file key every time
/// (docs/storage.md, "The session cache").
///
/// - A copy is named after the store it came from, as that store is, never as it was asked for
///   (`Cache.store`): `--backend secret-service` and `auto` on one bus share one copy, and so do
///   two spellings of one file. So a change made under one spelling reaches the copy every
///   spelling reads.
/// - The copy is served only while the session may be handed out without asking Portal
///   (`decision == .handOut`); otherwise the store is read.
/// - It expires by itself `timeoutSeconds` after its last use (each hit starts that again), and
///   at the latest `maximumSeconds` after it was kept, or at the session's `expiresAt`, whichever
///   is first.
/// - With a cache, every change goes through here under the session lock: a save replaces the
///   copy; a delete first drops every copy of the environment, whatever store it came from. A
///   miss fills the copy under the lock too, so a fill can never resurrect a session another
///   process has just removed; a session that cannot be handed out is not copied, so reading it
///   takes no lock.
/// - A hit costs no unlock; when the store is the Secret Service, it costs one bounded check
///   that the collection is still unlocked (`confirmUnlocked`), since a locked keyring must lock
///   its cached answers too. A locked collection drops every copy that came from it and is an
///   error (exit 4).
/// - For a store other hosts change (the Vault store), a copy lives only `recheckSeconds` after
///   the store last confirmed it; beside it, for as long as a copy of another store would live,
///   the cache keeps where the session was found (the item's `id`, no secret). A read past the
///   copy asks the store for that one item again (`ItemStore.newest(_:lastSeen:)`: one request
///   to the server) and keeps a fresh copy. The read and the fill happen once, under the session
///   lock.
public final class Sessions {
    /// Where and how long copies are kept.
    public struct Cache {
        let cache: any SecretCache
        let lock: any SessionLock
        let store: () throws(StoreError) -> String
        let timeoutSeconds: Int
        let maximumSeconds: Int
        let now: () -> Int64
        let confirmUnlocked: (() throws(StoreError) -> Void)?
        let recheckSeconds: Int?

        /// - Parameters:
        ///   - store: names the store behind the cache by what it is (the backend in use and its
        ///     identity: the file's canonical path, the bus's ID), never by how it was asked for;
        ///     asked when a copy is read or kept. When it throws (a bus that cannot be asked), no
        ///     copy is read or kept: the store answers alone.
        ///   - timeoutSeconds: how long a copy lives unused; each hit starts it again. 0 turns the
        ///     cache off.
        ///   - maximumSeconds: the longest a copy lives, however often it is used; nil for
        ///     `timeoutSeconds`. 0 turns the cache off.
        ///   - confirmUnlocked: run before a copy is served; throws when the store behind it is
        ///     locked (or cannot say), nil for a store whose lock the cache does not bypass.
        ///   - recheckSeconds: for a store other hosts change, how long a copy is served after the
        ///     store last confirmed it (nil: as long as the timeouts allow). 0 turns the cache off.
        public init(
            _ cache: any SecretCache, lock: any SessionLock, store: @escaping () throws(StoreError) -> String,
            timeoutSeconds: Int, maximumSeconds: Int? = nil, now: @escaping () -> Int64,
            confirmUnlocked: (() throws(StoreError) -> Void)? = nil, recheckSeconds: Int? = nil
        ) {
            self.cache = cache
            self.lock = lock
            self.store = store
            self.timeoutSeconds = timeoutSeconds
            self.maximumSeconds = maximumSeconds ?? timeoutSeconds
            self.now = now
            self.confirmUnlocked = confirmUnlocked
            self.recheckSeconds = recheckSeconds
        }

        /// A cache in front of the store named `store`.
        public init(
            _ cache: any SecretCache, lock: any SessionLock, store: String, timeoutSeconds: Int,
            maximumSeconds: Int? = nil, now: @escaping () -> Int64,
            confirmUnlocked: (() throws(StoreError) -> Void)? = nil
        ) {
            self.init(
                cache, lock: lock, store: { () throws(StoreError) in store }, timeoutSeconds: timeoutSeconds,
                maximumSeconds: maximumSeconds, now: now, confirmUnlocked: confirmUnlocked)
        }
    }

    private let items: any ItemStore
    private let copies: Cache?
    /// Told of every session read or written, for the audit log's environment, end user and
    /// token fingerprint (docs/audit.md, "Fields").
    public var observe: ((PortalSession) -> Void)?
    /// Told where a session was found (the kept copy or the store), for `--verbose`; never a value.
    public var trace: ((String) -> Void)?

    public init(_ items: any ItemStore, cache: Cache? = nil) {
        self.items = items
        copies = cache.flatMap {
            $0.timeoutSeconds > 0 && $0.maximumSeconds > 0 && ($0.recheckSeconds ?? 1) > 0 ? $0 : nil
        }
    }

    public static let namePrefix = SecretCacheNames.prefix + "session:"

    /// The start of the name of every copy that came from one store: dropping by it drops that
    /// store's copies only.
    public static func namePrefix(store: String) -> String {
        namePrefix + FNV1a.hex(store) + ":"
    }

    /// The cache entry's name: a recognisable prefix, a digest of the store, one of the
    /// environment, and one of the end user asked for (none when the environment's newest
    /// session was asked for).
    static func name(store: String, authEnvironmentID: String, endUserID: String?) -> String {
        namePrefix(store: store) + FNV1a.hex(authEnvironmentID) + endUserSuffix(endUserID)
    }

    /// Where a store that is rechecked last found the session: the item's `id`. Named so that
    /// whatever drops the environment's copies drops it too.
    static func locationName(store: String, authEnvironmentID: String, endUserID: String?) -> String {
        namePrefix + "at:" + FNV1a.hex(store) + ":" + FNV1a.hex(authEnvironmentID) + endUserSuffix(endUserID)
    }

    private static func endUserSuffix(_ endUserID: String?) -> String { endUserID.map { "." + FNV1a.hex($0) } ?? "" }

    /// Whether `name` is a copy of one of the environment's sessions from `store`, of any end
    /// user, or where one was found.
    static func isCopy(_ name: String, of authEnvironmentID: String, from store: String) -> Bool {
        name.hasPrefix(namePrefix(store: store) + FNV1a.hex(authEnvironmentID))
            || name.hasPrefix(namePrefix + "at:" + FNV1a.hex(store) + ":" + FNV1a.hex(authEnvironmentID))
    }

    /// Whether `name` is a copy of one of the environment's sessions, of any end user and store.
    static func isCopy(_ name: String, of authEnvironmentID: String) -> Bool {
        let environment = ":" + FNV1a.hex(authEnvironmentID)
        return name.hasPrefix(namePrefix)
            && (name.hasSuffix(environment) || name.firstByteRange(of: environment + ".") != nil)
    }

    /// The name of the store behind the cache; nil without a cache, or when the store cannot be
    /// named, and then no copy is read or kept.
    private func storeName() -> String? {
        guard let copies else { return nil }
        do {
            return try copies.store()
        } catch {
            return nil
        }
    }

    /// The session of `endUserID` in the environment, or with none named the environment's newest.
    public func loadSession(authEnvironmentID: String, endUserID: String? = nil) throws(StoreError) -> StoredSession {
        let store = storeName()
        if let copies, let store {
            if let copy = copies.cache.read(
                Self.name(store: store, authEnvironmentID: authEnvironmentID, endUserID: endUserID)),
                let session = PortalSession.decode(payload: copy, authEnvironmentID: authEnvironmentID),
                session.decision(at: copies.now()) == .handOut
            {
                do {
                    try copies.confirmUnlocked?()
                } catch {
                    if error.kind == .locked { copies.cache.dropAll(withPrefix: Self.namePrefix(store: store)) }
                    throw error
                }
                observe?(session)
                trace?("session: served from the copy kept in the kernel keyring")
                return .present(session)
            }
            if copies.recheckSeconds != nil {
                return try recheck(authEnvironmentID, endUserID, store: store, copies: copies)
            }
        }
        let stored = try read(authEnvironmentID, endUserID)
        if let copies, let store, case .present(let session) = stored, session.decision(at: copies.now()) == .handOut {
            try copies.lock.withStoreLock { () throws(StoreError) in
                // Read again under the lock: the copy must be of what is stored now.
                if case .present(let current) = try read(authEnvironmentID, endUserID) {
                    keep(current, from: store, askedFor: endUserID)
                }
            }
        }
        if case .present(let session) = stored { observe?(session) }
        trace?(
            {
                switch stored {
                case .absent: return "session: none in the store"
                case .unreadable: return "session: the store holds one that cannot be read"
                case .present: return "session: read from the store"
                }
            }())
        return stored
    }

    /// Past the copy of a store that is rechecked: the item last found is asked for again (one
    /// request when it is still there), else the store is searched, and a fresh copy kept; all
    /// under the session lock, so a fill never resurrects a session this host has just removed.
    private func recheck(
        _ authEnvironmentID: String, _ endUserID: String?, store: String, copies: Cache
    ) throws(StoreError) -> StoredSession {
        try copies.lock.withStoreLock { () throws(StoreError) -> StoredSession in
            let location = Self.locationName(store: store, authEnvironmentID: authEnvironmentID, endUserID: endUserID)
            let filter = SessionItems.filter(authEnvironmentID, endUserID: endUserID)
            let lastSeen = copies.cache.read(location).map { $0.withBytes { String(decoding: $0, as: UTF8.self) } }
            let newest: StoredItem?
            if let lastSeen {
                newest = try items.newest(filter, lastSeen: lastSeen)
            } else {
                newest = try items.search(filter).first
            }
            guard let newest else {
                copies.cache.drop(location)
                return .absent
            }
            guard let session = SessionItems.session(from: newest) else { return .unreadable }
            // Where it was found is kept again only when it moved: a recheck that finds it where
            // it was keeps that no longer, so a search runs at least every key-cache-max however
            // often the copy is rechecked.
            if session.decision(at: copies.now()) == .handOut {
                keep(session, from: store, askedFor: endUserID, id: newest.id == lastSeen ? nil : newest.id)
            }
            return .present(session)
        }
    }

    private func read(_ authEnvironmentID: String, _ endUserID: String?) throws(StoreError) -> StoredSession {
        guard let newest = try items.search(SessionItems.filter(authEnvironmentID, endUserID: endUserID)).first
        else { return .absent }
        return SessionItems.session(from: newest).map { .present($0) } ?? .unreadable
    }

    /// Stores `session` as its end user's only session in the environment; other end users'
    /// sessions of the environment stay.
    public func saveSession(_ session: PortalSession) throws(StoreError) {
        _ = try save(session, ifNewest: { _ in true })
    }

    /// Stores `session` (the same session, its expiry slid) only if its end user's newest stored
    /// session still holds `token`, checked and written in one step of the store: a
    /// session another process or host removed (or replaced) meanwhile stays removed. True when
    /// it was written.
    @discardableResult
    public func slide(_ session: PortalSession, holding token: Secret) throws(StoreError) -> Bool {
        try save(session) { newest in newest.flatMap(SessionItems.session(from:))?.token == token }
    }

    private func save(
        _ session: PortalSession, ifNewest condition: (StoredItem?) -> Bool
    ) throws(StoreError) -> Bool {
        try changing { () throws(StoreError) -> Bool in
            let store = storeName()
            // Every copy of the environment from this store goes, whatever end user it was asked
            // for: the copy of "the environment's newest session" may now be another end user's,
            // and the item written may live elsewhere than the one found before (the next read
            // past the copy searches). When the store cannot be named, every store's copies go.
            let environment = session.authEnvironmentID
            copies?.cache.dropAll { name in
                store.map { Self.isCopy(name, of: environment, from: $0) } ?? Self.isCopy(name, of: environment)
            }
            let written = try items.replace(
                SessionItems.filter(session.authEnvironmentID, endUserID: session.endUserID), ifNewest: condition,
                where: { _ in true }, with: SessionItems.item(for: session))
            // What was just written is the environment's newest session: the copy of that.
            if written, let store { keep(session, from: store, askedFor: nil) }
            if written { observe?(session) }
            return written
        }
    }

    /// Removes the session of `endUserID` in the environment (with none named, every session of
    /// the environment); with `token`, only a session holding it (a newer one stored meanwhile
    /// survives). True when one was removed.
    @discardableResult
    public func deleteSession(
        authEnvironmentID: String, endUserID: String? = nil, holding token: Secret? = nil
    ) throws(StoreError) -> Bool {
        try changing { () throws(StoreError) -> Bool in
            // Every copy of the environment, whatever store it came from: this one's, however it
            // is named, and any other's, which a later read fills again from its own store.
            copies?.cache.dropAll { Self.isCopy($0, of: authEnvironmentID) }
            do throws(StoreError) {
                return try items.delete(SessionItems.filter(authEnvironmentID, endUserID: endUserID)) { item in
                    token.map { SessionItems.session(from: item)?.token == $0 } ?? true
                } > 0
            } catch  where error.outcomeUnknown {
                return try confirmDeleted(authEnvironmentID, endUserID, holding: token, after: error)
            }
        }
    }

    /// After a delete the store did not confirm (`outcomeUnknown`), looks again, still under the
    /// lock (docs/sessions.md, "Ending a session"): gone means this process's delete removed it,
    /// and it says so (so the hook runs); still there means the delete did not happen, which is
    /// an ordinary failure. When the store cannot answer that either, the error stands: the
    /// session may have been deleted, and the message says so.
    private func confirmDeleted(
        _ authEnvironmentID: String, _ endUserID: String?, holding token: Secret?, after failure: StoreError
    ) throws(StoreError) -> Bool {
        let stored: StoredSession
        do {
            stored = try read(authEnvironmentID, endUserID)
        } catch {
            throw failure
        }
        let stillThere: Bool
        switch stored {
        case .present(let session): stillThere = token.map { session.token == $0 } ?? true
        case .unreadable: stillThere = token == nil
        case .absent: stillThere = false
        }
        guard stillThere else { return true }
        throw StoreError(
            failure.kind, "the store did not confirm the deletion of the session in time, and still holds it",
            hint: "try again")
    }

    /// Keeps a copy of `session`, named for the end user it was asked for (nil: the environment's
    /// newest); for a store that is rechecked, for `recheckSeconds` at most, with where it was
    /// found (`id`) kept as long as a copy of another store would be.
    private func keep(_ session: PortalSession, from store: String, askedFor endUserID: String?, id: String? = nil) {
        guard let copies, let expiresAt = session.expiresAt else { return }
        let remaining = expiresAt - copies.now()
        guard remaining > 0 else { return }
        let maximum = Int(min(remaining, Int64(copies.maximumSeconds)))
        let name = Self.name(store: store, authEnvironmentID: session.authEnvironmentID, endUserID: endUserID)
        guard let recheckSeconds = copies.recheckSeconds else {
            copies.cache.store(
                session.payload, as: name, idleSeconds: min(copies.timeoutSeconds, maximum), maximumSeconds: maximum)
            return
        }
        copies.cache.store(session.payload, as: name, forSeconds: min(recheckSeconds, maximum))
        if let id {
            copies.cache.store(
                Secret(id),
                as: Self.locationName(store: store, authEnvironmentID: session.authEnvironmentID, endUserID: endUserID),
                idleSeconds: min(copies.timeoutSeconds, maximum), maximumSeconds: maximum)
        }
    }

    /// Drops every session copy, of every store and environment: after a migration, which changed
    /// both stores.
    public static func dropEveryCopy(from cache: any SecretCache) {
        cache.dropAll(withPrefix: namePrefix)
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
