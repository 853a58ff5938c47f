import PortalTokenCore
import PortalTokenTestSupport
import Testing

private let issued: Int64 = 1_700_000_000

private func session(_ token: String = "token-1", lastActivityAt: Int64 = issued) -> PortalSession {
    PortalSession(token: Secret(token), endUserID: "user-1", authEnvironmentID: "env-1",
                  issuedAt: issued, lastActivityAt: lastActivityAt)
}

private final class Fixture {
    let inner = InMemorySessionStore()
    let cache = InMemorySecretCache()
    let clock = Locked<Int64>(issued)
    let storesBuilt = Locked(0)

    func cached(timeoutSeconds: Int = 900) -> CachedSessionStore {
        let inner = self.inner, clock = self.clock, built = self.storesBuilt
        return CachedSessionStore(cache: cache, lock: InProcessSessionLock(), scope: "test", timeoutSeconds: timeoutSeconds,
                                  now: { clock.value }, store: { built.update { $0 += 1 }; return inner })
    }
}

@Suite("session cache")
struct CachedSessionStoreTests {
    @Test("a cached session is served without opening the store")
    func hitOpensNoStore() throws {
        let fixture = Fixture()
        try fixture.cached().saveSession(session())
        let fresh = fixture.cached()
        #expect(try fresh.loadSession(authEnvironmentID: "env-1") == .present(session()))
        #expect(fixture.storesBuilt.value == 1, "only the saving process opened the store")
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

    @Test("past the idle window the copy is not served: the store decides")
    func staleCopyNotServed() throws {
        let fixture = Fixture()
        try fixture.cached().saveSession(session())
        try fixture.inner.deleteSession(authEnvironmentID: "env-1")
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

    @Test("a fill never keeps a session that was removed before the lock was taken")
    func fillRereadsUnderLock() throws {
        let fixture = Fixture()
        try fixture.inner.saveSession(session())
        // A store whose second read (the one under the lock) finds the session gone.
        let reads = Locked(0)
        let inner = fixture.inner
        final class Vanishing: SessionStore {
            let inner: InMemorySessionStore
            let reads: Locked<Int>
            init(_ inner: InMemorySessionStore, _ reads: Locked<Int>) { self.inner = inner; self.reads = reads }
            func loadSession(authEnvironmentID: String) throws(StoreError) -> StoredSession {
                if reads.update({ $0 += 1; return $0 }) == 2 { _ = try inner.deleteSession(authEnvironmentID: authEnvironmentID) }
                return try inner.loadSession(authEnvironmentID: authEnvironmentID)
            }
            func saveSession(_ session: PortalSession) throws(StoreError) { try inner.saveSession(session) }
            func deleteSession(authEnvironmentID: String) throws(StoreError) -> Bool { try inner.deleteSession(authEnvironmentID: authEnvironmentID) }
        }
        let store = CachedSessionStore(cache: fixture.cache, lock: InProcessSessionLock(), scope: "test", timeoutSeconds: 900,
                                       now: { issued }, store: { Vanishing(inner, reads) })
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

    @Test("stores behind different scopes never share a copy")
    func scopes() throws {
        let fixture = Fixture()
        try fixture.cached().saveSession(session())
        let other = CachedSessionStore(cache: fixture.cache, lock: InProcessSessionLock(), scope: "other", timeoutSeconds: 900,
                                       now: { issued }, store: { InMemorySessionStore() })
        #expect(try other.loadSession(authEnvironmentID: "env-1") == .absent)
    }
}
