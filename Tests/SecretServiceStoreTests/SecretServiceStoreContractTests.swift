import Basics
import PortalTokenCore
import PortalTokenTestSupport
import SecretServiceStore
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
            let search = try ProcessRunner.run(
                "/usr/bin/secret-tool",
                [
                    "search", "--all", "xdg:schema", "org.git.Password", "server", host,
                ], environment: ProcessRunner.environment(), timeout: 10)
            #expect(search.exitCode == 0)
            let lines = Set((search.stdout + search.stderr).split(separator: "\n").map { $0.trimmingWhitespace })
            #expect(lines.contains("label = Git: https://\(host):8443/team/repo.git"))
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
