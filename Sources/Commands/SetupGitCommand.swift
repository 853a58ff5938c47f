import Glibc
import Operations
import PortalTokenCore

struct SetupGitCommand: Command {
    static let name = "setup-git"
    static let summary = "Make git use portal-token as its credential helper (or stop, with --unset)"
    static let details = """
        Adds credential.helper portal-token to your global git config (git config
        --global --add), after any helper already there, which it keeps; does nothing
        when the entry is there already. Says what it changed, on stderr. git asks its
        helpers in order, so one listed earlier answers first: when it adds the entry
        beside another helper, a hint says so (reordering is left to you), or, when a
        plaintext store helper is in effect (git-credential-store, which writes every
        password git approves to ~/.git-credentials), a warning names it, with the
        command that removes it. That helper is kept too, as every other helper is.

        With --unset, removes exactly that entry (git config --global --unset-all
        credential.helper '^portal-token$') and no other helper.

        Exit status 2, the global git config unchanged, when git cannot be run or git
        config fails.
        """

    /// The value git runs as `git-credential-portal-token`.

    let unset: Bool

    init(arguments: ParsedArguments) throws(CLIError) {
        unset = arguments.has(.unset)
    }

    func run(in context: Context) throws {
        let helpers = try Self.git(context, ["config", "--global", "--get-all", "credential.helper"], allowing: [1])
            .output.split(separator: "\n").map(String.init)
        let others = helpers.filter { $0 != GitHelpers.portalToken }
        if unset {
            guard helpers.contains(GitHelpers.portalToken) else {
                context.streams.printError(
                    "portal-token: your global git config does not use portal-token; nothing changed")
                return
            }
            // A value pattern that matches exactly this entry, so other helpers stay.
            _ = try Self.git(context, ["config", "--global", "--unset-all", "credential.helper", "^portal-token$"])
            context.streams.printError(
                "portal-token: removed credential.helper portal-token from your global git config"
                    + Self.kept(others))
            return
        }
        guard !helpers.contains(GitHelpers.portalToken) else {
            context.streams.printError(
                "portal-token: git already uses portal-token as a credential helper; nothing changed")
            return
        }
        _ = try Self.git(context, ["config", "--global", "--add", "credential.helper", GitHelpers.portalToken])
        context.streams.printError(
            "portal-token: added credential.helper portal-token to your global git config"
                + Self.kept(others))
        if let plaintext = GitHelpers.plaintext(among: helpers) {
            context.streams.printError(
                "portal-token: warning: \(GitHelpers.plaintextWarning(plaintext))")
            context.streams.printError("hint: \(GitHelpers.plaintextHint)")
        } else if !others.isEmpty {
            context.streams.printError("hint: git asks its helpers in order, so a helper listed earlier answers first")
        }
    }

    private static func kept(_ others: [String]) -> String {
        switch others.count {
        case 0: return ""
        case 1: return " (kept the other helper, '\(others[0].prefix(80))')"
        default: return " (kept the \(others.count) other helpers)"
        }
    }

    /// Runs git; a status outside 0 and `allowing` is an error, git's own message already on stderr.
    private static func git(_ context: Context, _ arguments: [String], allowing: Set<Int32> = []) throws
        -> ProgramResult
    {
        let result = context.services.programs.run("git", arguments, timeoutMilliseconds: 10_000)
        guard let status = result.status else {
            if result.startError == ENOENT {
                throw CLIError.usage(
                    "git is not installed", hint: "install git, then run 'portal-token setup-git' again")
            }
            throw CLIError.usage("cannot run git: \(String(cString: strerror(result.startError)))")
        }
        guard status == 0 || allowing.contains(status) else {
            throw CLIError.usage(
                "git config exited with status \(status); the global git config was not changed",
                hint: "run 'git config --global --list' to see what git reports")
        }
        return result
    }
}
