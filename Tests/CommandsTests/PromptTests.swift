import Foundation
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// What `status` and `doctor` say about prompts, and where git's configuration is asked
/// (docs/settings.md, "Non-interactive callers").
@Suite("prompts in status and doctor")
struct PromptTests {
    @Test("status names the setting that rules prompts out, in text and JSON, and says nothing otherwise")
    func statusNamesTheSetting() throws {
        let cli = try InProcessCLI()
        try cli.signIn()
        let ruled = cli.run(["status"], environment: ["GIT_TERMINAL_PROMPT": "0"])
        #expect(ruled.exitCode == 0, "\(ruled.stderr)")
        #expect(
            ruled.stdout.contains(
                "\n  prompts:      none: GIT_TERMINAL_PROMPT=0 rules them out; only what is stored answers"),
            "\(ruled.stdout)")
        let json = cli.run(["status", "--format", "json"], environment: ["GIT_TERMINAL_PROMPT": "0"])
        #expect(json.stdout.contains(#""promptsRuledOutBy":"GIT_TERMINAL_PROMPT=0""#), "\(json.stdout)")

        let free = cli.run(["status"])
        #expect(!free.stdout.contains("prompts:"), "\(free.stdout)")
        #expect(cli.run(["status", "--format", "json"]).stdout.contains(#""promptsRuledOutBy":null"#))
    }

    @Test("git's -c credential.interactive reaches status through GIT_CONFIG_PARAMETERS, without running git")
    func statusReadsGitCommandLine() throws {
        let cli = try InProcessCLI()
        let git = FakeGitConfig(answer: "true")
        cli.programs = git
        try cli.signIn()
        let result = cli.run(
            ["status"], environment: ["GIT_CONFIG_PARAMETERS": "'credential.interactive'='false' 'core.askPass'='true'"]
        )
        #expect(result.stdout.contains("prompts:      none: credential.interactive=false rules them out"))
        #expect(git.calls.value.isEmpty)
    }

    @Test("otherwise git's configuration is asked once, for credential.interactive at the Portal API's URL")
    func statusAsksGitConfiguration() throws {
        let cli = try InProcessCLI()
        let git = FakeGitConfig(answer: "never")
        cli.programs = git
        try cli.signIn()
        let result = cli.run(["status"])
        #expect(result.stdout.contains("prompts:      none: credential.interactive=never rules them out"))
        #expect(git.calls.value == [["config", "--get-urlmatch", "credential.interactive", "https://api.portalhq.io"]])

        let unset = FakeGitConfig(answer: nil)
        cli.programs = unset
        #expect(!cli.run(["status"]).stdout.contains("prompts:"))
        #expect(unset.calls.value.count == 1)
    }

    @Test("doctor says whether prompts are possible, and which setting rules them out")
    func doctorPrompts() throws {
        let cli = try InProcessCLI()
        let plain = cli.run(["doctor"], environment: ["PORTAL_TOKEN_PASSPHRASE": "x"])
        #expect(
            plain.stdout.contains("ok      prompts: none: neither stdin nor stderr is a terminal\n"), "\(plain.stdout)")
        let ruled = cli.run(["doctor"], environment: ["PORTAL_TOKEN_PASSPHRASE": "x", "GIT_TERMINAL_PROMPT": "false"])
        #expect(
            ruled.stdout.contains("ok      prompts: none: no terminal, and GIT_TERMINAL_PROMPT=false rules them out\n"),
            "\(ruled.stdout)")
    }

    @Test("doctor calls an encrypted file that auto chose a problem when nothing unattended gives its passphrase")
    func doctorAutoFileWithoutPassphrase() throws {
        let cli = try InProcessCLI()
        let path = cli.directory + "/data/portal-token/store"
        let missing = cli.run(["doctor"])
        #expect(missing.exitCode == 1)
        #expect(
            missing.stdout.contains("problem encrypted file: \(path) does not exist yet; passphrase source: none\n"),
            "\(missing.stdout)")
        #expect(missing.stdout.contains("hint: set PORTAL_TOKEN_PASSPHRASE_FILE to a file holding it"))

        let given = cli.run(["doctor"], environment: ["PORTAL_TOKEN_PASSPHRASE": "x"])
        #expect(
            given.stdout.contains(
                "ok      encrypted file: \(path) does not exist yet; passphrase source: PORTAL_TOKEN_PASSPHRASE\n"),
            "\(given.stdout)")
    }
}

/// git as far as `git config --get-urlmatch` goes: `answer` as the value (nil: not set), every
/// call recorded.
final class FakeGitConfig: ProgramLauncher {
    let answer: String?
    let calls = Locked<[[String]]>([])

    init(answer: String?) { self.answer = answer }

    func run(_ program: String, _ arguments: [String], timeoutMilliseconds: Int) -> ProgramResult {
        guard program == "git" else { return ProgramResult(status: nil, output: "", startError: ENOENT) }
        calls.update { $0.append(arguments) }
        guard let answer else { return ProgramResult(status: 1, output: "") }
        return ProgramResult(status: 0, output: answer + "\n")
    }

    func start(_ program: String, _ arguments: [String], waitMilliseconds: Int) -> Bool { false }
}
