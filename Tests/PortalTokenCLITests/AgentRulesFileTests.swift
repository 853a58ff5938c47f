import Foundation
import Glibc
import PortalTokenTestSupport
import Testing

/// The rules file read as the agent reads it: bytes, one line at a LF, nothing else a line end.
@Suite("the agent's rules file, read strictly")
struct AgentRulesFileTests {
    /// `portal-token agent --rules PATH`, which must refuse to start.
    static func refusedStart(_ harness: AgentHarness, rules path: String? = nil) throws -> ProcessResult {
        try ProcessRunner.run(
            ProcessRunner.portalTokenPath, ["agent", "--rules", path ?? harness.rulesPath],
            environment: try harness.agentEnvironment(), timeout: 20)
    }

    static func writeBytes(_ text: String, to path: String) {
        _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
        chmod(path, 0o600)
    }

    @Test("a CR LF file reads as its LF form, and a CR before a LF never joins two lines into one rule")
    func lineEndings() throws {
        // The rule needs its container: a sandbox outside any container gets nothing.
        let mixed = try AgentHarness(start: false)
        Self.writeBytes("rule build\n    allow token * env-prod\r\n    container docker:3f2a*\n", to: mixed.rulesPath)
        try mixed.start()
        let token = try mixed.signIn()
        let refused = try mixed.sandboxed([ProcessRunner.portalTokenPath, "token"])
        #expect(refused.exitCode == 4, "\(refused.stdout) \(refused.stderr)")
        #expect(!refused.stdout.contains(token))
        #expect(refused.stderr.contains("the caller is in another user namespace"), "\(refused.stderr)")

        // A file written with CR LF throughout is read exactly as its LF form.
        let crlf = try AgentHarness(start: false)
        Self.writeBytes(
            "# sandboxes\r\nrule sandbox\r\n    user-namespace other\r\n    allow token *\r\n", to: crlf.rulesPath)
        try crlf.start()
        let own = try crlf.signIn()
        let served = try crlf.sandboxed([ProcessRunner.portalTokenPath, "token"])
        #expect(served.exitCode == 0 && served.stdout == own + "\n", "\(served.stderr)")
    }

    @Test("a control character, a rule with grants and no condition: the agent does not start, naming the line")
    func strictLines() throws {
        let harness = try AgentHarness(start: false)
        for (text, line) in [
            ("rule a\n    uid 0\n    allow token * # \u{1b}[2J\n", 3),
            ("rule a\n    uid 0\u{0}\n    allow token *\n", 2),
            ("rule a\n    uid 0\r    allow token *\n", 2),
            ("rule a\n    uid 0\n\u{0b}   allow token *\n", 3),
            ("# every caller\nrule everyone\n    allow token *\n", 2),
            ("rule ok\n    uid 0\n    allow status\nrule open\n    allow git-get *\n", 4),
        ] {
            Self.writeBytes(text, to: harness.rulesPath)
            let result = try Self.refusedStart(harness)
            #expect(result.exitCode == 2, "\(text.debugDescription): \(result.stderr)")
            #expect(
                result.stderr.contains("portal-token: error: the rules file \(harness.rulesPath), line \(line): "),
                "\(text.debugDescription): \(result.stderr)")
            #expect(result.stderr.contains("hint: fix line \(line) of"), "\(text.debugDescription): \(result.stderr)")
            #expect(!result.stderr.contains("listening on"))
        }
        // Saying so explicitly is a rule for every caller.
        Self.writeBytes("rule everyone\n    any-caller\n    allow status\n", to: harness.rulesPath)
        try harness.start()
    }

    @Test("a rules file in a directory others may write is refused, naming the directory")
    func openDirectory() throws {
        let harness = try AgentHarness(start: false)
        let directory = harness.scratch + "/open"
        mkdir(directory, 0o700)
        chmod(directory, 0o777)
        let path = directory + "/agent.rules"
        Self.writeBytes("rule sandbox\n    user-namespace other\n    allow token *\n", to: path)
        let result = try Self.refusedStart(harness, rules: path)
        #expect(result.exitCode == 2, "\(result.stderr)")
        #expect(
            result.stderr.contains(
                "portal-token: error: cannot use the rules file \(path): others may write to its directory "
                    + "\(directory) (mode 777)"),
            "\(result.stderr)")
        #expect(result.stderr.contains("hint: restrict it with 'chmod go-w \(directory)'"), "\(result.stderr)")
        chmod(directory, 0o700)
        try harness.start(arguments: ["--rules", path])
    }

    @Test("--check-rules --caller says which rule decides for a described caller, and the rule that would admit it")
    func describedCaller() throws {
        let harness = try AgentHarness(start: false)
        Self.writeBytes("rule ci\n    container docker:*\n    allow token prod\n", to: harness.rulesPath)
        let container = String(repeating: "3f", count: 32)
        let cgroup = "/system.slice/docker-\(container).scope"
        func check(_ arguments: [String]) throws -> ProcessResult {
            try ProcessRunner.run(
                ProcessRunner.portalTokenPath, ["agent", "--check-rules", harness.rulesPath] + arguments,
                environment: try harness.agentEnvironment(), timeout: 20)
        }
        let allowed = try check(["--caller", "cgroup=\(cgroup) user-namespace=other", "--asks", "token prod"])
        #expect(allowed.exitCode == 0, "\(allowed.stdout) \(allowed.stderr)")
        #expect(allowed.stdout.contains("container docker:3f3f3f3f3f3f"))
        #expect(allowed.stdout.contains("allowed by rule ci of \(harness.rulesPath)"))

        let refused = try check(["--caller", "cgroup=\(cgroup)", "--asks", "token staging"])
        #expect(refused.exitCode == 1, "\(refused.stdout) \(refused.stderr)")
        #expect(refused.stdout.contains("refused by rule ci"))
        #expect(
            refused.stdout.contains("container docker:\(container)\n    allow token staging\n"), "\(refused.stdout)")

        // Outside any container the rule does not match: the default decides.
        let outside = try check(["--caller", "user-namespace=other", "--asks", "git-get forge.example"])
        #expect(outside.exitCode == 1 && outside.stdout.contains("refused by default"), "\(outside.stdout)")
        let bad = try check(["--caller", "container=docker:1"])
        #expect(bad.exitCode == 2 && bad.stderr.contains("--caller: 'container=docker:1' is not"), "\(bad.stderr)")
        let alone = try ProcessRunner.run(
            ProcessRunner.portalTokenPath, ["agent", "--asks", "status"], environment: try harness.agentEnvironment())
        #expect(alone.exitCode == 2)
    }
}
