import PortalTokenCore
import Testing

@Suite("Vault addresses over http://")
struct VaultCleartextOptionsTests {
    static func options(_ environment: [String: String]) throws(SettingError) -> VaultOptions {
        var environment = environment
        environment["VAULT_TOKEN"] = "t"
        return try VaultOptions(settings: Settings(environment: environment), home: nil)
    }

    @Test("http:// off this host is refused unless vault-allow-http; loopback as written is not")
    func cleartext() throws {
        for address in [
            "http://vault.example:8200", "HTTP://vault.example", "http://10.0.0.5:8200", "http://127.0.0.1.nip.io",
            "http://vault.localhost", "http://128.0.0.1", "http://127.0.0.256", "http://127.1",
        ] {
            do {
                _ = try Self.options(["VAULT_ADDR": address])
                Issue.record("accepted \(address)")
            } catch {
                #expect(error.message.hasPrefix("VAULT_ADDR is a cleartext http:// address"), "\(error.message)")
                #expect(!error.message.contains(address))
                #expect(error.hint?.contains("PORTAL_TOKEN_VAULT_ALLOW_HTTP") == true)
            }
        }
        for address in ["http://127.0.0.1:8200", "http://127.9.8.7", "http://localhost:8200", "http://[::1]:8200"] {
            #expect(try Self.options(["VAULT_ADDR": address]).address.hasPrefix("http://"), "\(address)")
        }
        let allowed = try Self.options(["VAULT_ADDR": "http://vault.example", "PORTAL_TOKEN_VAULT_ALLOW_HTTP": "true"])
        #expect(allowed.allowsRemoteHTTP)
        #expect(!allowed.refusesCleartext(to: "http://vault-2.example"))
        let loopback = try Self.options(["VAULT_ADDR": "http://127.0.0.1:8200"])
        #expect(loopback.refusesCleartext(to: "http://vault-2.example:8200"))
        #expect(!loopback.refusesCleartext(to: "https://vault-2.example:8200"))
        #expect(throws: SettingError.self) {
            try Self.options(["VAULT_ADDR": "https://v", "PORTAL_TOKEN_VAULT_ALLOW_HTTP": "maybe"])
        }
    }
}
