import Operations
import PortalTokenCore

/// `portal-token accounts`: the accounts signed in here, the directories bound to one, and which
/// applies here and why; `accounts use` binds this directory (docs/sessions.md, "Choosing an
/// account").
struct AccountsCommand: Command {
    static let name = "accounts"
    static let summary = "List the accounts signed in here and say which applies here; bind a directory to one"
    static let details = """
        Without arguments: every account signed in on this machine (auth environment,
        end user, API host), every directory bound to an account, and the account this
        directory uses and why; never a token. A command picks its account by, in
        order: --env ID (with --end-user ID), or PORTAL_AUTH_ENVIRONMENT_ID (with
        PORTAL_END_USER_ID); the account bound to this directory or the nearest one
        above it; the config file's auth-environment-id (and end-user), the named
        default; the one account signed in here; the one session stored. Several, and
        none chosen, is exit 2 listing them. git's requests choose too: a username in
        the request (credential.<url>.username) names the end user.

        use ENV [END_USER] binds this directory, and every directory below it, to that
        account, signed in yet or not; use --unset removes this directory's binding.
        Bindings live in portal-token's own accounts file, never in the directory, so
        nothing a repository carries chooses an account; git runs portal-token in the
        repository, so a binding chooses the account of its pushes and fetches too.
        Changing one changes nothing for a shell elsewhere. Exit 4 when the accounts
        file cannot be changed.

        --format json prints {"accounts":[{"authEnvironmentId","endUserId","apiHost"}],
        "directories":[{"path","authEnvironmentId","endUserId"}],"here":
        {"authEnvironmentId","endUserId","chosenBy"} or null,"hereError"}.
        """

    let json: Bool
    let binding: (authEnvironmentID: String, endUserID: String?)?
    let unbinding: Bool

    init(arguments: ParsedArguments) throws(CLIError) {
        json = try arguments.jsonFormat()
        unbinding = arguments.has(.unset)
        let operands = arguments.operands
        guard let action = operands.first else {
            if unbinding { throw .usage("--unset goes with 'accounts use'", hint: "portal-token accounts use --unset") }
            binding = nil
            return
        }
        guard action == "use" else {
            throw .usage(
                "'accounts' takes 'use ENV [END_USER]' or nothing",
                hint: Suggestion.hint(for: action, among: ["use"], command: Self.name))
        }
        if unbinding {
            guard operands.count == 1 else { throw .usage("'accounts use --unset' takes no account") }
            binding = nil
            return
        }
        guard operands.count >= 2, AgentConnection.isSafeWord(operands[1]) else {
            throw .usage(
                "'accounts use' needs an auth environment ID", hint: "portal-token accounts use ENV [END_USER]")
        }
        let endUser = operands.count > 2 ? operands[2].trimmingWhitespace : nil
        if let endUser, endUser.isEmpty { throw .usage("the end user ID is empty") }
        binding = (operands[1], endUser)
    }

    func run(in context: Context) throws {
        if binding != nil || unbinding { return try bind(in: context) }
        let file = try context.rememberedAccounts()
        var here: Context.AccountChoice?
        var hereError: String?
        do {
            here = try context.accountChoice()
        } catch let error as CLIError {
            hereError = error.message
        }
        if json {
            let accounts: [JSONValue] = file.accounts.map { account in
                .object([
                    "authEnvironmentId": .string(account.authEnvironmentID), "endUserId": .string(account.endUserID),
                    "apiHost": account.apiHost.map { .string($0) } ?? .null,
                ])
            }
            let directories: [JSONValue] = file.directories.map { directory in
                .object([
                    "path": .string(directory.path), "authEnvironmentId": .string(directory.authEnvironmentID),
                    "endUserId": directory.endUserID.map { .string($0) } ?? .null,
                ])
            }
            let hereValue: JSONValue =
                here.map { choice in
                    .object([
                        "authEnvironmentId": .string(choice.authEnvironmentID),
                        "endUserId": choice.endUserID.map { .string($0) } ?? .null, "chosenBy": .string(choice.reason),
                    ])
                } ?? .null
            context.streams.print(
                JSONValue.object([
                    "accounts": .array(accounts), "directories": .array(directories), "here": hereValue,
                    "hereError": hereError.map { .string($0) } ?? .null,
                ]).serialized)
            return
        }
        let shown = { TerminalText.escaped($0) }
        if file.accounts.isEmpty { context.streams.print("no account is signed in on this machine") }
        for account in file.accounts {
            let mark =
                here?.authEnvironmentID == account.authEnvironmentID
                && (here?.endUserID == nil || here?.endUserID == account.endUserID)
            context.streams.print(
                "\(mark ? "*" : " ") account    \(shown(account.authEnvironmentID))  "
                    + "end user \(shown(account.endUserID))" + (account.apiHost.map { "  on \(shown($0))" } ?? ""))
        }
        for directory in file.directories {
            context.streams.print(
                "  directory  \(shown(directory.path))  \(shown(directory.authEnvironmentID))"
                    + (directory.endUserID.map { "  end user \(shown($0))" } ?? ""))
        }
        if let here {
            context.streams.print(
                "here: \(shown(here.authEnvironmentID))"
                    + (here.endUserID.map { ", end user \(shown($0))" } ?? "") + " (chosen by \(here.reason))")
        } else if let hereError {
            context.streams.print("here: none: \(hereError)")
        }
    }

    private func bind(in context: Context) throws {
        guard let directory = Context.currentDirectory() else {
            throw CLIError.usage("the working directory cannot be named (was it removed?)")
        }
        let bound = binding.map {
            DirectoryAccount(path: directory, authEnvironmentID: $0.authEnvironmentID, endUserID: $0.endUserID)
        }
        if let failure = context.changeAccounts({ $0.binding(directory, to: bound) }) {
            throw CLIError(
                "could not change the accounts file \(context.accountsPath): \(failure)", exitCode: .storage)
        }
        guard let bound else {
            return context.streams.printError("portal-token: \(directory) uses no account of its own now")
        }
        context.streams.printError(
            "portal-token: \(directory) and the directories below it use '\(bound.authEnvironmentID)'"
                + (bound.endUserID.map { " (end user \($0))" } ?? ""))
        let known = try context.rememberedAccounts().accounts(of: bound.authEnvironmentID).contains {
            bound.endUserID == nil || $0.endUserID == bound.endUserID
        }
        if !known {
            context.streams.printError(
                "hint: no such account is signed in here yet: sign in with 'portal-token login --env "
                    + "\(bound.authEnvironmentID) …' in this directory")
        }
    }
}
