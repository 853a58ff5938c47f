import PortalTokenCore
import Testing

@Suite("the agent's rules")
struct AgentRulesTests {
    static let agentUID: UInt32 = 1000
    static let own = CallerIdentity(
        uid: 1000, gid: 1000, pid: 4242, sameUserNamespace: true,
        cgroup:
            "/user.slice/user-1000.slice/user@1000.service/app.slice/app-org.gnome.Terminal.slice/vte-spawn-1.scope",
        executable: "/usr/bin/git")
    static let unshared = CallerIdentity(uid: 1000, gid: 1000, pid: 4343, sameUserNamespace: false, cgroup: own.cgroup)
    static let docker = CallerIdentity(
        uid: 0, gid: 0, pid: 5000, sameUserNamespace: true,
        cgroup: "/system.slice/docker-3f2a0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab.scope",
        executable: "/usr/bin/curl")

    @Test("by default the agent's own user in its namespace and outside containers may do everything")
    func defaultAllowsOwnUser() {
        let rules = AgentRules()
        for operation: AgentRules.Operation in [
            .token(environment: "e"), .status, .gitGet(host: "github.com"), .dockerGet(registry: "ghcr.io"), .list,
            .write,
        ] {
            #expect(rules.decide(operation, for: Self.own, on: .main, agentUID: Self.agentUID).allowed)
        }
    }

    @Test("by default another user, another user namespace, a container and an unverified pid are refused")
    func defaultRefuses() {
        let rules = AgentRules()
        var other = Self.own
        other.uid = 1001
        var unverified = Self.own
        unverified.pidVerified = false
        var flatpak = Self.own
        flatpak.hasFlatpakInfo = true
        var sameUIDContainer = Self.docker
        sameUIDContainer.uid = 1000
        for caller in [other, Self.unshared, unverified, flatpak, sameUIDContainer, Self.docker] {
            let decision = rules.decide(.token(environment: "e"), for: caller, on: .main, agentUID: Self.agentUID)
            #expect(!decision.allowed, "\(caller)")
            #expect(decision.decidedBy == "default")
        }
    }

    @Test("the restricted socket refuses everything without a rule, and writes even with one")
    func restrictedSocket() throws {
        #expect(!AgentRules().decide(.status, for: Self.own, on: .restricted, agentUID: 1000).allowed)
        let rules = try AgentRules.parse("rule all\n    uid 1000\n    allow write\n    allow token *\n".utf8)
        let write = rules.decide(.write, for: Self.own, on: .restricted, agentUID: 1000)
        #expect(!write.allowed)
        #expect(write.decidedBy == "restricted socket")
        #expect(rules.decide(.token(environment: "x"), for: Self.own, on: .restricted, agentUID: 1000).allowed)
    }

    @Test("allow token ENV covers every end user of ENV; ENV/END_USER only that one, and only when it is known")
    func tokenGrantNamesAnAccount() throws {
        let text = "rule accounts\n    uid 1000\n    allow token staging prod/alice prod/ci-*\n"
        let rules = try AgentRules.parse(text.utf8)
        func allowed(_ account: String) -> Bool {
            rules.decide(.token(environment: account), for: Self.own, on: .restricted, agentUID: 1000).allowed
        }
        #expect(allowed("staging") && allowed("staging/bob"))
        #expect(allowed("prod/alice") && allowed("prod/ci-7"))
        #expect(!allowed("prod/bob"))
        #expect(!allowed("prod"), "an end user not known is not the one the rule names")
        #expect(
            AgentRules.Operation.token(environment: "prod/alice").description
                == "the token of end user 'alice' in environment 'prod'")
    }

    @Test("the first matching rule decides, and names itself when it refuses")
    func firstMatchDecides() throws {
        let rules = try AgentRules.parse(
            """
            # containers of the build
            rule build
                container docker:3f2a*
                allow token env-prod
                allow git-get github.com *.example.com
                allow docker-get ghcr.io

            rule sandboxed-self
                uid 1000
                user-namespace other
                allow token *
            """.utf8)
        #expect(rules.decide(.token(environment: "env-prod"), for: Self.docker, on: .main, agentUID: 1000).allowed)
        #expect(rules.decide(.gitGet(host: "git.example.com"), for: Self.docker, on: .main, agentUID: 1000).allowed)
        #expect(rules.decide(.dockerGet(registry: "ghcr.io"), for: Self.docker, on: .main, agentUID: 1000).allowed)
        let refused = rules.decide(.token(environment: "env-dev"), for: Self.docker, on: .main, agentUID: 1000)
        #expect(!refused.allowed)
        #expect(refused.decidedBy == "rule build")
        #expect(!rules.decide(.write, for: Self.docker, on: .main, agentUID: 1000).allowed)
        #expect(rules.decide(.token(environment: "any"), for: Self.unshared, on: .main, agentUID: 1000).allowed)
        #expect(!rules.decide(.gitGet(host: "x"), for: Self.unshared, on: .main, agentUID: 1000).allowed)
        // The agent's own user matches no rule here and keeps the default.
        #expect(rules.decide(.write, for: Self.own, on: .main, agentUID: 1000).allowed)
    }

    @Test("conditions on the cgroup, unit, Flatpak app, executable and socket")
    func conditions() throws {
        let rules = try AgentRules.parse(
            """
            rule by-exe
                exe /usr/bin/git
                socket main
                allow status
            rule by-unit
                unit vte-spawn-*.scope
                allow list
            """.utf8)
        #expect(rules.decide(.status, for: Self.own, on: .main, agentUID: 1000).decidedBy == "rule by-exe")
        #expect(rules.decide(.list, for: Self.own, on: .restricted, agentUID: 1000).decidedBy == "rule by-unit")
        var app = Self.own
        app.cgroup = "/user.slice/user-1000.slice/user@1000.service/app.slice/app-flatpak-org.example.Editor-1234.scope"
        app.executable = nil
        #expect(app.flatpakAppID == "org.example.Editor")
        #expect(app.isContained)
        let flatpak = try AgentRules.parse("rule editor\n  flatpak org.example.*\n  allow token env-1\n".utf8)
        #expect(flatpak.decide(.token(environment: "env-1"), for: app, on: .main, agentUID: 1000).allowed)
    }

    @Test("by default the own user may proxy the client API paths with the usual methods, and nothing else")
    func proxyDefault() {
        let rules = AgentRules()
        func decide(_ method: String, _ path: String, _ caller: CallerIdentity = Self.own) -> AgentRules.Decision {
            rules.decide(.proxy(method: method, path: path), for: caller, on: .main, agentUID: Self.agentUID)
        }
        #expect(decide("GET", "/api/v3/clients/me").allowed)
        #expect(decide("PATCH", "/api/v3/clients/me/settings").allowed)
        for (method, path) in [
            ("GET", "/api/v3/admin"), ("GET", "/api/v3/clients/meow"), ("GET", "/api/v3/clients/me/../../admin"),
            ("CONNECT", "/api/v3/clients/me"), ("OPTIONS", "/api/v3/clients/me"),
        ] {
            let decision = decide(method, path)
            #expect(!decision.allowed, "\(method) \(path)")
            #expect(decision.decidedBy == "default")
        }
        var rootElsewhere = Self.unshared
        rootElsewhere.uid = 0
        for caller in [Self.unshared, rootElsewhere, Self.docker] {
            #expect(!decide("GET", "/api/v3/clients/me", caller).allowed, "\(caller)")
        }
        #expect(
            !rules.decide(
                .proxy(method: "GET", path: "/api/v3/clients/me"), for: Self.own, on: .restricted,
                agentUID: Self.agentUID
            ).allowed)
    }

    @Test("a proxy started with its own methods and paths lets its own user send those by default, and only those")
    func proxyDefaultFollowsTheProxy() {
        let scope = AgentRules.Grant.proxy(methods: ["GET"], prefixes: ["/api/v3/catalog"])
        func decide(_ method: String, _ path: String, _ caller: CallerIdentity = Self.own) -> Bool {
            AgentRules().decide(
                .proxy(method: method, path: path), for: caller, on: .main, agentUID: Self.agentUID,
                defaultProxy: scope
            ).allowed
        }
        #expect(decide("GET", "/api/v3/catalog/items"))
        #expect(!decide("POST", "/api/v3/catalog/items"))
        #expect(!decide("GET", "/api/v3/clients/me"))
        #expect(!decide("GET", "/api/v3/catalog/items", Self.unshared))
    }

    @Test("allow proxy grants methods and path prefixes, the defaults when it names none")
    func proxyGrants() throws {
        let rules = try AgentRules.parse(
            """
            rule sandbox
                user-namespace other
                allow proxy
            rule build
                container docker:3f2a*
                allow proxy GET HEAD /api/v3/clients/me /api/v3/catalog/
            rule own
                uid 1000
                allow token *
            """.utf8)
        func decide(_ caller: CallerIdentity, _ method: String, _ path: String, on socket: AgentRules.Socket = .main)
            -> AgentRules.Decision
        {
            rules.decide(.proxy(method: method, path: path), for: caller, on: socket, agentUID: Self.agentUID)
        }
        #expect(decide(Self.unshared, "POST", "/api/v3/clients/me").allowed)
        #expect(decide(Self.unshared, "GET", "/api/v3/clients/me", on: .restricted).allowed)
        #expect(!decide(Self.unshared, "GET", "/api/v3/catalog/x").allowed)
        #expect(decide(Self.docker, "GET", "/api/v3/catalog/items").allowed)
        #expect(decide(Self.docker, "HEAD", "/api/v3/clients/me").allowed)
        let post = decide(Self.docker, "POST", "/api/v3/clients/me")
        #expect(!post.allowed)
        #expect(post.decidedBy == "rule build")
        #expect(!decide(Self.docker, "GET", "/api/v3/catalog/../admin").allowed)
        // A rule that matches but grants no proxy refuses it, naming itself.
        let own = decide(Self.own, "GET", "/api/v3/clients/me")
        #expect(!own.allowed)
        #expect(own.decidedBy == "rule own")
    }

    @Test("a malformed rules file names the line and what was wrong, never the line's text")
    func parseErrors() {
        let cases: [(String, Int)] = [
            ("  uid 1\n", 1),
            ("rule a\n  uid abc\n", 2),
            ("rule a\nrule a\n", 2),
            ("rule a\n  allow teleport\n", 2),
            ("rule a\n  user-namespace maybe\n", 2),
            ("rule a\n  exe relative/path\n", 2),
            ("rule a b\n", 1),
            ("rule a\n  secret-canary-word x\n", 2),
            ("rule a\n  allow proxy CONNECT\n", 2),
            ("rule a\n  allow proxy get\n", 2),
            ("rule a\n  allow proxy /api/../admin\n", 2),
        ]
        for (text, line) in cases {
            do {
                _ = try AgentRules.parse(text.utf8)
                Issue.record("parsed: \(text)")
            } catch {
                #expect(error.line == line)
                #expect(!error.message.contains("canary"))
            }
        }
    }

    @Test("cgroup paths name Docker, Podman, containerd, Kubernetes and Flatpak placements and the unit")
    func placements() {
        let id = String(repeating: "ab", count: 32)
        #expect(CgroupPlacement(path: "/system.slice/docker-\(id).scope").containerID == id)
        #expect(CgroupPlacement(path: "/docker/\(id)").runtime == "docker")
        #expect(
            CgroupPlacement(path: "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-\(id).scope").runtime
                == "podman")
        #expect(CgroupPlacement(path: "/kubepods/besteffort/pod1/\(id)").runtime == "kubernetes")
        #expect(CgroupPlacement(path: "/system.slice/cri-containerd-\(id).scope").runtime == "containerd")
        let service = CgroupPlacement(path: "/system.slice/build.service")
        #expect(service.systemdUnit == "build.service")
        #expect(!service.isContained)
        #expect(
            CgroupPlacement(path: "/user.slice/user-1000.slice/user@1000.service/init.scope").systemdUnit
                == "init.scope")
        #expect(CgroupPlacement(path: "/").containerID == nil)
    }

    @Test("the unit and container come from what systemd or the engine made, never a cgroup named below it")
    func placementsBelowTheUnit() {
        let id = String(repeating: "ab", count: 32)
        let user = "/user.slice/user-1000.slice/user@1000.service"
        // Delegated below a unit: the unit is the identity, the child's name is not.
        let renamed = CgroupPlacement(path: "/system.slice/x.service/ci-runner.service")
        #expect(renamed.systemdUnit == "x.service")
        let delegated = CgroupPlacement(path: "\(user)/app.slice/ci-runner.service/job/1")
        #expect(delegated.systemdUnit == "ci-runner.service")
        #expect(CgroupPlacement(path: "/system.slice/docker-\(id).scope/init").containerID == id)
        // The engines' cgroupfs layouts take their fixed places.
        #expect(CgroupPlacement(path: "/kubepods/besteffort/pod1/\(id)/sub").containerID == id)
        #expect(CgroupPlacement(path: "/kubepods/pod1/\(id)").containerID == id)
        #expect(CgroupPlacement(path: "/lxc.payload.web/init.scope").containerID == "web")
        #expect(CgroupPlacement(path: "/machine.slice/machine-build.scope/payload").runtime == "machine")
        #expect(CgroupPlacement(path: "/system.slice/ci.service/docker-\(id).scope").containerID == nil)
        // A container or sandbox named below another, or where nothing made one: the agent refuses
        // such a caller whatever the rules say.
        for path in [
            "/system.slice/ci.service/docker-\(id).scope", "\(user)/app.slice/x.scope/libpod-\(id).scope",
            "/docker/\(id)/docker/\(id)", "/system.slice/docker-\(id).scope/docker-\(id).scope",
            "\(user)/app.slice/app-flatpak-org.example.A-1.scope/app-flatpak-org.example.B-2.scope",
            "/somewhere/docker-\(id).scope", "\(user)/x.service/lxc.payload.web",
        ] {
            #expect(CgroupPlacement(path: path).flatpakAppID != "org.example.B", "\(path)")
            var caller = Self.docker
            caller.cgroup = path
            let rules = AgentRules(rules: [
                .init(name: "any", conditions: [.container("any")], grants: [.token(["*"])]),
                .init(name: "apps", conditions: [.flatpak("*")], grants: [.token(["*"])]),
                .init(name: "all", conditions: [], grants: [.token(["*"])]),
            ])
            let decision = rules.decide(.token(environment: "e"), for: caller, on: .main, agentUID: 0)
            #expect(!decision.allowed, "\(path)")
            #expect(decision.decidedBy == "identity", "\(path)")
        }
    }

    @Test("a /.flatpak-info in the caller's root names no app, yet counts as a sandbox")
    func flatpakInfoNamesNoApp() throws {
        var forged = Self.own
        forged.hasFlatpakInfo = true
        #expect(forged.flatpakAppID == nil)
        #expect(forged.isContained)
        let rules = try AgentRules.parse("rule editor\n  flatpak org.example.*\n  allow token env-1\n".utf8)
        let decision = rules.decide(.token(environment: "env-1"), for: forged, on: .main, agentUID: 1000)
        #expect(!decision.allowed)
        #expect(decision.decidedBy == "default")
    }

    @Test("globs match any run with * and one character with ?")
    func globs() {
        #expect(Glob.matches("*.example.com", "git.example.com"))
        #expect(!Glob.matches("*.example.com", "example.com"))
        #expect(Glob.matches("a?c", "abc"))
        #expect(Glob.matches("*", ""))
        #expect(!Glob.matches("abc", "abcd"))
        #expect(Glob.matches("/system.slice/docker-*.scope", "/system.slice/docker-12.scope"))
    }
}
