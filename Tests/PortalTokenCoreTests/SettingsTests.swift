import Basics
import PortalTokenCore
import Testing

@Suite("settings")
struct SettingsTests {
    @Test("a flag beats the environment, which beats the config file")
    func precedence() {
        var settings = Settings(
            flags: ["backend": "file"], environment: ["PORTAL_TOKEN_BACKEND": "secret-service"],
            configFile: ["backend": "auto"])
        #expect(settings.value(.backend) == "file")
        settings.flags = [:]
        #expect(settings.value(.backend) == "secret-service")
        settings.environment = ["PORTAL_TOKEN_BACKEND": ""]
        #expect(settings.value(.backend) == "auto")
    }

    @Test("the config file takes key = value lines and comments")
    func parsesConfigFile() throws {
        let values = try Settings.parseConfigFile(
            "# comment\n\nbackend = file\n  keyring-timeout-ms=500  \n", path: "c")
        #expect(values == ["backend": "file", "keyring-timeout-ms": "500"])
    }

    @Test("an unknown key or a line without '=' is an error naming the line")
    func rejectsBadConfig() {
        #expect(throws: SettingError.self) { try Settings.parseConfigFile("colour = blue\n", path: "c") }
        #expect(throws: SettingError("c:2: expected key = value")) {
            try Settings.parseConfigFile("\nsecret-ish\n", path: "c")
        }
    }

    @Test("a timeout must be a positive number of milliseconds")
    func validatesMilliseconds() throws {
        #expect(try Settings().milliseconds(.keyringTimeout, default: 3000) == 3000)
        #expect(
            try Settings(environment: ["PORTAL_TOKEN_KEYRING_TIMEOUT_MS": "250"]).milliseconds(
                .keyringTimeout, default: 3000) == 250)
        #expect(throws: SettingError.self) {
            try Settings(environment: ["PORTAL_TOKEN_KEYRING_TIMEOUT_MS": "-1"]).milliseconds(
                .keyringTimeout, default: 3000)
        }
    }

    @Test("the key cache timeout takes whole seconds, 0 turning it off")
    func validatesSeconds() throws {
        let setting = Setting.keyCacheTimeout
        #expect(Setting.all.contains(setting))
        #expect(try Settings().seconds(setting, default: 900, maximum: 3600) == 900)
        #expect(
            try Settings(environment: ["PORTAL_TOKEN_KEY_CACHE_TIMEOUT": "0"]).seconds(
                setting, default: 900, maximum: 3600) == 0)
        #expect(
            try Settings(configFile: ["key-cache-timeout": "60"]).seconds(setting, default: 900, maximum: 3600) == 60)
        for bad in ["-1", "3601", "15m", "1.5"] {
            #expect(throws: SettingError.self) {
                try Settings(environment: ["PORTAL_TOKEN_KEY_CACHE_TIMEOUT": bad]).seconds(
                    setting, default: 900, maximum: 3600)
            }
        }
    }
}

@Suite("text trimming")
struct TrimmingTests {
    @Test("a config file with Windows line endings reads line by line")
    func crlfConfig() throws {
        let values = try Settings.parseConfigFile("backend = file\r\nkeyring-timeout-ms = 500\r\n", path: "c")
        #expect(values == ["backend": "file", "keyring-timeout-ms": "500"])
    }

    @Test("trimming removes CR LF pairs at both ends")
    func trimsCRLF() {
        #expect("\r\n  value \r\n".trimmingWhitespace == "value")
        #expect(" \t\r\n ".trimmingWhitespace == "")
    }
}
