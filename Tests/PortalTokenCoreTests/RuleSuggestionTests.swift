import PortalTokenCore
import Testing

@Suite("the rule suggested for a refused caller")
struct RuleSuggestionTests {
    static let docker = CallerIdentity(
        uid: 0, gid: 0, pid: 5000, sameUserNamespace: true,
        cgroup: "/system.slice/docker-3f2a0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab.scope",
        executable: "/usr/bin/curl")

    func suggestion(
        in rules: AgentRules = AgentRules(), _ operation: AgentRules.Operation, _ caller: CallerIdentity,
        on socket: AgentRules.Socket = .restricted
    ) throws -> AgentRules.Suggestion {
        try rules.suggestion(for: operation, caller: caller, on: socket, agentUID: 1000).get()
    }

    @Test("a container is named by its engine and ID, and granted the one environment asked for")
    func container() throws {
        let rule = try suggestion(.token(environment: "env-prod"), Self.docker)
        #expect(
            rule.text == """
                rule admit-docker-3f2a01234567
                    socket restricted
                    uid 0
                    user-namespace same
                    container docker:3f2a0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab
                    exe /usr/bin/curl
                    allow token env-prod

                """)
        #expect(rule.above == nil)
        let parsed = try AgentRules.parse(Array(rule.text.utf8))
        #expect(
            parsed.decide(.token(environment: "env-prod"), for: Self.docker, on: .restricted, agentUID: 1000).allowed)
        #expect(
            !parsed.decide(.token(environment: "env-dev"), for: Self.docker, on: .restricted, agentUID: 1000).allowed)
        #expect(!parsed.decide(.token(environment: "env-prod"), for: Self.docker, on: .main, agentUID: 1000).allowed)
    }

    @Test("a cgroup the caller made below its unit is not its identity; its unit is")
    func delegatedCgroup() throws {
        let caller = CallerIdentity(
            uid: 1000, gid: 1000, pid: 7, sameUserNamespace: false, cgroup: "/system.slice/ci.service/chosen-by-me",
            executable: "/usr/bin/git")
        let rule = try suggestion(.gitGet(host: "github.com"), caller)
        #expect(rule.text.contains("    unit ci.service\n"))
        #expect(rule.text.contains("    container none\n"))
        #expect(!rule.text.contains("chosen-by-me"))
        #expect(rule.text.contains("    allow git-get github.com\n"))
    }

    @Test("a root with a /.flatpak-info names no app; Flatpak's own scope does")
    func flatpak() throws {
        var forged = CallerIdentity(
            uid: 1000, gid: 1000, pid: 8, sameUserNamespace: false, cgroup: "/user.slice/x.scope")
        forged.hasFlatpakInfo = true
        let rule = try suggestion(.status, forged)
        #expect(!rule.text.contains("flatpak") && !rule.text.contains("container none"))
        let app = CallerIdentity(
            uid: 1000, gid: 1000, pid: 9, sameUserNamespace: false,
            cgroup: "/user.slice/user-1000.slice/user@1000.service/app.slice/app-flatpak-org.example.Editor-77.scope")
        let appRule = try suggestion(.list, app)
        #expect(appRule.text.contains("    flatpak org.example.Editor\n"))
        #expect(!appRule.text.contains("-77"))
    }

    @Test("no rule for what no rule can admit, and none that a glob or a space would widen")
    func unavailable() {
        let ambiguous = CallerIdentity(
            uid: 1000, gid: 1000, pid: 7, cgroup: "/system.slice/ci.service/docker-abc.scope")
        #expect(throws: AgentRules.SuggestionUnavailable.self) { try suggestion(.status, ambiguous) }
        #expect(throws: AgentRules.SuggestionUnavailable.self) { try suggestion(.write, Self.docker) }
        #expect(throws: AgentRules.SuggestionUnavailable.self) {
            try suggestion(.gitGet(host: "*.example.com"), Self.docker)
        }
        #expect(throws: AgentRules.SuggestionUnavailable.self) {
            try suggestion(.proxy(method: "GET", path: "/api/../x"), Self.docker)
        }
        var unverified = Self.docker
        unverified.pidVerified = false
        #expect(throws: AgentRules.SuggestionUnavailable.self) { try suggestion(.status, unverified) }
    }

    @Test("a rule that already matches the caller decides first: the new one goes above it, with a name of its own")
    func above() throws {
        let rules = try AgentRules.parse(
            Array("rule admit-docker-3f2a01234567\n    container any\n    allow status\n".utf8))
        let rule = try suggestion(in: rules, .proxy(method: "GET", path: "/api/v3/clients/me"), Self.docker)
        #expect(rule.above == "admit-docker-3f2a01234567")
        #expect(rule.name == "admit-docker-3f2a01234567-2")
        #expect(rule.text.contains("    allow proxy GET /api/v3/clients/me\n"))
    }
}
