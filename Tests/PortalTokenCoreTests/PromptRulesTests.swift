import PortalTokenCore
import Testing

/// How a caller rules prompts out, read as git reads it (docs/settings.md, "Non-interactive
/// callers").
@Suite("prompt rules")
struct PromptRulesTests {
    @Test("GIT_TERMINAL_PROMPT rules prompts out when it holds a false boolean, as git_env_bool reads it")
    func terminalPrompt() {
        for value in ["0", "false", "False", "no", "off", ""] {
            #expect(
                PromptRules.terminalPromptRuling(["GIT_TERMINAL_PROMPT": value]) == "GIT_TERMINAL_PROMPT=\(value)",
                "\(value)")
        }
        for value in ["1", "true", "yes", "on", "2", "maybe"] {
            #expect(PromptRules.terminalPromptRuling(["GIT_TERMINAL_PROMPT": value]) == nil, "\(value)")
        }
        #expect(PromptRules.terminalPromptRuling([:]) == nil)
    }

    @Test("credential.interactive rules prompts out when false or exactly never; a bare key is true")
    func interactiveValues() {
        for value in ["never", "false", "no", "off", "0", ""] {
            #expect(PromptRules.interactiveValueRulesOut(value), "\(value)")
        }
        for value in ["true", "auto", "always", "1", "Never"] {
            #expect(!PromptRules.interactiveValueRulesOut(value), "\(value)")
        }
        #expect(!PromptRules.interactiveValueRulesOut(nil))
    }

    @Test("GIT_CONFIG_PARAMETERS is read in both of git's formats, quotes and bare keys included")
    func configParameters() throws {
        // What git 2.39 and 2.47 write for `-c credential.interactive=never -c a.b -c "x.y=it's"`
        // `-c credential.interactive= -c 'alias.e=!env'`.
        let entries = try #require(
            PromptRules.configParameters(
                #"'credential.interactive'='never' 'a.b'= 'x.y'='it'\''s' 'credential.interactive'='' "#
                    + #"'alias.e'=''\!'env'"#))
        #expect(entries.map(\.key) == ["credential.interactive", "a.b", "x.y", "credential.interactive", "alias.e"])
        #expect(entries.map(\.value) == ["never", nil, "it's", "", "!env"])
        // git before 2.31: each entry one quoted key=value.
        let old = try #require(PromptRules.configParameters("'credential.interactive=false' 'core.askpass'"))
        #expect(old.map(\.key) == ["credential.interactive", "core.askpass"])
        #expect(old.map(\.value) == ["false", nil])
        #expect(PromptRules.configParameters("credential.interactive=never") == nil)
        #expect(PromptRules.configParameters("'unterminated") == nil)
    }

    @Test("the last credential.interactive on git's command line decides, whatever the case of its name")
    func commandLine() {
        let never = ["GIT_CONFIG_PARAMETERS": "'credential.interactive'='never'"]
        #expect(PromptRules.commandLineRuling(never) == "credential.interactive=never")
        let maintenance = ["GIT_CONFIG_PARAMETERS": "'credential.interactive'='false' 'core.askPass'='true'"]
        #expect(PromptRules.commandLineRuling(maintenance) == "credential.interactive=false")
        let overridden = [
            "GIT_CONFIG_PARAMETERS": "'credential.interactive'='never' 'Credential.Interactive'='true'"
        ]
        #expect(PromptRules.commandLineRuling(overridden) == nil)
        let bare = ["GIT_CONFIG_PARAMETERS": "'credential.interactive'="]
        #expect(PromptRules.commandLineRuling(bare) == nil)
        // A URL-scoped one is git's configuration to match, not a plain ruling.
        let scoped = ["GIT_CONFIG_PARAMETERS": "'credential.https://example.com.interactive'='never'"]
        #expect(PromptRules.commandLineRuling(scoped) == nil)
        #expect(PromptRules.commandLineRuling([:]) == nil)
    }

    @Test("a request's URL is built as git builds it for credential.<url>.* settings")
    func credentialURL() throws {
        var request = CredentialRequest()
        #expect(PromptRules.credentialURL(request) == nil)
        request.protocolName = "https"
        request.host = CredentialHost(gitHost: "example.com:8443")
        #expect(PromptRules.credentialURL(request) == "https://example.com:8443")
        request.username = "me@corp"
        request.path = "group/repo name.git"
        #expect(PromptRules.credentialURL(request) == "https://me%40corp@example.com:8443/group/repo%20name.git")
        // A protocol that is no URL scheme gives no URL, so nothing can read as an option to git.
        for protocolName in ["--file=/etc/passwd", "", "1http", "ht tp"] {
            request.protocolName = protocolName
            #expect(PromptRules.credentialURL(request) == nil, "\(protocolName)")
        }
    }
}
