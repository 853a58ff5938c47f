import PortalTokenCore
import Testing

@Suite("the Vault store's settings")
struct VaultOptionsTests {
    func options(_ environment: [String: String], config: [String: String] = [:]) throws(SettingError)
        -> VaultOptions
    {
        try VaultOptions(settings: Settings(environment: environment, configFile: config), home: "/home/u")
    }

    @Test("without VAULT_ADDR the Vault store says how to set it")
    func missingAddress() {
        #expect(throws: SettingError.self) { try options([:]) }
        do {
            _ = try options([:])
        } catch {
            #expect(error.hint?.contains("VAULT_ADDR") == true)
        }
    }

    @Test("defaults: mount secret, prefix portal-token, the vault CLI's token file")
    func defaults() throws {
        let resolved = try options(["VAULT_ADDR": "https://vault.example:8200/"])
        #expect(resolved.address == "https://vault.example:8200")
        #expect(resolved.mount == "secret" && resolved.pathPrefix == "portal-token")
        #expect(resolved.token == .file("/home/u/.vault-token"))
        #expect(resolved.namespace == nil && resolved.http.caBundlePath == nil)
    }

    @Test("VAULT_TOKEN wins over a token file, which wins over AppRole")
    func tokenPrecedence() throws {
        let base = [
            "VAULT_ADDR": "https://v:8200", "PORTAL_TOKEN_VAULT_TOKEN_FILE": "/run/sink",
            "PORTAL_TOKEN_VAULT_ROLE_ID": "role", "PORTAL_TOKEN_VAULT_SECRET_ID_FILE": "/run/secret-id",
        ]
        #expect(try options(base.merging(["VAULT_TOKEN": "t"]) { $1 }).token == .environment("VAULT_TOKEN"))
        #expect(try options(base).token == .file("/run/sink"))
        var appRole = base
        appRole["PORTAL_TOKEN_VAULT_TOKEN_FILE"] = nil
        #expect(
            try options(appRole).token == .appRole(roleID: "role", secretIDFile: "/run/secret-id", mount: "approle"))
    }

    @Test("the config file cannot hold a Vault token")
    func noTokenInConfig() {
        #expect(throws: SettingError.self) {
            try Settings.parseConfigFile("vault-token = s.secret\n", path: "config")
        }
    }

    @Test("VAULT_CACERT, VAULT_NAMESPACE, the mount and prefix are taken; a path with '..' is refused")
    func layoutSettings() throws {
        let resolved = try options([
            "VAULT_ADDR": "https://v:8200", "VAULT_CACERT": "/etc/ca.pem", "VAULT_NAMESPACE": "team",
            "PORTAL_TOKEN_VAULT_MOUNT": "kv/fleet", "PORTAL_TOKEN_VAULT_PATH_PREFIX": "/ci/",
        ])
        #expect(resolved.http.caBundlePath == "/etc/ca.pem" && resolved.namespace == "team")
        #expect(resolved.mount == "kv/fleet" && resolved.pathPrefix == "ci")
        #expect(throws: SettingError.self) {
            try options(["VAULT_ADDR": "https://v:8200", "PORTAL_TOKEN_VAULT_PATH_PREFIX": "a/../b"])
        }
        #expect(throws: SettingError.self) { try options(["VAULT_ADDR": "ftp://v"]) }
    }
}
