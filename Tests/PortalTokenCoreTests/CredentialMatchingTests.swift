import PortalTokenCore
import PortalTokenTestSupport
import Testing

private let stored = Credential(
    protocolName: "https", host: CredentialHost(server: "example.com"),
    path: "repo.git", username: "alice", password: Secret("pw"))

@Suite("credential matching")
struct CredentialMatchingTests {
    @Test(
        "an absent field matches anything, a present one must be equal",
        arguments: [
            (CredentialQuery(), true),
            (CredentialQuery(protocolName: "https"), true),
            (CredentialQuery(protocolName: "http"), false),
            (CredentialQuery(host: CredentialHost(server: "example.com")), true),
            (CredentialQuery(host: CredentialHost(server: "example.com", port: 443)), false),
            (CredentialQuery(host: CredentialHost(server: "EXAMPLE.com")), false),
            (CredentialQuery(path: "repo.git"), true),
            (CredentialQuery(path: "other.git"), false),
            (CredentialQuery(username: "alice"), true),
            (CredentialQuery(username: ""), false),
            (CredentialQuery(username: "alice", password: Secret("pw")), true),
            (CredentialQuery(username: "alice", password: Secret("other")), false),
        ])
    func matching(query: CredentialQuery, expected: Bool) {
        #expect(query.matches(stored) == expected)
    }

    @Test("an erase pattern with no protocol, host, path or username is empty")
    func emptyPattern() {
        #expect(CredentialQuery().isEmptyPattern)
        #expect(CredentialQuery(password: Secret("x")).isEmptyPattern)
        #expect(!CredentialQuery(username: "").isEmptyPattern)
    }
}

@Suite("secret packing of git-credential-libsecret")
struct SecretPackingTests {
    @Test("packs the password first, then the expiry and refresh token lines")
    func packs() {
        let packed = SecretPacking.pack(
            password: Secret("pw"), passwordExpiresAt: 1700000000, oauthRefreshToken: Secret("rt"))
        #expect(packed.text == "pw\npassword_expiry_utc=1700000000\noauth_refresh_token=rt")
        #expect(SecretPacking.pack(password: Secret("pw"), passwordExpiresAt: nil, oauthRefreshToken: nil).text == "pw")
    }

    @Test("unpacks what it packs, and ignores lines it does not know")
    func unpacks() {
        let unpacked = SecretPacking.unpack(Secret("pw\nfuture_key=1\npassword_expiry_utc=12\noauth_refresh_token=rt"))
        #expect(unpacked.password == Secret("pw"))
        #expect(unpacked.passwordExpiresAt == 12)
        #expect(unpacked.oauthRefreshToken == Secret("rt"))
        #expect(SecretPacking.unpack(Secret("")).password.isEmpty)
    }
}

@Suite("secret type")
struct SecretTests {
    @Test("never renders its value")
    func redacts() {
        let secret = Secret("hunter2")
        #expect(String(describing: secret) == "<redacted>")
        #expect(String(reflecting: secret) == "<redacted>")
        #expect(!"\(Mirror(reflecting: secret).children.map { "\($0)" })".contains("hunter2"))
        #expect(!"\([secret])".contains("hunter2"))
    }
}

@Suite("credential helper operations")
struct CredentialHelperTests {
    private func request(_ text: String) throws -> CredentialRequest {
        try CredentialProtocol.parse(Array(text.utf8))
    }

    @Test("get never returns a credential whose password_expiry_utc has passed")
    func getSkipsExpired() throws {
        let store = CredentialItems(InMemoryItemStore())
        let helper = CredentialHelper(store: store, now: { 1000 })
        try helper.store(
            try request("protocol=https\nhost=a.example\nusername=old\npassword=p1\npassword_expiry_utc=2000\n"))
        try helper.store(
            try request("protocol=https\nhost=a.example\nusername=new\npassword=p2\npassword_expiry_utc=1000\n"))
        // The newest credential expires exactly now, so the older, live one is answered.
        #expect(try helper.get(try request("protocol=https\nhost=a.example\n"))?.username == "old")
        let later = CredentialHelper(store: store, now: { 2000 })
        #expect(try later.get(try request("protocol=https\nhost=a.example\n")) == nil)
    }

    @Test("get needs a protocol and a host or path")
    func getNeedsOrigin() throws {
        let store = CredentialItems(InMemoryItemStore())
        let helper = CredentialHelper(store: store, now: { 0 })
        try helper.store(try request("protocol=https\nhost=a.example\nusername=u\npassword=p\n"))
        #expect(try helper.get(try request("username=u\n")) == nil)
        #expect(try helper.get(try request("protocol=https\n")) == nil)
    }

    @Test("store ignores a request without username or password")
    func storeNeedsCredential() throws {
        let store = CredentialItems(InMemoryItemStore())
        let helper = CredentialHelper(store: store, now: { 0 })
        #expect(try helper.store(try request("protocol=https\nhost=a.example\npassword=p\n")) == false)
        #expect(try helper.store(try request("protocol=https\nhost=a.example\nusername=u\n")) == false)
        #expect(try store.lookup(CredentialQuery()).isEmpty)
    }

    @Test("erase with an empty pattern removes nothing")
    func eraseNeedsPattern() throws {
        let store = CredentialItems(InMemoryItemStore())
        let helper = CredentialHelper(store: store, now: { 0 })
        try helper.store(try request("protocol=https\nhost=a.example\nusername=u\npassword=p\n"))
        #expect(try helper.erase(try request("password=p\n")) == 0)
        #expect(try helper.erase(try request("")) == 0)
        #expect(try store.lookup(CredentialQuery()).count == 1)
    }

    @Test("eraseAnswer removes the credential get answers, and not the others its pattern matches")
    func eraseAnswerIsExact() throws {
        let store = CredentialItems(InMemoryItemStore())
        let helper = CredentialHelper(store: store, now: { 1000 })
        for text in [
            "host=a.example\nusername=old\npassword=p0\npassword_expiry_utc=500\n",
            "host=a.example\npath=repo.git\nusername=u\npassword=repo\n",
            "host=a.example\nusername=other\npassword=p\n",
            "host=a.example\nusername=u\npassword=p\n",
        ] {
            try helper.store(try request("protocol=https\n" + text))
        }
        let query = try request("protocol=https\nhost=a.example\n")
        #expect(try helper.get(query)?.username == "u")
        #expect(try helper.eraseAnswer(to: query) == 1)
        let left = try store.lookup(CredentialQuery()).map { "\($0.username)@\($0.path ?? "")" }.sorted()
        #expect(left == ["old@", "other@", "u@repo.git"])
        #expect(try helper.eraseAnswer(to: try request("protocol=https\nhost=b.example\n")) == 0)
    }
}

@Suite("the contracts on the in-memory item store")
struct InMemoryStoreContractTests {
    @Test("the in-memory store keeps the item-store contract", arguments: ItemStoreContract.checks)
    func items(check: ItemStoreContractCheck) throws {
        let store = InMemoryItemStore()
        try check.run(
            on: ContractStore(store, another: { store }) {
                store.failure.withLock { $0 = StoreError(.locked, "locked") }
                return (store, { store.failure.withLock { $0 = nil } })
            })
    }

    @Test("git credentials keep their contract over it", arguments: CredentialContract.checks)
    func credentials(check: CredentialContractCheck) throws {
        try check.run(on: InMemoryItemStore())
    }
}
