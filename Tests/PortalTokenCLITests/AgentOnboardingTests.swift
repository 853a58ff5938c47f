import Foundation
import Glibc
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// Letting a sandbox in (docs/agent.md, "Letting a sandbox in"): the refusal carries the rule
/// that would admit its caller, `agent --check-rules` shows it again, and that rule, appended to
/// the file, admits the same caller once the agent is restarted.
@Suite("onboarding a sandbox with the suggested rule", .serialized)
struct AgentOnboardingTests {
    /// The rule lines of a refusal's stderr (or of `--check-rules`' output): from `rule NAME` to
    /// the last indented line after it.
    static func suggestedRule(_ text: String) -> String? {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let start = lines.firstIndex(where: { $0.hasPrefix("rule admit-") }) else { return nil }
        let body = lines[(start + 1)...].prefix { $0.hasPrefix("    ") }
        return ([lines[start]] + body).map { $0 + "\n" }.joined()
    }

    func append(_ rule: String, to harness: AgentHarness) throws {
        let existing = (try? String(contentsOfFile: harness.rulesPath, encoding: .utf8)) ?? ""
        try harness.write(rules: existing + "\n" + rule)
    }

    @Test("a refused sandbox is shown its rule; appended and the agent restarted, the same caller is admitted")
    func suggestedRuleAdmitsTheSandbox() throws {
        // A rule for someone else, so the file exists and the suggestion's name must not clash.
        let harness = try AgentHarness(rules: "rule other\n    uid 4242\n    allow token *\n")
        let token = try harness.signIn()
        let refused = try harness.sandboxed([ProcessRunner.portalTokenPath, "token"])
        #expect(refused.exitCode == 4)
        #expect(refused.stderr.contains("hint: a rule that would admit this caller"), "\(refused.stderr)")
        #expect(refused.stderr.contains("man portal-token-agent.rules"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("docs/agent.md"))
        let rule = try #require(Self.suggestedRule(refused.stderr), "\(refused.stderr)")
        // Named by what the kernel said, granting the one environment asked for.
        let lines = rule.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(lines.contains("socket main"))
        #expect(lines.contains("uid \(getuid())"))
        #expect(lines.contains("user-namespace other"))
        #expect(lines.contains("container none"))
        #expect(
            lines.contains("exe \(URL(fileURLWithPath: ProcessRunner.portalTokenPath).resolvingSymlinksInPath().path)"),
            "\(rule)")
        #expect(lines.contains("allow token \(harness.portal.environmentID)"), "\(rule)")
        #expect(lines.filter { $0.hasPrefix("allow") }.count == 1, "\(rule)")
        #expect(!rule.contains("*") && !rule.contains(token))
        // The agent's log carries the same rule.
        #expect(harness.log.contains(rule), "\(harness.log)")

        // --check-rules finds the file sound, and the refusal with the same rule.
        let check = try ProcessRunner.run(
            ProcessRunner.portalTokenPath,
            ["agent", "--check-rules", "--socket", harness.socket, harness.rulesPath],
            environment: try harness.agentEnvironment())
        #expect(check.exitCode == 0, "\(check.stderr)")
        #expect(check.stdout.contains("1 rule, no mistakes (other)"), "\(check.stdout)")
        #expect(
            check.stdout.contains(
                "the token of environment '\(harness.portal.environmentID)' on the main socket, refused by default"),
            "\(check.stdout)")
        #expect(check.stdout.contains("user namespace other"), "\(check.stdout)")
        #expect(Self.suggestedRule(check.stdout) == rule, "\(check.stdout)")

        try append(rule, to: harness)
        // The running agent read its rules at the start; --check-rules judges by the file.
        let again = try ProcessRunner.run(
            ProcessRunner.portalTokenPath, ["agent", "--check-rules", "--socket", harness.socket, harness.rulesPath],
            environment: try harness.agentEnvironment())
        #expect(again.stdout.contains("now: rule admit-"), "\(again.stdout)")
        harness.stop()
        try harness.start()
        let admitted = try harness.sandboxed([ProcessRunner.portalTokenPath, "token"])
        #expect(admitted.exitCode == 0, "\(admitted.stderr)")
        #expect(admitted.stdout == token + "\n")
        // It admits that alone: another environment stays refused.
        let other = try harness.sandboxed([ProcessRunner.portalTokenPath, "--env", "env-other", "token"])
        #expect(other.exitCode == 4, "\(other.stderr)")
    }

    @Test("a forged /.flatpak-info never becomes the suggested rule's identity, and the rule still admits")
    func forgedFlatpakInfoIsNotTheIdentity() throws {
        let harness = try AgentHarness(rules: "# nothing yet\n")
        let token = try harness.signIn()
        let forged = harness.scratch + "/flatpak-info"
        try "[Application]\nname=org.example.Forged\nruntime=runtime/org.example.Platform/x86_64/1\n".write(
            toFile: forged, atomically: false, encoding: .utf8)
        var arguments = [
            "--unshare-user", "--unshare-pid", "--uid", "0", "--gid", "0", "--proc", "/proc", "--dev", "/dev",
        ]
        for entry in ["bin", "lib", "lib64", "sbin"] {
            if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/" + entry) {
                arguments += ["--symlink", target, "/" + entry]
            }
        }
        for directory in ["/usr", "/etc", "/opt"] where FileManager.default.fileExists(atPath: directory) {
            arguments += ["--ro-bind", directory, directory]
        }
        let binaries = URL(fileURLWithPath: ProcessRunner.portalTokenPath).resolvingSymlinksInPath()
            .deletingLastPathComponent().path
        arguments += ["--ro-bind", binaries, binaries, "--bind", harness.scratch, harness.scratch]
        arguments += ["--ro-bind", forged, "/.flatpak-info", ProcessRunner.portalTokenPath, "token"]
        func run() throws -> ProcessResult {
            try ProcessRunner.run("/usr/bin/bwrap", arguments, environment: harness.clientEnvironment())
        }
        let refused = try run()
        #expect(refused.exitCode == 4, "\(refused.stderr)")
        let rule = try #require(Self.suggestedRule(refused.stderr), "\(refused.stderr)")
        #expect(!rule.contains("flatpak"), "\(rule)")
        #expect(!rule.contains("org.example.Forged"), "\(rule)")
        #expect(!rule.contains("container none"), "\(rule)")
        #expect(rule.contains("    uid \(getuid())\n"), "\(rule)")

        try append(rule, to: harness)
        harness.stop()
        try harness.start()
        let admitted = try run()
        #expect(admitted.exitCode == 0, "\(admitted.stderr)")
        #expect(admitted.stdout == token + "\n")
    }

    @Test("--check-rules names the line of a mistake, and only the agent's own user reads the refusals")
    func checkRulesReportsMistakes() throws {
        let harness = try AgentHarness()
        try harness.write(rules: "rule good\n    uid 1\n    allow token *\n\nrule bad\n    colour blue\n")
        let check = try ProcessRunner.run(
            ProcessRunner.portalTokenPath, ["agent", "--check-rules", harness.rulesPath],
            environment: try harness.agentEnvironment())
        #expect(check.exitCode == 2)
        #expect(check.stderr.contains("line 6"), "\(check.stderr)")
        #expect(!check.stderr.contains("colour"), "\(check.stderr)")
        // A sandbox asking for the refusals is refused, and told no rule serves them.
        let asked = try harness.sandboxed([
            "/usr/bin/curl", "-s", "--unix-socket", harness.socket, "http://localhost/v1/refusals",
        ])
        #expect(asked.stdout.contains("only the agent's own user"), "\(asked.stdout)")
        #expect(!asked.stdout.contains("\"refusals\""))
    }
}
