import PortalTokenCore
import PortalTokenTestSupport
import Testing

@Suite("session and two-factor step contract in memory")
struct RecordStoreContractTests {
    @Test("the in-memory stores keep the contract", arguments: RecordStoreContract.checks)
    func inMemory(check: RecordStoreContractCheck) throws {
        try check.run(sessions: InMemorySessionStore(), steps: InMemoryTwoFactorStepStore())
    }

    @Test("the session cache and the locked step store keep it too", arguments: RecordStoreContract.checks)
    func cachedAndLocked(check: RecordStoreContractCheck) throws {
        let sessions = CachedSessionStore(cache: InMemorySecretCache(), lock: InProcessSessionLock(), scope: "contract",
                                          timeoutSeconds: 900, now: { 1_700_003_700 }, store: { InMemorySessionStore() })
        try check.run(sessions: sessions, steps: LockedTwoFactorStepStore(InMemoryTwoFactorStepStore(), lock: InProcessSessionLock()))
    }
}
