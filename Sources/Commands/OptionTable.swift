import Operations
import PortalTokenCore

/// The one table of commands and their options: the parser reads each command's arguments
/// against it, commands read what it parsed by the options declared here, `--help` prints it,
/// and `portal-token-docgen` writes the shell completions and the man page's OPTIONS section from
/// it. The settings flags come from the settings' own declaration (`Setting.flagged`), the exit
/// codes from `ExitCode`.
public struct OptionSpec: Sendable {
    /// How the shells complete the option's value.
    public enum Completion: Sendable, Equatable {
        /// Any text; nothing to offer.
        case text
        /// The listed words.
        case words([String])
        /// A file name.
        case file
        /// A request body: JSON, `@FILE` or `@-`.
        case body
    }

    /// Without its dashes.
    public let long: String
    /// One letter, without its dash.
    public let short: String?
    /// The value's name in usage text; nil for a flag that takes no value.
    public let valueName: String?
    public let completion: Completion
    /// The help of a command's own option; a settings flag's is made from its setting when shown.
    private let ownHelp: String
    /// Options that cannot be given with this one (by long name).
    public let excludes: [String]
    public let repeatable: Bool
    /// The setting a settings flag gives; nil for a command's own option.
    public let setting: Setting?

    init(
        _ long: String, short: String? = nil, value: String? = nil, completion: Completion = .text,
        excludes: [String] = [], repeatable: Bool = false, help: String
    ) {
        self.long = long
        self.short = short
        self.valueName = value
        self.completion = completion
        ownHelp = help
        self.excludes = excludes
        self.repeatable = repeatable
        self.setting = nil
    }

    /// A settings flag, as its setting declares it; the help names the environment variable and
    /// the default.
    init(_ setting: Setting) {
        let flag = setting.option!
        long = flag.name
        short = nil
        valueName = flag.value
        completion = flag.isFile ? .file : flag.words.isEmpty ? .text : .words(flag.words)
        ownHelp = ""
        excludes = []
        repeatable = false
        self.setting = setting
    }

    /// A settings flag's help names its environment variable and default. Made when shown, not
    /// with the table, which every run builds.
    public var help: String {
        guard let setting, let flag = setting.option else { return ownHelp }
        switch (setting.environment, flag.defaultValue) {
        case (let variable?, let defaultValue?): return flag.help + " (" + variable + "; " + defaultValue + ")"
        case (let variable?, nil): return flag.help + " (" + variable + ")"
        case (nil, let defaultValue?): return flag.help + " (" + defaultValue + ")"
        case (nil, nil): return flag.help
        }
    }

    /// The same option with other help, for a command on which it means something more.
    func described(_ help: String) -> OptionSpec {
        OptionSpec(
            long, short: short, value: valueName, completion: completion, excludes: excludes, repeatable: repeatable,
            help: help)
    }

    public var takesValue: Bool { valueName != nil }
    /// `--long` and `-s`, as typed.
    public var spellings: [String] { ["--" + long] + (short.map { ["-" + $0] } ?? []) }
    /// The words offered for the value, when there is a fixed list.
    public var words: [String] {
        if case .words(let words) = completion { return words }
        return []
    }
}

public struct PositionalSpec: Sendable {
    public enum Completion: Sendable, Equatable {
        case text
        case words([String])
        /// A command name of portal-token.
        case subcommand
        /// A program to run and its arguments.
        case program
    }

    public let name: String
    public let optional: Bool
    public let completion: Completion
    public let help: String

    init(_ name: String, optional: Bool = false, completion: Completion = .text, help: String) {
        self.name = name
        self.optional = optional
        self.completion = completion
        self.help = help
    }
}

public struct CommandSpec: Sendable {
    public let name: String
    public let summary: String
    public let positionals: [PositionalSpec]
    public let options: [OptionSpec]
    /// Usage lines written out, for a command whose forms the options alone do not show (one
    /// that reads stdin, or whose options exclude one another).
    let forms: [String]?
    /// Whether a word typed in the wrong place may be a secret whatever it looks like (a command
    /// about passphrases): a stray operand is then never echoed.
    let takesSecrets: Bool

    init(
        _ name: String, _ summary: String, positionals: [PositionalSpec] = [], options: [OptionSpec] = [],
        usage forms: [String]? = nil, takesSecrets: Bool = false
    ) {
        self.name = name
        self.summary = summary
        self.positionals = positionals
        self.options = options
        self.forms = forms
        self.takesSecrets = takesSecrets
    }

    /// The usage line(s), without the leading "usage: ": as written, else each option in
    /// brackets, then the operands.
    public var usage: String { usageLines.joined(separator: "\n       ") }

    /// One line per form of the command, each starting with "portal-token".
    public var usageLines: [String] {
        forms ?? [
            (["portal-token", name]
                + options.map { "[--" + $0.long + ($0.valueName.map { " " + $0 } ?? "") + "]" }
                + positionals.map { $0.optional ? "[\($0.name)]" : $0.name }).joined(separator: " ")
        ]
    }

    /// The command's prose, which its help prints after the options and the man page's COMMANDS
    /// entry after its summary.
    public var details: String { PortalTokenCLI.commands.first { $0.name == name }?.details ?? "" }

    /// The "Options:" block of the command's help; empty when it takes none.
    var optionsText: String {
        guard !options.isEmpty else { return "" }
        let rows = options.map { option in
            (
                (option.short.map { "-\($0), " } ?? "") + "--" + option.long
                    + (option.valueName.map { " " + $0 } ?? ""),
                option.help
            )
        }
        return "Options:\n" + OptionTable.columns(rows) + "\n"
    }

    /// Every spelling of every option, for "did you mean" and for telling an unknown option.
    public var optionNames: [String] { options.flatMap(\.spellings) }

    /// Whether the command runs a program named by its first operand, whose arguments follow.
    public var runsProgram: Bool { positionals.contains { $0.completion == .program } }
}

/// Every option of every command, declared once; commands read their values by these names.
extension OptionSpec {
    static let format = OptionSpec("format", value: "json", completion: .words(["json"]), help: "print JSON")
    static let since = OptionSpec(
        "since", value: "DURATION", completion: .words(["30m", "24h", "7d"]),
        help: "only the events of the last DURATION: 90s, 30m, 24h, 7d")
    static let tokenVar = OptionSpec(
        "token-var", value: "NAME", excludes: ["proxy"], help: "environment variable for the token")
    static let proxy = OptionSpec(
        "proxy", excludes: ["token-var"], help: "give COMMAND a proxy to the Portal API instead of the token")
    static let listen = OptionSpec(
        "listen", value: "127.0.0.1:PORT", excludes: ["socket"],
        help: "listen on this loopback port (default 127.0.0.1:0: any free port)")
    static let proxySocket = OptionSpec(
        "socket", value: "PATH", completion: .file, excludes: ["listen"], help: "listen on a Unix socket instead")
    static let allowPath = OptionSpec(
        "allow-path", value: "PREFIX", repeatable: true,
        help: "forward paths under PREFIX only (default /api/v3/clients/me)")
    static let allowMethod = OptionSpec(
        "allow-method", value: "METHOD", repeatable: true,
        help: "forward this method only (default GET, HEAD, POST, PUT, PATCH, DELETE)")
    static let ttl = OptionSpec(
        "ttl", value: "DURATION", completion: .words(["10m", "1h", "12h", "1d"]),
        help: "how long the credential lives: 90s, 30m, 12h, 7d")
    static let delegateMethod = OptionSpec(
        "allow", value: "METHOD", repeatable: true, help: "allow this method only (repeatable)")
    static let delegatePath = OptionSpec(
        "path", value: "PREFIX", repeatable: true,
        help: "allow this path only, or with /* what is below it (repeatable)")
    static let delegateCaller = OptionSpec(
        "caller", value: "CONDITION", repeatable: true,
        help: "only for a caller that meets this rules file condition, such as 'container docker:3f2a*'")
    static let uses = OptionSpec("uses", value: "N", help: "allow N requests, then refuse")
    static let from = OptionSpec(
        "from", value: "FILE", completion: .file, help: "narrow the credential in FILE (- for stdin), offline")
    static let revoke = OptionSpec(
        "revoke", value: "ID", repeatable: true, help: "revoke this credential and every one derived from it")
    static let unset = OptionSpec("unset", help: "remove portal-token from the global git config")
    static let network = OptionSpec("network", help: "also check that the Portal API answers")
    static let email = OptionSpec(
        "email", value: "ADDRESS", excludes: ["google", "apple", "with-token"],
        help: "sign in with a magic link sent to ADDRESS")
    static let google = OptionSpec("google", excludes: ["email", "apple", "with-token"], help: "sign in with Google")
    static let apple = OptionSpec("apple", excludes: ["email", "google", "with-token"], help: "sign in with Apple")
    static let noBrowser = OptionSpec(
        "no-browser", help: "do not open a browser; show the sign-in link to open elsewhere")
    static let timeout = OptionSpec("timeout", value: "SECONDS", help: "how long to wait for the sign-in, in seconds")
    static let withToken = OptionSpec(
        "with-token", excludes: ["email", "google", "apple"], help: "adopt a token from stdin, minted by your backend")
    static let dbusActivated = OptionSpec(
        String(DesktopRedirectHandler.activationOption.dropFirst(2)), excludes: ["URL"],
        help: "take the URL from the session bus (how the desktop handler starts it)")
    static let method = OptionSpec(
        "method", short: "X", value: "METHOD",
        completion: .words(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]),
        help: "HTTP method (GET, or POST with --data)")
    static let data = OptionSpec(
        "data", short: "d", value: "JSON", completion: .body, help: "request body: JSON, @FILE, or @- for stdin")
    static let header = OptionSpec(
        "header", short: "H", value: "'Name: value'", repeatable: true, help: "add a request header: 'Name: value'")
    static let migrateTo = OptionSpec(
        "to", value: "STORE", completion: .words(["secret-service", "file", "vault"]),
        help: "the store to move every item into")
    static let migrateFrom = OptionSpec(
        "from", value: "STORE", completion: .words(["secret-service", "file", "vault"]),
        help: "the store to move them from (default: the file; the keyring for --to file)")
    static let newPassphrase = OptionSpec(
        "new-passphrase", help: "also change the passphrase: type the new one twice at the terminal")
    static let newPassphraseFile = OptionSpec(
        "new-passphrase-file", value: "FILE", completion: .file, excludes: ["new-passphrase"],
        help: "also change the passphrase, to the one in FILE")

    static let agentSocketPath = OptionSpec(
        "socket", value: "PATH", completion: .file,
        help: "the main socket (default $XDG_RUNTIME_DIR/portal-token/agent.sock)")
    static let agentRestrictedSocketPath = OptionSpec(
        "restricted-socket", value: "PATH", completion: .file,
        help: "the read-only socket (default $XDG_RUNTIME_DIR/portal-token/agent-restricted.sock)")
    static let agentRules = OptionSpec(
        "rules", value: "PATH", completion: .file,
        help: "the rules file (default $XDG_CONFIG_HOME/portal-token/agent.rules)")
    static let checkRules = OptionSpec(
        "check-rules", excludes: ["idle-exit", "restricted-socket"],
        help: "check the rules file (FILE, else --rules or the default), and show for the agent's last "
            + "refusals what decides each and the rule that would admit it")
    static let checkedCaller = OptionSpec(
        "caller", value: "DESCRIPTION", excludes: ["idle-exit", "restricted-socket"],
        help: "with --check-rules: a caller to judge instead of the last refusals, as "
            + "'uid=N cgroup=PATH exe=PATH user-namespace=same|other flatpak-info socket=main|restricted'")
    static let checkedRequest = OptionSpec(
        "asks", value: "OPERATION", excludes: ["idle-exit", "restricted-socket"],
        help: "with --caller: what it asks, as a rule grants it: 'token ENV[/END_USER]', 'git-get HOST', "
            + "'docker-get REGISTRY', 'status', 'list', 'write' or 'proxy METHOD PATH' (default: token of "
            + "the configured environment)")
    static let forget = OptionSpec(
        "forget", excludes: ["idle-exit", "restricted-socket", "check-rules", "rules"],
        help: "make the agent on --socket (default the main socket) drop every answer to its questions it keeps")
    static let deny = OptionSpec("deny", help: "deny the question instead of allowing it")
    static let idleExit = OptionSpec(
        "idle-exit", value: "SECONDS", help: "stop once no client has been connected for SECONDS")

    /// What every invocation takes besides the settings flags.
    public static let help = OptionSpec(
        "help", short: "h", help: "this help; 'portal-token COMMAND --help' for a command")
    public static let version = OptionSpec("version", short: "V", help: "the version")
}

public enum OptionTable {
    /// Every command, in the order `--help` lists them (the summaries are those of the commands).
    public static let commands: [CommandSpec] = [
        CommandSpec(
            "get", GetCommand.summary, options: [.format.described("print the session token as JSON (script mode)")],
            usage: ["portal-token get [--format json] < request"]),
        CommandSpec("store", StoreCommand.summary, usage: ["portal-token store < credential"]),
        CommandSpec("erase", EraseCommand.summary, usage: ["portal-token erase < pattern"]),
        CommandSpec("capability", CapabilityCommand.summary),
        CommandSpec("token", TokenCommand.summary, options: [.format]),
        CommandSpec(
            "exec", ExecCommand.summary,
            positionals: [
                PositionalSpec("COMMAND", completion: .program, help: "the program to run, and its arguments")
            ],
            options: [
                .tokenVar, .proxy,
                .ttl.described("with --proxy: how long the child's credential lives (default 12h, at most 7d)"),
            ],
            usage: ["portal-token exec [--token-var NAME | --proxy [--ttl DURATION]] [--] COMMAND [ARG...]"]),
        CommandSpec("exec-credential", ExecCredentialCommand.summary),
        CommandSpec("list", ListCommand.summary, options: [.format]),
        CommandSpec("setup-git", SetupGitCommand.summary, options: [.unset]),
        CommandSpec("doctor", DoctorCommand.summary, options: [.format, .network]),
        CommandSpec("methods", MethodsCommand.summary, options: [.format]),
        CommandSpec(
            "login", LoginCommand.summary,
            options: [.email, .google, .apple, .noBrowser, .timeout, .withToken],
            usage: [
                "portal-token login [--email ADDRESS | --google | --apple] [--no-browser] [--timeout SECONDS]",
                "portal-token login --with-token [--end-user ID] < token",
            ]),
        CommandSpec(
            "redirect", RedirectCommand.summary,
            positionals: [PositionalSpec("URL", help: "redirect URL, or - to read it from stdin")],
            options: [.dbusActivated],
            usage: [
                "portal-token redirect URL", "portal-token redirect - < url",
                "portal-token redirect --dbus-activated",
            ]),
        CommandSpec(
            "verify-totp", VerifyTOTPCommand.summary,
            positionals: [PositionalSpec("CODE", optional: true, help: "two-factor code (prompted for when omitted)")]),
        CommandSpec("status", StatusCommand.summary, options: [.format]),
        CommandSpec(
            "accounts", AccountsCommand.summary,
            positionals: [
                PositionalSpec("use", optional: true, completion: .words(["use"]), help: "bind this directory"),
                PositionalSpec("ENV", optional: true, help: "auth environment ID"),
                PositionalSpec("END_USER", optional: true, help: "end user ID"),
            ],
            options: [.format, .unset.described("remove this directory's binding")],
            usage: ["portal-token accounts [--format json]", "portal-token accounts use ENV [END_USER] | --unset"]),
        CommandSpec("refresh", RefreshCommand.summary),
        CommandSpec(
            "api", APICommand.summary,
            positionals: [PositionalSpec("PATH", completion: .words(["/api/v3/clients/me"]), help: "API path")],
            options: [.method, .data, .header],
            usage: ["portal-token api [-X METHOD] PATH [--data JSON | --data @FILE] [-H 'Name: value']..."]),
        CommandSpec(
            "proxy", ProxyCommand.summary, options: [.listen, .proxySocket, .allowPath, .allowMethod],
            usage: [
                "portal-token proxy [--listen 127.0.0.1:PORT | --socket PATH] [--allow-path PREFIX]... "
                    + "[--allow-method METHOD]..."
            ]),
        CommandSpec("logout", LogoutCommand.summary),
        CommandSpec(
            "migrate", MigrateCommand.summary, options: [.migrateTo, .migrateFrom],
            usage: ["portal-token migrate --to secret-service|file|vault [--from secret-service|file|vault]"]),
        CommandSpec(
            "file-key", FileKeyCommand.summary, options: [.newPassphrase, .newPassphraseFile],
            usage: ["portal-token file-key [--new-passphrase | --new-passphrase-file FILE]"], takesSecrets: true),
        CommandSpec(
            "delegate", DelegateCommand.summary,
            options: [.ttl, .delegateMethod, .delegatePath, .delegateCaller, .uses, .from],
            usage: [
                "portal-token delegate --ttl DURATION [--allow METHOD]... [--path PREFIX]... [--caller CONDITION]... "
                    + "[--uses N]",
                "portal-token delegate --from FILE|- [--ttl DURATION] [--allow METHOD]... [--path PREFIX]... ...",
            ]),
        CommandSpec("delegations", DelegationsCommand.summary, options: [.revoke, .format]),
        CommandSpec("lock", LockCommand.summary),
        CommandSpec("unlock", UnlockCommand.summary),
        CommandSpec("audit", AuditCommand.summary, options: [.since, .format]),
        CommandSpec(
            "agent", AgentCommand.summary,
            positionals: [
                PositionalSpec("FILE", optional: true, help: "with --check-rules, the rules file to check")
            ],
            options: [
                .agentSocketPath, .agentRestrictedSocketPath, .agentRules, .idleExit, .checkRules, .checkedCaller,
                .checkedRequest, .forget,
            ],
            usage: [
                "portal-token agent [--socket PATH] [--restricted-socket PATH] [--rules PATH] [--idle-exit SECONDS]",
                "portal-token agent --check-rules [--socket PATH] [FILE]",
                "portal-token agent --check-rules --caller DESCRIPTION [--asks OPERATION] [FILE]",
                "portal-token agent --forget [--socket PATH]",
            ]),
        CommandSpec(
            "approve", ApproveCommand.summary,
            positionals: [PositionalSpec("ID", optional: true, help: "the question to answer, as the list shows it")],
            options: [.deny], usage: ["portal-token approve", "portal-token approve [--deny] ID"]),
        CommandSpec("version", VersionCommand.summary),
    ]

    /// The settings flags (docs/settings.md, "Flags"), from the settings' declaration.
    public static let settings: [OptionSpec] = Setting.flagged.map(OptionSpec.init)

    /// What may stand before the command name.
    public static let globalOptions: [OptionSpec] = settings + [.help, .version]

    public static func command(named name: String) -> CommandSpec? { commands.first { $0.name == name } }

    /// The global options of `--help`, one a line, in columns.
    static var globalOptionsText: String {
        let rows = globalOptions.map { option -> (String, String) in
            let value =
                option.words.isEmpty || option.words.count > 3 || option.setting == .apiHost
                ? option.valueName.map { " " + $0 } ?? "" : " " + option.words.joined(separator: "|")
            let names = option.short.map { "-\($0), " } ?? ""
            return (names + "--" + option.long + value, option.help)
        }
        return columns(rows)
    }

    /// Rows of name and help, indented two columns, the help lined up two after the longest name.
    static func columns(_ rows: [(String, String)]) -> String {
        let width = rows.map(\.0.count).max() ?? 0
        return rows.map { row in "  " + row.0 + String(repeating: " ", count: width - row.0.count + 2) + row.1 }
            .joined(separator: "\n")
    }

    /// "0 success, 1 not signed in, …", wrapped at 90 columns.
    static var exitCodesText: String {
        var lines: [String] = []
        var line = "Exit codes:"
        let codes = ExitCode.allCases
        for (index, code) in codes.enumerated() {
            let last = index == codes.count - 1
            let item = "\(last ? "and " : "")\(code.rawValue) \(code.meaning)" + (last ? "." : ",")
            for word in item.split(separator: " ") {
                if line.count + 1 + word.count > 90 {
                    lines.append(line)
                    line = String(word)
                } else {
                    line += " " + word
                }
            }
        }
        lines.append(line)
        return lines.joined(separator: "\n")
    }
}

extension OptionTable {
    /// The commands the parser dispatches to that the table does not describe, or the other way
    /// round; empty when they agree (the generator refuses to write otherwise).
    public static var disagreements: [String] {
        let dispatched = PortalTokenCLI.commands.map { $0.name }
        let described = commands.map(\.name)
        return dispatched.filter { !described.contains($0) }.map { "'\($0)' is not in the option table" }
            + described.filter { !dispatched.contains($0) }.map { "'\($0)' is in the option table but is no command" }
    }
}
