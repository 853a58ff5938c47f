import Foundation
import Glibc
import PortalTokenTestSupport
import Testing

/// A caller that rules prompts out (`credential.interactive=never`, `GIT_TERMINAL_PROMPT=0`) is
/// never asked anything, even with a terminal there to ask on; what only a prompt could answer
/// fails at once, naming the setting (docs/settings.md, "Non-interactive callers").
///
/// Each case runs real git on a terminal of its own, as a person's `git fetch` would: git gives
/// its helper a pipe for stdin and the terminal for stderr and `/dev/tty`, so without the setting
/// the helper would prompt. The helper is portal-token (the release binary when the test script
/// built one, as installed and measured) behind a wrapper that records its stdout, exit code and
/// running time; the keyring's prompts are counted on its private bus.
///
/// "At once" is the acceptance bound of 100 ms for the helper's whole run. A prompt would hold it
/// for as long as nobody answers; a busy machine can hold it too, so a run over the bound is tried
/// again, up to three runs: one must come in under the bound, and none may take a second.
@Suite("non-interactive callers", .serialized)
struct NonInteractiveTests {
    /// How a caller rules prompts out.
    enum Ruling: String, CaseIterable, CustomStringConvertible {
        /// `git -c credential.interactive=never`, which git passes on in GIT_CONFIG_PARAMETERS.
        case credentialInteractive = "credential.interactive=never"
        case terminalPrompt = "GIT_TERMINAL_PROMPT=0"

        var description: String { rawValue }
    }

    static let cases: [(RealGit, Ruling)] = RealGit.allCases.flatMap { git in Ruling.allCases.map { (git, $0) } }

    /// The acceptance bound: no prompt is waited on, nothing is asked of a keyring prompter.
    static let bound = 0.1

    /// Every run within a second, and the fastest within the bound.
    static func expectPrompt(_ runs: [HelperRun], sourceLocation: SourceLocation = #_sourceLocation) {
        let durations = runs.map(\.duration)
        #expect(durations.allSatisfy { $0 < 1 }, "took \(durations) s", sourceLocation: sourceLocation)
        #expect((durations.min() ?? 1) < bound, "took \(durations) s", sourceLocation: sourceLocation)
    }

    @Test("a locked keyring: no unlock prompt requested, nothing printed, exit 4 naming the setting", arguments: cases)
    func lockedKeyring(git: RealGit, ruling: Ruling) throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        let bed = try PromptTestBed(environment: keyring.environment, backend: "secret-service")
        let host = GitHarness.uniqueHost("locked")
        try bed.storeCredential(host: host)
        try keyring.lockLoginCollection()
        let prompts = try PromptCounter(keyring)
        let runs = try bed.timedFills(host: host, git: git, ruling: ruling)
        #expect(prompts.count == 0, "the keyring was asked to prompt: \(prompts.calls)")
        // Asked to unlock with no prompt first; gnome-keyring needs one for its locked login.
        #expect(prompts.unlockCalls > 0, "\(prompts.calls)")
        for run in runs {
            #expect(run.exitCode == 4, "\(run.terminal)")
            #expect(run.stdout.isEmpty)
            #expect(
                run.terminal.contains(
                    "portal-token: error: keyring 'Login' is locked, and \(ruling) rules out the unlock prompt"),
                "\(run.terminal)")
        }
        Self.expectPrompt(runs)
    }

    @Test("the locked keyring's test bed: without a setting, the unlock prompt is requested")
    func lockedKeyringPromptsWithoutSetting() throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        let bed = try PromptTestBed(environment: keyring.environment, backend: "secret-service")
        let host = GitHarness.uniqueHost("locked")
        try bed.storeCredential(host: host)
        try keyring.lockLoginCollection()
        let prompts = try PromptCounter(keyring)
        let run = try bed.fill(host: host, git: .debian12, ruling: nil)
        // No prompter runs on the private bus, so the prompt fails and the keyring stays locked.
        #expect(prompts.count > 0, "\(run.terminal)")
        #expect(run.exitCode == 4)
        #expect(!run.terminal.contains("rules out"))
    }

    @Test(
        "a file store with no passphrase source, at a terminal: no prompt, nothing printed, exit 4 naming the setting",
        arguments: cases)
    func fileStoreWithoutPassphrase(git: RealGit, ruling: Ruling) throws {
        let bed = try PromptTestBed(environment: ProcessRunner.environment(), backend: "file")
        let host = GitHarness.uniqueHost("file")
        try bed.storeCredential(host: host)
        let runs = try bed.timedFills(host: host, git: git, ruling: ruling)
        for run in runs {
            #expect(!run.terminal.contains("Passphrase for"), "\(run.terminal)")
            #expect(run.exitCode == 4, "\(run.terminal)")
            #expect(run.stdout.isEmpty)
            #expect(
                run.terminal.contains(
                    "portal-token: error: no passphrase for the encrypted file store \(bed.storePath), and \(ruling) "
                        + "rules out asking for it"),
                "\(run.terminal)")
        }
        Self.expectPrompt(runs)
    }

    @Test("the file store's test bed: without a setting, the passphrase is asked for on the terminal")
    func fileStorePromptsWithoutSetting() throws {
        let bed = try PromptTestBed(environment: ProcessRunner.environment(), backend: "file")
        let host = GitHarness.uniqueHost("file")
        try bed.storeCredential(host: host)
        let run = try bed.fill(host: host, git: .debian12, ruling: nil, answerPrompt: "Passphrase for")
        #expect(run.terminal.contains("Passphrase for the portal-token store \(bed.storePath): "))
        // Asked again after each of the first two wrong ones, then exit 4.
        #expect(run.terminal.components(separatedBy: "Wrong passphrase; try again.").count == 3, "\(run.terminal)")
        #expect(run.terminal.contains("3 wrong passphrases were typed; the file was left as it is"), "\(run.terminal)")
        #expect(run.exitCode == 4, "a wrong passphrase: \(run.terminal)")
    }

    @Test("a keyring hit at a terminal asks no question, and asks git nothing either")
    func keyringHitAsksNothing() throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        let bed = try PromptTestBed(environment: keyring.environment, backend: "secret-service")
        let host = GitHarness.uniqueHost("hit")
        try bed.storeCredential(host: host)
        let prompts = try PromptCounter(keyring)
        let run = try bed.fill(host: host, git: .current, ruling: nil)
        #expect(run.exitCode == 0, "\(run.terminal)")
        #expect(run.stdout.contains("password=p\n"))
        #expect(prompts.count == 0, "\(prompts.calls)")
        #expect(bed.gitCalls.isEmpty, "\(bed.gitCalls)")
    }

    @Test("credential.<url>.interactive in git's configuration rules prompts out for that URL only")
    func urlScopedConfiguration() throws {
        let bed = try PromptTestBed(environment: ProcessRunner.environment(), backend: "file")
        let host = GitHarness.uniqueHost("scoped"), other = GitHarness.uniqueHost("other")
        try bed.storeCredential(host: host)
        try bed.setGitConfiguration("[credential \"https://\(host)\"]\n\tinteractive = false\n")
        let runs = try bed.timedFills(host: host, git: .current, ruling: nil)
        for run in runs {
            #expect(run.exitCode == 4, "\(run.terminal)")
            #expect(!run.terminal.contains("Passphrase for"), "\(run.terminal)")
            #expect(
                run.terminal.contains("and credential.interactive=false rules out asking for it"), "\(run.terminal)")
        }
        // Asked once per run, for the request's URL.
        #expect(bed.gitCalls == runs.map { _ in "config --get-urlmatch credential.interactive https://\(host)" })
        Self.expectPrompt(runs)

        let elsewhere = try bed.fill(host: other, git: .current, ruling: nil, answerPrompt: "Passphrase for")
        #expect(elsewhere.terminal.contains("Passphrase for the portal-token store"))
    }

    @Test("a signed-out Portal host: no prompt, no browser, no request, nothing printed, exit 0", arguments: cases)
    func signedOutPortalHost(git: RealGit, ruling: Ruling) throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        let server = try FakePortalServer()
        defer { server.stop() }
        var environment = keyring.environment
        environment["PORTAL_AUTH_ENVIRONMENT_ID"] = "env-\(UInt32.random(in: 0...UInt32.max))"
        environment["PORTAL_API_HOST"] = "127.0.0.1:\(server.port)"
        let bed = try PromptTestBed(environment: environment, backend: "secret-service", display: true)
        let prompts = try PromptCounter(keyring)
        let runs = try bed.timedFills(
            host: "127.0.0.1:\(server.port)", protocolName: "http", git: git, ruling: ruling)
        #expect(prompts.count == 0, "\(prompts.calls)")
        #expect(!bed.browserOpened)
        #expect(server.requests.isEmpty, "\(server.requests)")
        for run in runs {
            #expect(run.exitCode == 0, "\(run.terminal)")
            #expect(run.stdout.isEmpty)
            #expect(!run.terminal.contains("portal-token:"), "\(run.terminal)")
        }
        Self.expectPrompt(runs)
    }
}

/// What the helper did under git: its own stdout, exit code and time, and the whole terminal.
struct HelperRun {
    var exitCode: Int32
    var stdout: String
    var duration: Double
    var terminal: String
}

/// git, a wrapper around portal-token as its only credential helper, a store, and (with
/// `display`) a desktop whose `xdg-open` records any call.
final class PromptTestBed {
    let directory: URL
    let backend: String
    var environment: [String: String]

    init(environment base: [String: String], backend: String, display: Bool = false) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "portal-token-prompts-\(UUID().uuidString)")
        self.backend = backend
        let bin = directory.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        let home = directory.appendingPathComponent("home")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        // The helper: portal-token, its stdout and exit code kept, its time measured around it,
        // and every git it runs recorded.
        let shim = directory.appendingPathComponent("shim")
        try FileManager.default.createDirectory(at: shim, withIntermediateDirectories: true)
        try writeExecutableScript(
            """
            #!/bin/sh
            echo "$*" >> '\(directory.path)/git-calls'
            exec /usr/bin/git "$@"
            """, to: shim.appendingPathComponent("git"))
        try writeExecutableScript(
            """
            #!/bin/sh
            start=$(date +%s%N)
            PATH='\(shim.path)':"$PATH" '\(Self.binary)' "$@" > '\(directory.path)/out'
            code=$?
            end=$(date +%s%N)
            echo "$code $((end - start))" > '\(directory.path)/result'
            cat '\(directory.path)/out'
            exit $code
            """, to: bin.appendingPathComponent("helper"))
        // git's own fallback asks here rather than on the terminal, so git never waits either.
        try writeExecutableScript("#!/bin/sh\necho askpass-answer\n", to: bin.appendingPathComponent("askpass"))
        try writeExecutableScript(
            "#!/bin/sh\necho \"$@\" >> '\(directory.path)/browser'\n", to: bin.appendingPathComponent("xdg-open"))
        environment = base
        environment["PATH"] = bin.path + ":" + (base["PATH"] ?? "/usr/bin:/bin")
        environment["PORTAL_TOKEN_BACKEND"] = backend
        environment["PORTAL_TOKEN_FILE"] = directory.appendingPathComponent("store").path
        environment["PORTAL_TOKEN_KEY_CACHE_TIMEOUT"] = "0"
        environment["GIT_ASKPASS"] = bin.appendingPathComponent("askpass").path
        environment["GIT_CONFIG_NOSYSTEM"] = "1"
        environment["GIT_CONFIG_GLOBAL"] = home.appendingPathComponent(".gitconfig").path
        environment["HOME"] = base["HOME"] ?? home.path
        for name in [
            "GIT_TERMINAL_PROMPT", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "PORTAL_TOKEN_PASSPHRASE",
            "PORTAL_TOKEN_PASSPHRASE_FILE", "CREDENTIALS_DIRECTORY", "DISPLAY", "WAYLAND_DISPLAY",
        ] {
            environment[name] = nil
        }
        if display { environment["DISPLAY"] = ":97" }
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// The helper's binary: the release one when the test script built it, else the one beside
    /// the tests.
    static var binary: String {
        ProcessInfo.processInfo.environment["PORTAL_TOKEN_RELEASE_BIN"].flatMap { $0.isEmpty ? nil : $0 }
            ?? ProcessRunner.portalTokenPath
    }

    var storePath: String { directory.appendingPathComponent("store").path }

    var browserOpened: Bool { FileManager.default.fileExists(atPath: directory.appendingPathComponent("browser").path) }

    /// The git commands portal-token ran, one line each.
    var gitCalls: [String] {
        ((try? String(contentsOf: directory.appendingPathComponent("git-calls"), encoding: .utf8)) ?? "")
            .split(separator: "\n").map(String.init)
    }

    /// Writes the user's global git configuration.
    func setGitConfiguration(_ text: String) throws {
        try text.write(toFile: environment["GIT_CONFIG_GLOBAL"]!, atomically: false, encoding: .utf8)
    }

    /// Stores a credential for `host`, with a passphrase for the file store.
    func storeCredential(host: String) throws {
        var environment = self.environment
        environment["PORTAL_TOKEN_PASSPHRASE"] = "the store's passphrase"
        let stored = try ProcessRunner.portalToken(
            ["store"], stdin: "protocol=https\nhost=\(host)\nusername=u\npassword=p\n", environment: environment)
        guard stored.exitCode == 0 else { throw BedFailure("store failed: \(stored.stderr)") }
    }

    /// `fill` again while it took longer than `NonInteractiveTests.bound`, three runs at most.
    func timedFills(
        host: String, protocolName: String = "https", git: RealGit, ruling: NonInteractiveTests.Ruling?
    ) throws -> [HelperRun] {
        var runs: [HelperRun] = []
        repeat {
            runs.append(try fill(host: host, protocolName: protocolName, git: git, ruling: ruling))
        } while runs.count < 3 && runs.last!.duration >= NonInteractiveTests.bound
        return runs
    }

    /// `git credential fill` for `host` on a terminal, the request typed there, with `ruling`
    /// in force (none: prompts allowed). With `answerPrompt`, a wrong answer is typed each of the
    /// three times the terminal shows it.
    func fill(
        host: String, protocolName: String = "https", git: RealGit, ruling: NonInteractiveTests.Ruling?,
        answerPrompt: String? = nil
    ) throws -> HelperRun {
        var environment = self.environment
        var arguments = ["-c", "credential.helper=!" + directory.appendingPathComponent("bin/helper").path]
        switch ruling {
        case .credentialInteractive: arguments += ["-c", "credential.interactive=never"]
        case .terminalPrompt: environment["GIT_TERMINAL_PROMPT"] = "0"
        case nil: break
        }
        for name in ["result", "out"] {
            try? FileManager.default.removeItem(at: directory.appendingPathComponent(name))
        }
        let terminal = try TerminalProcess(
            try git.executable(), arguments + ["credential", "fill"], environment: environment)
        terminal.type("protocol=\(protocolName)\nhost=\(host)\n\n")
        if let answerPrompt {
            // A person is asked three times before a wrong passphrase is an error.
            for attempt in 1...3 {
                try terminal.waitFor(answerPrompt, occurrences: attempt)
                terminal.type("not the passphrase\n")
            }
        }
        _ = try terminal.finish(timeout: 30)
        let result = ((try? String(contentsOf: directory.appendingPathComponent("result"), encoding: .utf8)) ?? "")
            .split(separator: " ")
        guard result.count == 2, let code = Int32(result[0]), let nanoseconds = Double(result[1].filter(\.isNumber))
        else {
            throw BedFailure("the helper did not run: \(terminal.text)")
        }
        let stdout = (try? String(contentsOf: directory.appendingPathComponent("out"), encoding: .utf8)) ?? ""
        return HelperRun(exitCode: code, stdout: stdout, duration: nanoseconds / 1e9, terminal: terminal.text)
    }
}

/// The keyring's prompts, counted on its bus: every call on a prompt object, which is how a
/// client asks for an unlock prompt to be shown. `Unlock` calls are seen too, and counted apart:
/// asking `Unlock` shows nothing by itself (a locked collection is asked first, and the prompt it
/// answers with is run only where a prompt is allowed: docs/storage.md, "Providers").
final class PromptCounter {
    private let monitor: RunningProcess

    init(_ keyring: PrivateKeyring) throws {
        monitor = try RunningProcess(
            "/usr/bin/dbus-monitor",
            [
                "--address", keyring.busAddress,
                "type='method_call',interface='org.freedesktop.Secret.Service',member='Unlock'",
                "type='method_call',interface='org.freedesktop.Secret.Prompt'",
            ], environment: keyring.environment)
        // dbus-monitor has become a monitor once the bus took its name back.
        let deadline = ProcessRunner.monotonicSeconds() + 10
        while !monitor.stdout.contains("member=NameLost") {
            guard ProcessRunner.monotonicSeconds() < deadline else {
                throw BedFailure("dbus-monitor did not start: \(monitor.stderr)")
            }
            usleep(10_000)
        }
    }

    deinit { monitor.signal(SIGTERM) }

    var calls: [String] {
        monitor.stdout.split(separator: "\n").filter { $0.hasPrefix("method call") }.map(String.init)
    }

    /// The prompts run, read after a short settle, so a call still on its way is counted.
    var count: Int {
        usleep(200_000)
        return calls.filter { $0.contains("interface=org.freedesktop.Secret.Prompt;") }.count
    }

    /// The `Unlock` calls, read the same way.
    var unlockCalls: Int {
        usleep(200_000)
        return calls.filter { $0.contains("member=Unlock") }.count
    }
}

struct BedFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// `doctor` on the file backend looks past the terminal it runs at: a passphrase that only a
/// prompt can give fails every caller without one (docs/storage.md, "The encrypted file").
@Suite("doctor and unattended callers")
struct DoctorUnattendedTests {
    @Test("doctor at a terminal calls a file store whose passphrase only a prompt gives a problem")
    func promptOnlyPassphrase() throws {
        let bed = try PromptTestBed(environment: ProcessRunner.environment(), backend: "file")
        try bed.storeCredential(host: GitHarness.uniqueHost("doctor"))
        let terminal = try TerminalProcess(ProcessRunner.portalTokenPath, ["doctor"], environment: bed.environment)
        let code = try terminal.finish(timeout: 30)
        let text = terminal.text
        #expect(code == 1, "\(text)")
        #expect(
            text.contains("problem encrypted file: \(bed.storePath), owner uid"), "\(text)")
        #expect(text.contains("passphrase source: a prompt on the terminal only"), "\(text)")
        #expect(
            text.contains(
                "hint: callers with no terminal (git maintenance, cron, systemd units) cannot be asked: set "
                    + "PORTAL_TOKEN_PASSPHRASE_FILE"), "\(text)")
        #expect(text.contains("ok      prompts: allowed: a terminal is here and no setting rules them out"), "\(text)")

        var environment = bed.environment
        environment["PORTAL_TOKEN_PASSPHRASE_FILE"] = bed.directory.appendingPathComponent("passphrase").path
        try "the store's passphrase\n".write(
            toFile: environment["PORTAL_TOKEN_PASSPHRASE_FILE"]!, atomically: false, encoding: .utf8)
        chmod(environment["PORTAL_TOKEN_PASSPHRASE_FILE"]!, 0o600)
        let unattended = try TerminalProcess(ProcessRunner.portalTokenPath, ["doctor"], environment: environment)
        _ = try unattended.finish(timeout: 30)
        #expect(unattended.text.contains("ok      encrypted file: \(bed.storePath), owner uid"), "\(unattended.text)")
    }
}

/// A sign-in run by a caller that rules prompts out opens no browser and asks for no code
/// (docs/settings.md, "Non-interactive callers").
@Suite("sign-in for non-interactive callers")
struct NonInteractiveSignInTests {
    @Test(
        "login --google with a display opens no browser under GIT_TERMINAL_PROMPT=0, says so and shows the address")
    func noBrowser() throws {
        let harness = try SignInHarness(backend: .file, extraEnvironment: ["DISPLAY": ":99"])
        let login = try harness.start(["login", "--google", "--timeout", "30"], ["GIT_TERMINAL_PROMPT": "0"])
        let stderr = try login.waitForStderr(containing: "waiting for the browser")
        #expect(stderr.contains("portal-token: GIT_TERMINAL_PROMPT=0 rules out opening a browser\n"), "\(stderr)")
        let url = try #require(stderr.split(separator: "\n").first { $0.hasPrefix("http://") })
        #expect(harness.launched("xdg-open").isEmpty)
        #expect(try SimulatedBrowser.get(try SimulatedBrowser.followProvider(String(url))).status == 200)
        #expect(try login.finish().exitCode == 0)
        #expect(harness.launched("xdg-open").isEmpty)
    }

    @Test("a two-factor step at a terminal waits for verify-totp CODE under credential.interactive=never")
    func noCodePrompt() throws {
        let harness = try SignInHarness(
            backend: .file, redirectURL: "portalexample://auth/callback",
            endUser: .init(id: "end-user-2fa", totpCode: "246810", enrolling: true))
        let never = ["GIT_CONFIG_PARAMETERS": "'credential.interactive'='never'"]
        let grant = harness.auth.issueGrant(method: .emailMagicLink)
        let redirect = try harness.startOnTerminal(
            ["redirect", FakeClientAuth.redirect(harness.redirectURL, grant: grant, method: .emailMagicLink)], never)
        #expect(try redirect.finish() == 0, "\(redirect.text)")
        #expect(!redirect.text.contains("Two-factor code for"), "\(redirect.text)")
        #expect(!redirect.text.contains("scan this code"), "\(redirect.text)")
        #expect(redirect.text.contains("end-user-2fa needs a two-factor code to finish signing in"), "\(redirect.text)")

        let asked = try harness.startOnTerminal(["verify-totp"], never)
        #expect(try asked.finish() == 2, "\(asked.text)")
        #expect(
            asked.text.contains(
                "portal-token: error: no two-factor code given, and credential.interactive=never rules out "
                    + "asking for it"), "\(asked.text)")
        #expect(try harness.run(["verify-totp", "246810"], never).exitCode == 0)
        #expect(try harness.run(["get"]).stdout == (harness.auth.issuedTokens.first ?? "?") + "\n")
    }
}
