import Basics
import PortalTokenCore
import PortalTokenTestSupport
import SecretServiceStore
import SessionBus
import Testing

/// The contracts against the real gnome-keyring that contrib/test.sh starts on a private
/// session bus. Without that bus these tests fail rather than skip: the keyring is the product.
extension InProcessKeyringTests {
    @Suite("item-store contract on the Secret Service", .serialized)
    struct SecretServiceItemStoreContractTests {
        @Test(arguments: ItemStoreContract.checks)
        func contract(check: ItemStoreContractCheck) throws {
            let open = { SecretServiceItemStore(timeoutMilliseconds: 15000, allowPrompt: false) }
            try check.run(on: ContractStore(open(), another: open))
        }
    }

    /// The same contract with reads over the session bus, as the binary reads (docs/storage.md, "Reading
    /// without libsecret"): libsecret writes, the session bus reads.
    @Suite("item-store contract on the Secret Service, read over the session bus", .serialized)
    struct SessionBusReadContractTests {
        static func open() -> SecretServiceItemStore {
            let bus = SessionBus.connect(timeoutMilliseconds: 15000)
            return SecretServiceItemStore(timeoutMilliseconds: 15000, allowPrompt: false, sessionBus: { bus })
        }

        @Test(arguments: ItemStoreContract.checks)
        func contract(check: ItemStoreContractCheck) throws {
            try check.run(on: ContractStore(Self.open(), another: Self.open))
        }

        @Test(arguments: CredentialContract.checks)
        func credentialContract(check: CredentialContractCheck) throws {
            try check.run(on: Self.open())
        }

        @Test(arguments: RecordContract.checks)
        func recordContract(check: RecordContractCheck) throws {
            try check.run(on: Self.open())
        }

        @Test("Unlock on gnome-keyring's unlocked default collection answers the prompt `/`: unlocked, nothing to run")
        func unlockAnswersNoPrompt() throws {
            let bus = try #require(SessionBus.connect(timeoutMilliseconds: 15000))
            #expect(try bus.unlockDefaultCollectionWithoutPrompt())
            #expect(try !bus.isDefaultCollectionLocked())
        }

        @Test(
            """
            the session bus answers an unlocked keyring itself: subset match, a provider's attributes ignored, the \
            sequence out of the attributes, another program's item placed by its Modified time, as libsecret's read does
            """)
        func readsWithoutLibsecret() throws {
            let bus = try #require(SessionBus.connect(timeoutMilliseconds: 15000))
            let store = SecretServiceItemStore(timeoutMilliseconds: 15000, allowPrompt: false)
            let schema = "io.portalhq.PortalToken.Read\(UInt32.random(in: 0...UInt32.max))"
            // Written by another program first, with an attribute as KeePassXC adds and no sequence.
            // KeePassXC makes a `Title` attribute the entry's title, which is its label: the same.
            let stored = try LibsecretClient.run(
                "/usr/bin/secret-tool", ["store", "--label=other", "xdg:schema", schema, "k", "1", "Title", "other"],
                stdin: "theirs", environment: ProcessRunner.environment(), timeout: 10)
            #expect(stored.exitCode == 0, "\(stored.stderr)")
            defer { _ = try? store.delete([[StoredItem.schemaAttribute: schema]]) }
            try store.replace(
                [[StoredItem.schemaAttribute: schema, "k": "2"]],
                with: StoredItem(
                    attributes: [StoredItem.schemaAttribute: schema, "k": "2"], label: "ours", secret: Secret("mine")))
            let found = try #require(try bus.unlockedSecretServiceItems([[StoredItem.schemaAttribute: schema]]))
            #expect(found.map(\.secret.text) == ["mine", "theirs"])
            #expect(found.map(\.label) == ["ours", "other"])
            #expect(found[0].attributes == [StoredItem.schemaAttribute: schema, "k": "2"])
            #expect(found[0].sequence > found[1].sequence)
            #expect(found[1].sequence == (found[1].modified ?? 0) * 1_000_000_000 && found[1].sequence > 0)
            // Both reads put the items in one order.
            let throughLibsecret = try store.search([[StoredItem.schemaAttribute: schema]])
            #expect(throughLibsecret.map(\.sequence) == found.map(\.sequence))
            #expect(throughLibsecret.map(\.secret.text) == ["mine", "theirs"])
            #expect(found[1].attributes == [StoredItem.schemaAttribute: schema, "k": "1"])
            let subset = try #require(
                try bus.unlockedSecretServiceItems([[StoredItem.schemaAttribute: schema, "k": "1"]]))
            #expect(subset.map(\.secret.text) == ["theirs"])
            #expect(try bus.unlockedSecretServiceItems([[StoredItem.schemaAttribute: schema, "k": "3"]]) == [])
        }
    }

    @Suite("git credential contract on the Secret Service", .serialized)
    struct SecretServiceCredentialContractTests {
        @Test(arguments: CredentialContract.checks)
        func contract(check: CredentialContractCheck) throws {
            try check.run(on: SecretServiceItemStore(timeoutMilliseconds: 15000, allowPrompt: false))
        }

        @Test("items land under org.git.Password with git-credential-libsecret's attributes and label")
        func itemLayout() throws {
            let store = CredentialItems(SecretServiceItemStore(timeoutMilliseconds: 15000, allowPrompt: false))
            let host = "layout-\(UInt32.random(in: 0...UInt32.max)).example"
            try store.store(
                Credential(
                    protocolName: "https", host: CredentialHost(server: host, port: 8443),
                    path: "team/repo.git", username: "alice", password: Secret("pw"),
                    passwordExpiresAt: 4_102_444_800, oauthRefreshToken: Secret("rt")))
            defer { _ = try? store.erase(CredentialQuery(host: CredentialHost(server: host, port: 8443))) }
            let search = try LibsecretClient.run(
                "/usr/bin/secret-tool",
                [
                    "search", "--all", "xdg:schema", "org.git.Password", "server", host,
                ], environment: ProcessRunner.environment(), timeout: 10)
            #expect(search.exitCode == 0)
            let lines = Set((search.stdout + search.stderr).split(separator: "\n").map { $0.trimmingWhitespace })
            #expect(lines.contains("label = Git: https:∕∕\(host):8443∕team∕repo.git"))
            #expect(lines.contains("attribute.protocol = https"))
            #expect(lines.contains("attribute.server = \(host)"))
            #expect(lines.contains("attribute.port = 8443"))
            #expect(lines.contains("attribute.object = team/repo.git"))
            #expect(lines.contains("attribute.user = alice"))
        }
    }
}

extension InProcessKeyringTests {
    @Suite("session and two-factor step contract on the Secret Service", .serialized)
    struct SecretServiceRecordContractTests {
        @Test(arguments: RecordContract.checks)
        func contract(check: RecordContractCheck) throws {
            try check.run(on: SecretServiceItemStore(timeoutMilliseconds: 15000, allowPrompt: false))
        }
    }
}
