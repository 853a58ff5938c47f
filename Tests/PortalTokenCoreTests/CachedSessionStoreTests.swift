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
    let inner = InMemorySessionStore()
    let cache = InMemorySecretCache()
    let clock = Locked<Int64>(issued)
    let storesBuilt = Locked(0)

    /// What the lock check says before a copy is served: nil when unlocked.
    let lockCheck = Locked<StoreError?>(nil)
    let lockChecks = Locked(0)

    func cached(timeoutSeconds: Int = 900, checksLock: Bool = false) -> CachedSessionStore {
        let inner = self.inner, clock = self.clock, built = self.storesBuilt, lockCheck = self.lockCheck,
            checks = self.lockChecks
        return CachedSessionStore(
            cache: cache, lock: InProcessSessionLock(), scope: "test", timeoutSeconds: timeoutSeconds,
            now: { clock.value },
            confirmUnlocked: checksLock
                ? { () throws(StoreError) in
                    checks.update { $0 += 1 }
                    if let error = lockCheck.value { throw error }
                } : nil,
            store: {
                built.update { $0 += 1 }; return inner
            })
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

    @Test("a copy from a store with a lock is served only once the check says unlocked")
    func hitChecksTheLock() throws {
        let fixture = Fixture()
        try fixture.cached(checksLock: true).saveSession(session())
        #expect(try fixture.cached(checksLock: true).loadSession(authEnvironmentID: "env-1") == .present(session()))
        #expect(fixture.lockChecks.value == 1)
        #expect(fixture.storesBuilt.value == 1, "an unlocked hit opened the store")
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

    @Test("a locked store drops its own family's copies and no other's")
    func lockedDropsOnlyItsFamily() throws {
        let fixture = Fixture()
        try fixture.cached(checksLock: true).saveSession(session())
        let otherFamily = CachedSessionStore(
            cache: fixture.cache, lock: InProcessSessionLock(), scope: "test",
            family: "another bus", timeoutSeconds: 900, now: { issued },
            store: { InMemorySessionStore() })
        try otherFamily.saveSession(session("token-2"))
        #expect(fixture.cache.names.count == 2)
        fixture.lockCheck.update { $0 = StoreError(.locked, "the default keyring is locked") }
        #expect(throws: StoreError(.locked, "the default keyring is locked")) {
            try fixture.cached(checksLock: true).loadSession(authEnvironmentID: "env-1")
        }
        #expect(fixture.cache.names.count == 1, "the other family's copy went with the locked one")
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
                if reads.update({
                    $0 += 1; return $0
                }) == 2 {
                    _ = try inner.deleteSession(authEnvironmentID: authEnvironmentID)
                }
                return try inner.loadSession(authEnvironmentID: authEnvironmentID)
            }
            func saveSession(_ session: PortalSession) throws(StoreError) { try inner.saveSession(session) }
            func deleteSession(authEnvironmentID: String) throws(StoreError) -> Bool {
                try inner.deleteSession(authEnvironmentID: authEnvironmentID)
            }
        }
        let store = CachedSessionStore(
            cache: fixture.cache, lock: InProcessSessionLock(), scope: "test", timeoutSeconds: 900,
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
        let other = CachedSessionStore(
            cache: fixture.cache, lock: InProcessSessionLock(), scope: "other", timeoutSeconds: 900,
            now: { issued }, store: { InMemorySessionStore() })
        #expect(try other.loadSession(authEnvironmentID: "env-1") == .absent)
    }
}
