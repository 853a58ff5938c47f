import PortalTokenCore
import PortalTokenTestSupport
import Testing

@Suite("backend choice")
struct BackendChoiceTests {
    private func unreachable() throws(StoreError) { Issue.record("a forced backend probed the Secret Service") }

    @Test("auto uses the Secret Service when it answers, and consults the file too")
    func autoKeyring() throws {
        let choice = try BackendChoice.decide(.auto, requestedBy: "default") { () throws(StoreError) in }
        #expect(choice == BackendChoice(backend: .secretService, reason: "the Secret Service answered", consultsFile: true))
        #expect(choice.fallbackNotice == nil)
    }

    @Test("auto falls back to the file when there is no bus or provider, or it does not answer in time",
          arguments: [StoreError.Kind.unavailable, .timedOut])
    func autoFallsBack(kind: StoreError.Kind) throws {
        let choice = try BackendChoice.decide(.auto, requestedBy: "default") { () throws(StoreError) in
            throw StoreError(kind, "no D-Bus session bus")
        }
        #expect(choice.backend == .file)
        #expect(choice.isFallback)
        #expect(choice.reason == "no D-Bus session bus")
        #expect(choice.fallbackNotice == "using the encrypted file store: no D-Bus session bus")
    }

    @Test("a locked or failing keyring in auto is an error, never a switch", arguments: [StoreError.Kind.locked, .failed])
    func lockedIsNoSwitch(kind: StoreError.Kind) {
        #expect(throws: StoreError(kind, "keyring 'Login' is locked")) {
            try BackendChoice.decide(.auto, requestedBy: "default") { () throws(StoreError) in
                throw StoreError(kind, "keyring 'Login' is locked")
            }
        }
    }

    @Test("a forced backend is used without probing, and says who chose it")
    func forced() throws {
        let file = try BackendChoice.decide(.file, requestedBy: "--backend", probe: unreachable)
        #expect(file == BackendChoice(backend: .file, reason: "chosen by --backend"))
        #expect(file.fallbackNotice == nil)
        let keyring = try BackendChoice.decide(.secretService, requestedBy: "PORTAL_TOKEN_BACKEND", probe: unreachable)
        #expect(keyring == BackendChoice(backend: .secretService, reason: "chosen by PORTAL_TOKEN_BACKEND"))
    }
}

@Suite("keyring first, then the file")
struct CombinedCredentialStoreTests {
    private func credential(_ user: String, expiresAt: Int64? = nil) -> Credential {
        Credential(protocolName: "https", host: CredentialHost(server: "example.com"), username: user,
                   password: Secret("pw-\(user)"), passwordExpiresAt: expiresAt)
    }

    private let query = CredentialQuery(protocolName: "https", host: CredentialHost(server: "example.com"))

    @Test("the combined store keeps the store contract", arguments: CredentialStoreContract.checks)
    func contract(check: CredentialStoreContractCheck) throws {
        try check.run(on: CombinedCredentialStore(primary: InMemoryCredentialStore(), secondary: InMemoryCredentialStore(),
                                                  now: { 1_000 }))
    }

    @Test("a keyring hit is answered without opening the file")
    func keyringHit() throws {
        let keyring = InMemoryCredentialStore(), file = FailingStore()
        try keyring.store(credential("alice"))
        let combined = CombinedCredentialStore(primary: keyring, secondary: file, now: { 1_000 })
        #expect(try combined.lookup(query).map(\.username) == ["alice"])
    }

    @Test("the file answers what the keyring does not have, or has only expired")
    func fileFallback() throws {
        let keyring = InMemoryCredentialStore(), file = InMemoryCredentialStore()
        try file.store(credential("from-file"))
        let combined = CombinedCredentialStore(primary: keyring, secondary: file, now: { 1_000 })
        #expect(try combined.lookup(query).map(\.username) == ["from-file"])
        try keyring.store(credential("expired", expiresAt: 999))
        #expect(try combined.lookup(query).map(\.username) == ["expired", "from-file"])
    }

    @Test("store goes to the keyring only; erase removes from both")
    func storeAndErase() throws {
        let keyring = InMemoryCredentialStore(), file = InMemoryCredentialStore()
        try file.store(credential("alice"))
        let combined = CombinedCredentialStore(primary: keyring, secondary: file, now: { 1_000 })
        try combined.store(credential("bob"))
        #expect(try file.lookup(query).map(\.username) == ["alice"])
        #expect(try keyring.lookup(query).map(\.username) == ["bob"])
        #expect(try combined.erase(query) == 2)
        #expect(try combined.lookup(query).isEmpty)
    }
}

private struct FailingStore: CredentialStore {
    func lookup(_ query: CredentialQuery) throws(StoreError) -> [Credential] { throw StoreError(.locked, "opened") }
    func store(_ credential: Credential) throws(StoreError) { throw StoreError(.locked, "opened") }
    func erase(_ query: CredentialQuery) throws(StoreError) -> Int { throw StoreError(.locked, "opened") }
}
