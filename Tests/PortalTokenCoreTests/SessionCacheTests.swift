import PortalTokenCore
import PortalTokenTestSupport
import Testing

private let issued: Int64 = 1_700_000_000

private func session(_ token: String = "token-1", lastActivityAt: Int64 = issued) -> PortalSession {
    PortalSession(
        token: Secret(token), endUserID: "user-1", authEnvironmentID: "env-1",
        issuedAt: issued, lastActivityAt: lastActivityAt)
}

private final class Fixture {
    let items = InMemoryItemStore()
    var inner: Sessions { Sessions(items) }
    let cache = InMemorySecretCache()
    let clock = Locked<Int64>(issued)
    /// How often the store behind the cache was read.
    var storeReads: Int { items.searches.withLock { $0 } }

    /// What the lock check says before a copy is served: nil when unlocked.
    let lockCheck = Locked<StoreError?>(nil)
    let lockChecks = Locked(0)

    func cached(timeoutSeconds: Int = 900, checksLock: Bool = false) -> Sessions {
        let clock = self.clock, lockCheck = self.lockCheck, checks = self.lockChecks
        return Sessions(
            items,
            cache: Sessions.Cache(
                cache, lock: InProcessSessionLock(), store: "test", timeoutSeconds: timeoutSeconds,
                now: { clock.value },
                confirmUnlocked: checksLock
                    ? { () throws(StoreError) in
                        checks.update { $0 += 1 }
                        if let error = lockCheck.value { throw error }
                    } : nil))
    }
}

@Suite("session cache")
struct SessionCacheTests {
    @Test("a cached session is served without reading the store")
    func hitReadsNoStore() throws {
        let fixture = Fixture()
        try fixture.cached().saveSession(session())
        let reads = fixture.storeReads
        let fresh = fixture.cached()
        #expect(try fresh.loadSession(authEnvironmentID: "env-1") == .present(session()))
        #expect(fixture.storeReads == reads, "a hit read the store")
    }

    @Test("a copy from a store with a lock is served only once the check says unlocked")
    func hitChecksTheLock() throws {
        let fixture = Fixture()
        try fixture.cached(checksLock: true).saveSession(session())
        #expect(try fixture.cached(checksLock: true).loadSession(authEnvironmentID: "env-1") == .present(session()))
        #expect(fixture.lockChecks.value == 1)
        #expect(fixture.storeReads == 0, "an unlocked hit read the store")
    }

    @Test("a locked store drops every cached session and the hit is an error, never a stale answer")
    func lockedDropsTheCache() throws {
        let fixture = Fixture()
        try fixture.cached(checksLock: true).saveSession(session())
        fixture.lockCheck.update { $0 = StoreError(.locked, "the default keyring is locked") }
        #expect(throws: StoreError(.locked, "the default keyring is locked")) {
            try fixture.cached(checksLock: true).loadSession(authEnvironmentID: "env-1")
        }
        #expect(fixture.cache.names.isEmpty, "the cached session survived the lock")
        // Unlocked again: the store is read, and the copy kept anew.
        fixture.lockCheck.update { $0 = nil }
        #expect(try fixture.cached(checksLock: true).loadSession(authEnvironmentID: "env-1") == .present(session()))
        #expect(fixture.cache.names.count == 1)
    }

    @Test("a locked store drops its own copies and no other store's")
    func lockedDropsOnlyItsFamily() throws {
        let fixture = Fixture()
        try fixture.cached(checksLock: true).saveSession(session())
        let otherFamily = Sessions(
            InMemoryItemStore(),
            cache: Sessions.Cache(
                fixture.cache, lock: InProcessSessionLock(), store: "another bus", timeoutSeconds: 900,
                now: { issued }))
        try otherFamily.saveSession(session("token-2"))
        #expect(fixture.cache.names.count == 2)
        fixture.lockCheck.update { $0 = StoreError(.locked, "the default keyring is locked") }
        #expect(throws: StoreError(.locked, "the default keyring is locked")) {
            try fixture.cached(checksLock: true).loadSession(authEnvironmentID: "env-1")
        }
        #expect(fixture.cache.names.count == 1, "the other store's copy went with the locked one")
        #expect(try otherFamily.loadSession(authEnvironmentID: "env-1") == .present(session("token-2")))
    }

    @Test("a check that cannot answer (a stalled keyring) is an error, and the copy is kept")
    func stalledCheckKeepsTheCopy() throws {
        let fixture = Fixture()
        try fixture.cached(checksLock: true).saveSession(session())
        fixture.lockCheck.update { $0 = StoreError(.timedOut, "the Secret Service did not answer within 800 ms") }
        #expect(throws: StoreError(.timedOut, "the Secret Service did not answer within 800 ms")) {
            try fixture.cached(checksLock: true).loadSession(authEnvironmentID: "env-1")
        }
        #expect(fixture.cache.names.count == 1)
    }

    @Test("a miss reads the store and keeps a copy until expiresAt, at most the timeout")
    func missFillsCopy() throws {
        let fixture = Fixture()
        try fixture.inner.saveSession(session())
        fixture.clock.update { $0 += 23 * 3600 + 3000 }
        #expect(try fixture.cached().loadSession(authEnvironmentID: "env-1") == .present(session()))
        let name = try #require(fixture.cache.names.first)
        #expect(fixture.cache.lifetime(of: name) == 600)
        let longLived = Fixture()
        try longLived.inner.saveSession(session())
        _ = try longLived.cached(timeoutSeconds: 900).loadSession(authEnvironmentID: "env-1")
        #expect(longLived.cache.lifetime(of: longLived.cache.names[0]) == 900)
    }

    @Test("a copy lives the timeout after its last use, and the cap (or expiresAt, if sooner) at most")
    func idleAndCap() throws {
        let fixture = Fixture()
        let capped = Sessions(
            fixture.items,
            cache: Sessions.Cache(
                fixture.cache, lock: InProcessSessionLock(), store: "test", timeoutSeconds: 900,
                maximumSeconds: 7200, now: { fixture.clock.value }))
        try capped.saveSession(session())
        let name = try #require(fixture.cache.names.first)
        #expect(fixture.cache.lifetime(of: name) == 900)
        #expect(fixture.cache.maximumLifetime(of: name) == 7200)
        // 600 s before expiresAt, that bounds both.
        fixture.clock.update { $0 += 24 * 3600 - 600 }
        try capped.saveSession(session())
        #expect(fixture.cache.lifetime(of: name) == 600)
        #expect(fixture.cache.maximumLifetime(of: name) == 600)
        // A cap under the timeout bounds the idle time too; a cap of 0 turns the cache off.
        let tight = Fixture()
        try Sessions(
            tight.items,
            cache: Sessions.Cache(
                tight.cache, lock: InProcessSessionLock(), store: "test", timeoutSeconds: 900, maximumSeconds: 60,
                now: { issued })
        ).saveSession(session())
        #expect(tight.cache.lifetime(of: tight.cache.names[0]) == 60)
        let off = Fixture()
        try Sessions(
            off.items,
            cache: Sessions.Cache(
                off.cache, lock: InProcessSessionLock(), store: "test", timeoutSeconds: 900, maximumSeconds: 0,
                now: { issued })
        ).saveSession(session())
        #expect(off.cache.names.isEmpty)
    }

    @Test("past the idle window the copy is not served: the store decides")
    func staleCopyNotServed() throws {
        let fixture = Fixture()
        try fixture.cached().saveSession(session())
        _ = try fixture.inner.deleteSession(authEnvironmentID: "env-1")
        fixture.clock.update { $0 += 25 * 3600 }
        #expect(try fixture.cached().loadSession(authEnvironmentID: "env-1") == .absent)
    }

    @Test("delete drops the copy, and save replaces it")
    func changesReachTheCopy() throws {
        let fixture = Fixture()
        let store = fixture.cached()
        try store.saveSession(session("old"))
        try store.saveSession(session("new"))
        #expect(try fixture.cached().loadSession(authEnvironmentID: "env-1") == .present(session("new")))
        #expect(try store.deleteSession(authEnvironmentID: "env-1"))
        #expect(fixture.cache.names.isEmpty)
        #expect(try fixture.cached().loadSession(authEnvironmentID: "env-1") == .absent)
    }

    @Test("a delete drops the environment's copy from every store, and no other environment's")
    func deleteDropsEveryStoresCopy() throws {
        let fixture = Fixture()
        try fixture.cached().saveSession(session())
        let other = Sessions(
            InMemoryItemStore(),
            cache: Sessions.Cache(
                fixture.cache, lock: InProcessSessionLock(), store: "another store", timeoutSeconds: 900,
                now: { issued }))
        try other.saveSession(session("token-2"))
        var otherEnvironment = session("token-3")
        otherEnvironment.authEnvironmentID = "env-2"
        try fixture.cached().saveSession(otherEnvironment)
        #expect(fixture.cache.names.count == 3)
        #expect(try fixture.cached().deleteSession(authEnvironmentID: "env-1"))
        #expect(fixture.cache.names.count == 1, "a copy of the deleted environment's session survived")
        #expect(try fixture.cached().loadSession(authEnvironmentID: "env-2") == .present(otherEnvironment))
    }

    @Test("a store that cannot be named is used without copies, and its changes drop the environment's copies")
    func unnamedStoreKeepsNoCopy() throws {
        let fixture = Fixture()
        try fixture.cached().saveSession(session("old"))
        #expect(fixture.cache.names.count == 1)
        let unnamed = Sessions(
            fixture.items,
            cache: Sessions.Cache(
                fixture.cache, lock: InProcessSessionLock(),
                store: { () throws(StoreError) -> String in throw StoreError(.timedOut, "the bus did not answer") },
                timeoutSeconds: 900, now: { issued }))
        try unnamed.saveSession(session("new"))
        #expect(fixture.cache.names.isEmpty, "a copy of the replaced session survived")
        #expect(try unnamed.loadSession(authEnvironmentID: "env-1") == .present(session("new")))
        #expect(fixture.cache.names.isEmpty)
        #expect(try fixture.cached().loadSession(authEnvironmentID: "env-1") == .present(session("new")))
    }

    @Test("a fill never keeps a session that was removed before the lock was taken")
    func fillRereadsUnderLock() throws {
        let fixture = Fixture()
        try fixture.inner.saveSession(session())
        // A store whose second read (the one under the lock) finds the session gone.
        final class Vanishing: ForwardingItemStore {
            var reads = 0
            override func search(_ filters: [ItemAttributes]) throws(StoreError) -> [StoredItem] {
                reads += 1
                if reads == 2 { try inner.delete(filters) }
                return try inner.search(filters)
            }
        }
        let store = Sessions(
            Vanishing(fixture.items),
            cache: Sessions.Cache(
                fixture.cache, lock: InProcessSessionLock(), store: "test",
                timeoutSeconds: 900, now: { issued }))
        _ = try store.loadSession(authEnvironmentID: "env-1")
        #expect(fixture.cache.names.isEmpty)
    }

    @Test("a timeout of 0 keeps no copy")
    func disabled() throws {
        let fixture = Fixture()
        try fixture.cached(timeoutSeconds: 0).saveSession(session())
        #expect(fixture.cache.names.isEmpty)
        #expect(try fixture.cached(timeoutSeconds: 0).loadSession(authEnvironmentID: "env-1") == .present(session()))
    }

    @Test("different stores never share a copy")
    func scopes() throws {
        let fixture = Fixture()
        try fixture.cached().saveSession(session())
        let other = Sessions(
            InMemoryItemStore(),
            cache: Sessions.Cache(
                fixture.cache, lock: InProcessSessionLock(), store: "other",
                timeoutSeconds: 900, now: { issued }))
        #expect(try other.loadSession(authEnvironmentID: "env-1") == .absent)
    }
}

/// A store other hosts change, as the Vault store is: counts its searches and its reads of the
/// item last seen.
final class RecheckedStore: ForwardingItemStore, @unchecked Sendable {
    let searches = Locked(0)
    let rereads = Locked<[String]>([])

    override func search(_ filters: [ItemAttributes]) throws(StoreError) -> [StoredItem] {
        searches.update { $0 += 1 }
        return try inner.search(filters)
    }

    override func newest(_ filters: [ItemAttributes], lastSeen id: String) throws(StoreError) -> StoredItem? {
        rereads.update { $0.append(id) }
        if let same = try inner.search(filters).first(where: { $0.id == id }) { return same }
        return try search(filters).first
    }
}

@Suite("session cache of a store other hosts change")
struct RecheckedSessionCacheTests {
    let items = InMemoryItemStore()
    let cache = InMemorySecretCache()

    func sessions(_ store: RecheckedStore, recheckSeconds: Int = 5) -> Sessions {
        Sessions(
            store,
            cache: Sessions.Cache(
                cache, lock: InProcessSessionLock(), store: { () throws(StoreError) in "vault-test" },
                timeoutSeconds: 900, maximumSeconds: 7200, now: { issued }, recheckSeconds: recheckSeconds))
    }

    /// What the kernel does once the copy's time is up: the copy goes, where it lived stays.
    func copyExpires() {
        cache.dropAll { !$0.contains(":at:") }
    }

    @Test("a copy lives recheck-seconds; where its session lives is kept as long as the key cache")
    func lifetimes() throws {
        try Sessions(items).saveSession(session())
        let store = RecheckedStore(items)
        #expect(try sessions(store).loadSession(authEnvironmentID: "env-1") == .present(session()))
        #expect(store.searches.value == 1)
        let copy = try #require(cache.names.first { !$0.contains(":at:") })
        let location = try #require(cache.names.first { $0.contains(":at:") })
        #expect(cache.lifetime(of: copy) == 5 && cache.maximumLifetime(of: copy) == 5)
        #expect(cache.lifetime(of: location) == 900 && cache.maximumLifetime(of: location) == 7200)
        // Everything kept is under the prefix `portal-token lock` drops.
        #expect(cache.names.allSatisfy { $0.hasPrefix(SecretCacheNames.prefix) })
        // Within its time the copy answers, and the store is not asked.
        #expect(try sessions(store).loadSession(authEnvironmentID: "env-1") == .present(session()))
        #expect(store.searches.value == 1 && store.rereads.value.isEmpty)
    }

    @Test("past the copy, the item last seen is read again instead of a search, and a fresh copy kept")
    func pastTheCopy() throws {
        try Sessions(items).saveSession(session())
        let store = RecheckedStore(items)
        _ = try sessions(store).loadSession(authEnvironmentID: "env-1")
        let id = try #require(try items.search([[StoredItem.schemaAttribute: SessionItems.schema]]).first?.id)
        copyExpires()
        // Another host slid the session meanwhile: the read finds what is there now.
        try Sessions(items).saveSession(session(lastActivityAt: issued + 60))
        let newID = try #require(try items.search([[StoredItem.schemaAttribute: SessionItems.schema]]).first?.id)
        #expect(
            try sessions(store).loadSession(authEnvironmentID: "env-1")
                == .present(session(lastActivityAt: issued + 60)))
        #expect(store.rereads.value == [id])
        if newID == id { #expect(store.searches.value == 1) }
        #expect(try sessions(store).loadSession(authEnvironmentID: "env-1") != .absent)
        #expect(store.rereads.value.count == 1, "the fresh copy was not kept")
    }

    @Test("past the copy, a session another host removed is absent, and nothing is kept")
    func removedElsewhere() throws {
        try Sessions(items).saveSession(session())
        let store = RecheckedStore(items)
        _ = try sessions(store).loadSession(authEnvironmentID: "env-1")
        copyExpires()
        try Sessions(items).deleteSession(authEnvironmentID: "env-1")
        #expect(try sessions(store).loadSession(authEnvironmentID: "env-1") == .absent)
        #expect(cache.names.isEmpty, "\(cache.names)")
    }

    @Test("ending the session on this host drops the copy and where it lived")
    func endedHere() throws {
        try Sessions(items).saveSession(session())
        let store = RecheckedStore(items)
        _ = try sessions(store).loadSession(authEnvironmentID: "env-1")
        #expect(cache.names.count == 2)
        #expect(try sessions(store).deleteSession(authEnvironmentID: "env-1", holding: Secret("token-1")))
        #expect(cache.names.isEmpty, "\(cache.names)")
    }

    @Test("recheck-seconds at 0 keeps nothing")
    func off() throws {
        try Sessions(items).saveSession(session())
        let store = RecheckedStore(items)
        _ = try sessions(store, recheckSeconds: 0).loadSession(authEnvironmentID: "env-1")
        _ = try sessions(store, recheckSeconds: 0).loadSession(authEnvironmentID: "env-1")
        #expect(cache.names.isEmpty && store.searches.value == 2)
    }
}
