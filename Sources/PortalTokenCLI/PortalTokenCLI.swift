import Glibc
import PortalTokenCore

/// The entry point: reads the arguments, runs one command, and is the one error funnel that
/// prints `portal-token: error: …` / `hint: …` and picks the exit code (product contract §4).
public enum PortalTokenCLI {
    public static let version = "0.1.0"

    /// Every subcommand, in the order `--help` lists them.
    static let commands: [any Command.Type] = [
        GetCommand.self, StoreCommand.self, EraseCommand.self,
        MethodsCommand.self, LoginCommand.self, RedirectCommand.self, VerifyTOTPCommand.self,
        StatusCommand.self, RefreshCommand.self, APICommand.self, LogoutCommand.self, MigrateCommand.self,
    ]

    /// The name under which git finds the binary as a credential helper.
    static let gitHelperName = "git-credential-portal-token"

    public static func main(arguments: [String]) -> Int32 {
        let streams = StandardStreams()
        let programPath = arguments.first ?? "portal-token"
        let programName = String(programPath.split(separator: "/").last ?? "portal-token")
        let isGitHelper = programName == gitHelperName
        do {
            try run(Array(arguments.dropFirst()), isGitHelper: isGitHelper, streams: streams)
            return ExitCode.success.rawValue
        } catch let exit as SilentExit {
            return exit.code.rawValue
        } catch {
            let failure = CLIError(error)
            streams.printError("portal-token: error: \(failure.message)")
            if let hint = failure.hint { streams.printError("hint: \(hint)") }
            return failure.exitCode.rawValue
        }
    }

    static func run(_ arguments: [String], isGitHelper: Bool, streams: StandardStreams) throws {
        var reader = ArgumentReader(arguments)
        try reader.extractSettingFlags()
        guard let word = reader.next() else {
            if isGitHelper { return }
            streams.write(Array(overview.utf8), to: streams.error)
            throw CLIError.usage("no command given", hint: "see 'portal-token --help'")
        }
        switch word {
        case "--help", "-h", "help":
            if let topic = reader.next(), let command = command(named: topic) {
                streams.print(command.helpText)
            } else {
                streams.print(overview)
            }
            return
        case "--version", "-V":
            streams.print("portal-token \(version)")
            return
        default:
            break
        }
        guard let commandType = command(named: word) else {
            // git requires helpers to ignore operations they do not know (gitcredentials(7)).
            if isGitHelper { return }
            throw CLIError.usage("'\(word.prefix(64))' is not a portal-token command", hint: "see 'portal-token --help'")
        }
        if reader.flag("help") || reader.flag("h") {
            streams.print(commandType.helpText)
            return
        }
        let command = try commandType.init(arguments: &reader)
        try reader.finish(command: word)
        let environment = ProcessEnvironment.current()
        // The passphrase stays in this process: no child (a hook, a browser) inherits it.
        unsetenv(PassphraseSource.environmentVariable)
        let settings = try loadSettings(flags: reader.settingFlags, environment: environment)
        let context = Context(streams: streams, environment: environment, settings: settings,
                              programName: isGitHelper ? gitHelperName : "portal-token")
        try command.run(in: context)
    }

    static func command(named name: String) -> (any Command.Type)? {
        commands.first { $0.name == name }
    }

    /// Settings from the flags, the environment and the config file (product contract §2).
    static func loadSettings(flags: [String: String], environment: [String: String]) throws -> Settings {
        let explicitPath = flags["config"] ?? environment["PORTAL_TOKEN_CONFIG"].flatMap { $0.isEmpty ? nil : $0 }
        let configHome: String
        if let value = environment["XDG_CONFIG_HOME"], value.hasPrefix("/") {
            configHome = value
        } else {
            configHome = (environment["HOME"] ?? "") + "/.config"
        }
        let path = explicitPath ?? configHome + "/portal-token/config"
        var values: [String: String] = [:]
        do {
            let bytes = try FileReading.contents(of: path)
            values = try Settings.parseConfigFile(String(decoding: bytes, as: UTF8.self), path: path)
        } catch FileReading.Failure.missing where explicitPath == nil {
            // No config file is the ordinary case.
        } catch let failure as FileReading.Failure {
            throw CLIError.usage("cannot read the config file \(path): \(describe(failure))")
        }
        return Settings(flags: flags, environment: environment, configFile: values, configPath: path)
    }

    static func describe(_ failure: FileReading.Failure) -> String {
        switch failure {
        case .missing: return "no such file"
        case .tooLarge: return "larger than 1 MiB"
        case .unreadable(let number): return String(cString: strerror(number))
        }
    }

    static var overview: String {
        var text = """
            usage: portal-token [--backend auto|secret-service|file] [--config PATH] COMMAND [OPTIONS]

            Keeps credentials in the desktop keyring, or where there is none in an encrypted
            file, and answers git's credential protocol.

            Commands:

            """
        let width = commands.map { $0.name.count }.max() ?? 0
        for command in commands {
            text += "  " + command.name + String(repeating: " ", count: width - command.name.count + 3)
                + command.summary + "\n"
        }
        text += """

            Run 'portal-token COMMAND --help' for a command's options.
            As a git credential helper: git config --global credential.helper portal-token
            The encrypted file's passphrase comes from PORTAL_TOKEN_PASSPHRASE_FILE,
            PORTAL_TOKEN_PASSPHRASE, the systemd credential portal-token.passphrase, or a
            prompt on the terminal.
            """
        return text
    }
}
