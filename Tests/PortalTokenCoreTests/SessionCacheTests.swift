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
