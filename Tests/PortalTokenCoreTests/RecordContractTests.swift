import PortalTokenCore
import PortalTokenTestSupport
import Testing

@Suite("session and two-factor step contract in memory")
struct RecordStoreContractTests {
    @Test("the session and step codecs keep it over the in-memory item store", arguments: RecordContract.checks)
    func codecsOverItems(check: RecordContractCheck) throws {
        try check.run(on: InMemoryItemStore())
    }

    @Test("so do they through the session cache", arguments: RecordContract.checks)
    func cached(check: RecordContractCheck) throws {
        try check.run(on: InMemoryItemStore(), cache: InMemorySecretCache())
    }

    @Test(
        "the session codec lists the newest readable session of each environment, and a foreign payload is unreadable")
    func listsAndRefusesForeign() throws {
        let items = InMemoryItemStore()
        let sessions = Sessions(items)
        for (environment, token) in [("env-a", "a-old"), ("env-a", "a-new"), ("env-b", "b")] {
            try sessions.saveSession(
                PortalSession(
                    token: Secret(token), endUserID: "user", authEnvironmentID: environment,
                    issuedAt: 1_700_000_000, lastActivityAt: 1_700_000_000))
        }
        #expect(try SessionItems.all(in: items).map(\.token.text).sorted() == ["a-new", "b"])
        try items.storeUnreadableSession(authEnvironmentID: "env-c")
        #expect(try sessions.loadSession(authEnvironmentID: "env-c") == .unreadable)
        #expect(try SessionItems.all(in: items).count == 2)
    }
}
