import PortalTokenCore
import PortalTokenTestSupport
import Testing

@Suite("session and two-factor step contract in memory")
struct RecordStoreContractTests {
    @Test("the in-memory stores keep the contract", arguments: RecordStoreContract.checks)
    func inMemory(check: RecordStoreContractCheck) throws {
        try check.run(sessions: InMemorySessionStore(), steps: InMemoryTwoFactorStepStore())
    }

    @Test("the session and step codecs keep it over the in-memory item store", arguments: RecordStoreContract.checks)
    func codecsOverItems(check: RecordStoreContractCheck) throws {
        let items = InMemoryItemStore()
        try check.run(sessions: ItemSessionStore(items), steps: ItemTwoFactorStepStore(items))
    }

    @Test(
        "the session codec lists the newest readable session of each environment, and a foreign payload is unreadable")
    func listsAndRefusesForeign() throws {
        let items = InMemoryItemStore()
        let sessions = ItemSessionStore(items)
        for (environment, token) in [("env-a", "a-old"), ("env-a", "a-new"), ("env-b", "b")] {
            try sessions.saveSession(
                PortalSession(
                    token: Secret(token), endUserID: "user", authEnvironmentID: environment,
                    issuedAt: 1_700_000_000, lastActivityAt: 1_700_000_000))
        }
        #expect(try sessions.allSessions().map(\.token.text).sorted() == ["a-new", "b"])
        try items.replace(
            matching: ["auth-environment-id": "env-c"],
            with: StoredItem(
                schema: ItemSessionStore.schema, attributes: ["auth-environment-id": "env-c", "end-user-id": "user"],
                label: "foreign", secret: Secret("not a session")))
        #expect(try sessions.loadSession(authEnvironmentID: "env-c") == .unreadable)
        #expect(try sessions.allSessions().count == 2)
    }

    @Test("the session cache and the locked step store keep it too", arguments: RecordStoreContract.checks)
    func cachedAndLocked(check: RecordStoreContractCheck) throws {
        let sessions = CachedSessionStore(
            cache: InMemorySecretCache(), lock: InProcessSessionLock(), scope: "contract",
            timeoutSeconds: 900, now: { 1_700_003_700 }, store: { InMemorySessionStore() })
        try check.run(
            sessions: sessions,
            steps: LockedTwoFactorStepStore(InMemoryTwoFactorStepStore(), lock: InProcessSessionLock()))
    }
}
