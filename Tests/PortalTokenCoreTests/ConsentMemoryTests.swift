import PortalTokenCore
import Testing

/// `ask` and `remember` lines, and what the agent keeps of the user's answers.
@Suite("asking the user: ask rules and kept answers")
struct ConsentMemoryTests {
    static let sandbox = CallerIdentity(
        uid: 1000, gid: 1000, pid: 4343, sameUserNamespace: false, cgroup: "/user.slice", executable: "/usr/bin/tool")

    @Test("an ask line grants nothing by itself: the decision carries the question, an allow line still allows")
    func askDecisions() throws {
        let rules = try AgentRules.parse(
            """
            rule sandbox
                user-namespace other
                allow status
                ask token env-prod
                ask proxy GET /api/v3/clients/me
                remember 5m 1h

            """.utf8)
        let rule = try #require(rules.rules.first)
        #expect(rule.asks == [.token(["env-prod"]), .proxy(methods: ["GET"], prefixes: ["/api/v3/clients/me"])])
        #expect(rule.remember == AgentRules.Remember(idleSeconds: 300, capSeconds: 3600))
        let token = rules.decide(.token(environment: "env-prod"), for: Self.sandbox, on: .main, agentUID: 1000)
        #expect(!token.allowed)
        #expect(
            token.ask == AgentRules.Ask(rule: "sandbox", grant: "ask token env-prod", remember: rule.remember)
        )
        let proxied = rules.decide(
            .proxy(method: "GET", path: "/api/v3/clients/me"), for: Self.sandbox, on: .main, agentUID: 1000)
        #expect(
            proxied.ask
                == AgentRules.Ask(rule: "sandbox", grant: "ask proxy GET /api/v3/clients/me", remember: rule.remember))
        // What no line covers is refused unasked; what an allow line covers is allowed unasked.
        let other = rules.decide(.token(environment: "env-dev"), for: Self.sandbox, on: .main, agentUID: 1000)
        #expect(!other.allowed && other.ask == nil)
        let status = rules.decide(.status, for: Self.sandbox, on: .main, agentUID: 1000)
        #expect(status.allowed && status.ask == nil)
        // The restricted socket still never writes, whatever a rule asks.
        let writes = try AgentRules.parse("rule w\n    any-caller\n    ask write\n".utf8)
        let write = writes.decide(.write, for: Self.sandbox, on: .restricted, agentUID: 1000)
        #expect(!write.allowed && write.ask == nil)
        // Without a remember line, 1Password's defaults: 10 minutes idle, 12 hours at most.
        #expect(writes.rules[0].remember == AgentRules.Remember(idleSeconds: 600, capSeconds: 43_200))
    }

    @Test("ask and remember lines are read strictly, naming the line")
    func strictLines() {
        for (text, line, words) in [
            ("rule a\n  any-caller\n  ask\n", 3, "'ask' needs"),
            ("rule a\n  any-caller\n  ask token\n", 3, "'ask token'"),
            ("rule a\n  any-caller\n  ask proxy /a/../b\n", 3, "dot segments"),
            ("rule a\n  any-caller\n  remember 10m\n", 3, "'remember' takes"),
            ("rule a\n  any-caller\n  remember 2h 1h\n", 3, "the idle time is longer than the cap"),
            ("rule a\n  any-caller\n  remember 1m 8d\n", 3, "the cap is at most 7d"),
            ("rule a\n  any-caller\n  remember 1m 1h\n  remember 1m 1h\n", 4, "one 'remember' line"),
            ("rule a\n  any-caller\n  remember ten 1h\n", 3, "'remember' takes"),
        ] {
            do {
                _ = try AgentRules.parse(text.utf8)
                Issue.record("accepted: \(text.debugDescription)")
            } catch {
                #expect(error.line == line, "\(text.debugDescription)")
                #expect(error.message.contains(words), "\(error.message)")
            }
        }
    }

    @Test("an answer stands until its idle time passes without use, and at most its cap; refusals apart")
    func idleAndCap() {
        var memory = ConsentMemory()
        let remember = AgentRules.Remember(idleSeconds: 10, capSeconds: 25)
        let key = ConsentMemory.Key(
            AgentRules.Ask(rule: "r", grant: "ask token a", remember: remember), caller: "c")
        let other = ConsentMemory.Key(
            AgentRules.Ask(rule: "r", grant: "ask token b", remember: remember), caller: "c")
        #expect(memory.answer(for: key, at: 0) == nil)
        memory.record(.allow, for: key, at: 0)
        #expect(memory.answer(for: other, at: 1) == nil)
        // Each use moves the idle time on, never the cap.
        for now in stride(from: Int64(9_000), through: 24_000, by: 5_000) {
            #expect(memory.answer(for: key, at: now) == .allow, "\(now)")
        }
        #expect(memory.answer(for: key, at: 25_000) == nil)
        #expect(memory.answer(for: key, at: 25_001) == nil)
        // Idle: 10 s without a use.
        memory.record(.allow, for: key, at: 30_000)
        #expect(memory.answer(for: key, at: 39_999) == .allow)
        #expect(memory.answer(for: key, at: 50_000) == nil)
        // A refusal replaces an approval, and is counted apart.
        memory.record(.allow, for: key, at: 60_000)
        memory.record(.deny, for: other, at: 60_000)
        #expect(memory.count(at: 60_001) == (approvals: 1, refusals: 1))
        memory.record(.deny, for: key, at: 61_000)
        #expect(memory.answer(for: key, at: 62_000) == .deny)
        #expect(memory.count(at: 62_000) == (approvals: 0, refusals: 2))
        #expect(memory.forget() == (approvals: 0, refusals: 2))
        #expect(memory.answer(for: key, at: 62_001) == nil)
        // remember 0s 0s keeps nothing: every request asks.
        let everyTime = ConsentMemory.Key(
            AgentRules.Ask(
                rule: "r", grant: "ask token a", remember: AgentRules.Remember(idleSeconds: 0, capSeconds: 0)),
            caller: "c")
        memory.record(.allow, for: everyTime, at: 70_000)
        #expect(memory.answer(for: everyTime, at: 70_000) == nil)
    }

    @Test("an answer is kept for its line as it reads: an edited line or remember time asks again")
    func keysFollowTheLine() {
        let remember = AgentRules.Remember(idleSeconds: 60, capSeconds: 600)
        var memory = ConsentMemory()
        let asked = AgentRules.Ask(rule: "r", grant: "ask token env-dev", remember: remember)
        memory.record(.allow, for: ConsentMemory.Key(asked, caller: "c"), at: 0)
        #expect(memory.answer(for: ConsentMemory.Key(asked, caller: "c"), at: 1) == .allow)
        var widened = asked
        widened.grant = "ask token *"
        #expect(memory.answer(for: ConsentMemory.Key(widened, caller: "c"), at: 1) == nil)
        var longer = asked
        longer.remember = AgentRules.Remember(idleSeconds: 60, capSeconds: 6000)
        #expect(memory.answer(for: ConsentMemory.Key(longer, caller: "c"), at: 1) == nil)
        // What no longer stands is dropped when another answer is kept.
        memory.record(.deny, for: ConsentMemory.Key(asked, caller: "d"), at: 700_000)
        #expect(memory.count(at: 700_000) == (approvals: 0, refusals: 1))
        #expect(memory.forget() == (approvals: 0, refusals: 1))
    }

    @Test("the caller an answer is kept for is the kernel's: its root mount, and its executable where it can be read")
    func callerKeys() {
        var caller = Self.sandbox
        let mount = "22 0:21 /"
        let key = ConsentMemory.callerKey(caller, executableDigest: "ab12", rootMount: mount)
        #expect(key?.contains("exe /usr/bin/tool sha256 ab12") == true)
        #expect(ConsentMemory.callerKey(caller, executableDigest: "cd34", rootMount: mount) != key)
        #expect(ConsentMemory.callerKey(caller, executableDigest: "ab12", rootMount: "901 0:21 /") != key)
        #expect(ConsentMemory.callerKey(caller, executableDigest: "ab12", rootMount: nil) == nil)
        // Contents not read (a FUSE file, a huge one): the path alone, never the same key as a read one.
        let unread = ConsentMemory.callerKey(caller, executableDigest: nil, rootMount: mount)
        #expect(unread?.contains("exe /usr/bin/tool (contents not read)") == true && unread != key)
        // Hidden by the kernel (a process that forbids core dumps): the rest names it.
        caller.executable = nil
        #expect(
            ConsentMemory.callerKey(caller, executableDigest: nil, rootMount: mount)?.contains("exe hidden") == true)
        caller.executable = "/usr/bin/tool"
        caller.cgroup = "/system.slice/docker-" + String(repeating: "a", count: 64) + ".scope"
        #expect(ConsentMemory.callerKey(caller, executableDigest: "ab12", rootMount: mount) != key)
        #expect(ConsentMemory.group(of: caller) != ConsentMemory.group(of: Self.sandbox))
        caller.pidVerified = false
        #expect(ConsentMemory.callerKey(caller, executableDigest: "ab12", rootMount: mount) == nil)
    }

    @Test("the root mount is the last mount on / in mountinfo")
    func rootMounts() {
        let text = """
            22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda rw
            23 22 0:22 / /proc rw - proc proc rw
            95 22 0:40 / / rw - overlay overlay rw

            """
        #expect(ConsentMemory.rootMount(inMountInfo: text) == "95 0:40 /")
        #expect(ConsentMemory.rootMount(inMountInfo: "23 22 0:22 / /proc rw - proc proc rw\n") == nil)
    }
}
