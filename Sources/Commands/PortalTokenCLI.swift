import Basics
import Glibc
import Operations
import PortalTokenCore

/// The entry point: reads the arguments, runs one command, and is the one error funnel that
/// prints `portal-token: error: …` / `hint: …` and picks the exit code (docs/exit-codes.md, "Error messages").
public enum PortalTokenCLI {

    /// Every subcommand, in the order `--help` lists them.
    static let commands: [any Command.Type] = [
        GetCommand.self, StoreCommand.self, EraseCommand.self, CapabilityCommand.self,
        TokenCommand.self, ExecCommand.self, ExecCredentialCommand.self,
        ListCommand.self, SetupGitCommand.self, DoctorCommand.self,
        MethodsCommand.self, LoginCommand.self, RedirectCommand.self, VerifyTOTPCommand.self,
        StatusCommand.self, AccountsCommand.self, RefreshCommand.self, APICommand.self, ProxyCommand.self,
        LogoutCommand.self,
        MigrateCommand.self, FileKeyCommand.self, DelegateCommand.self, DelegationsCommand.self, ApproveCommand.self,
        LockCommand.self,
        UnlockCommand.self, AuditCommand.self,
        AgentCommand.self,
        VersionCommand.self,
    ]

    /// The name under which git finds the binary as a credential helper.
    static let gitHelperName = "git-credential-portal-token"

    /// Runs the command the arguments name with `services`, once the composition root has set
    /// the process up; returns the exit status.
    public static func main(arguments: [String], services: Services) -> Int32 {
        let streams = StandardStreams()
        let programPath = arguments.first ?? "portal-token"
        let programName = String(programPath.split(separator: "/").last ?? "portal-token")
        let isGitHelper = programName == gitHelperName
        let environment = ProcessEnvironment.current()
        // The passphrase stays in this process: no child (a hook, a browser) inherits it.
        unsetenv(PassphraseSource.environmentVariable)
        if programName == DockerCredentialHelper.programName {
            return DockerCredentialHelper.main(
                Array(arguments.dropFirst()), streams: streams, environment: environment, services: services)
        }
        return execute(
            Array(arguments.dropFirst()), isGitHelper: isGitHelper, streams: streams,
            environment: environment, services: services)
    }

    /// One command, run in this process with the given streams, environment and services, through
    /// the error funnel: what `main` does once the process is set up, and what the in-process
    /// tests drive with fakes.
    static func execute(
        _ arguments: [String], isGitHelper: Bool = false, streams: StandardStreams,
        environment: [String: String], services: Services
    ) -> Int32 {
        let invocation = Invocation()
        do {
            try run(
                arguments, isGitHelper: isGitHelper, streams: streams, environment: environment, services: services,
                invocation: invocation)
            invocation.context?.recordAudit(error: nil, exitCode: ExitCode.success.rawValue)
            return ExitCode.success.rawValue
        } catch let exit as SilentExit {
            invocation.context?.recordAudit(error: exit, exitCode: exit.code.rawValue)
            return exit.code.rawValue
        } catch {
            // The audit line first, so the error and its hint are the last lines the user sees.
            invocation.context?.recordAudit(error: error, exitCode: CLIError(error).exitCode.rawValue)
            return report(error, streams: streams).exitCode.rawValue
        }
    }

    /// What the funnel needs of a run once it ends: its context, once there is one, to write the
    /// audit line from the outcome (docs/audit.md, "When a line is written").
    final class Invocation {
        var context: Context?
    }

    /// The one place an error becomes `portal-token: error: …` and `hint: …` on stderr, and an
    /// exit code.
    @discardableResult
    public static func report(_ error: any Error, streams: StandardStreams) -> CLIError {
        let failure = CLIError(error)
        streams.printError("portal-token: error: \(failure.message)")
        if let hint = failure.hint { streams.printError("hint: \(hint)") }
        return failure
    }

    static func run(
        _ arguments: [String], isGitHelper: Bool, streams: StandardStreams,
        environment: [String: String], services: Services, invocation: Invocation
    ) throws {
        var global = ParsedArguments(command: nil)
        let commandLine = try global.readGlobal(arguments[...])
        if global.has(.version) { return streams.print(VersionCommand.line) }
        guard let (word, rest) = commandLine else {
            if global.wantsHelp { return streams.print(overview) }
            if isGitHelper { return }
            streams.write(Array(overview.utf8), to: streams.error)
            throw CLIError.usage("no command given", hint: "see 'portal-token --help'")
        }
        if global.wantsHelp || word == "help" {
            let topic = global.wantsHelp ? word : rest.first
            streams.print(topic.flatMap(command(named:))?.helpText ?? overview)
            return
        }
        guard let commandType = command(named: word), let spec = commandType.spec else {
            // git requires helpers to ignore operations they do not know (gitcredentials(7)).
            if isGitHelper { return }
            throw CLIError.usage(
                "'\(word.prefix(64))' is not a portal-token command",
                hint: Suggestion.hint(for: word, among: commands.map { $0.name }, command: nil))
        }
        var parsed = ParsedArguments(command: spec)
        try parsed.readCommand(rest)
        if parsed.wantsHelp { return streams.print(commandType.helpText) }
        // The command's own error explains a stray word better than "unexpected argument" would
        // (`login someone@example.com` is "choose how to sign in").
        let command = try commandType.init(arguments: parsed)
        try parsed.checkOperandCount()
        // The version is printed whatever the settings hold, as --version is.
        if commandType == VersionCommand.self { return streams.print(VersionCommand.line) }
        let flags = global.settingFlags.merging(parsed.settingFlags) { $1 }
        var settings: Settings
        var settingsError: (any Error)?
        do {
            settings = try Settings.load(flags: flags, environment: environment)
            // A wrong value of a setting every command reads is reported before anything happens;
            // those only the Portal session reads are checked where it is used.
            if commandType != DoctorCommand.self { try settings.checkValues() }
        } catch  where commandType == DoctorCommand.self {
            // doctor reports a broken config file as one of its checks, and goes on without it.
            settings = Settings(flags: flags, environment: environment)
            settingsError = error
        }
        let context = Context(
            streams: streams, environment: environment, settings: settings,
            programName: isGitHelper ? gitHelperName : "portal-token", services: services)
        context.settingsError = settingsError
        context.audit = commandType.auditOperation.map(AuditDraft.init)
        invocation.context = context
        if commandType.isRefusedInClientMode, let agent = try context.agent() {
            throw CLIError(
                "\(commandType.name) is not served through the agent at \(agent.socketPath)",
                hint: "run it on the agent's host, or unset PORTAL_TOKEN_AGENT_SOCK", exitCode: .storage)
        }
        do {
            try command.run(in: context)
        } catch let error as StoreError {
            throw context.namingTheProvider(error)
        }
    }

    static func command(named name: String) -> (any Command.Type)? {
        commands.first { $0.name == name }
    }

    static var overview: String {
        var text = """
            usage: portal-token [GLOBAL OPTIONS] COMMAND [OPTIONS]

            Keeps Portal Client Session Tokens and other credentials in the desktop keyring,
            or where there is none in an encrypted file, and answers git's credential protocol.

            Commands:

            """
        let width = OptionTable.commands.map { $0.name.count }.max() ?? 0
        for command in OptionTable.commands {
            text +=
                "  " + command.name + String(repeating: " ", count: width - command.name.count + 3)
                + command.summary + "\n"
        }
        text += """

            Global options (before the command; after it too, except for exec):

            """
        text += OptionTable.globalOptionsText + "\n\n" + OptionTable.exitCodesText + "\n\n"
        text += """
            In scripts: TOKEN=$(portal-token token), or portal-token exec -- COMMAND.
            As a git credential helper: portal-token setup-git
            The encrypted file's passphrase comes from PORTAL_TOKEN_PASSPHRASE_FILE,
            PORTAL_TOKEN_PASSPHRASE, the systemd credential portal-token.passphrase, or a
            prompt on the terminal; PORTAL_TOKEN_FILE_TPM=on seals its key to this
            machine's TPM, the passphrase kept for recovery. Something wrong? portal-token doctor
            The whole manual: man portal-token
            """
        return text
    }
}

/// `portal-token version`, the same line as `--version` (as `gh version` and `git version` are).
struct VersionCommand: Command {
    static let name = "version"
    static let summary = "Print portal-token's version"
    static let details = """
        The same line as portal-token --version: the name and the version. It reads no
        setting, so it prints that line whatever the config file holds.
        """
    static var line: String { "portal-token \(Release.version)" }

    init(arguments: ParsedArguments) throws(CLIError) {}

    /// The dispatcher prints the line itself, before reading any setting; this serves a direct call.
    func run(in context: Context) throws { context.streams.print(Self.line) }
}
