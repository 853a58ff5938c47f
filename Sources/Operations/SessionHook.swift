import Glibc
import PortalTokenCore

/// Runs the user's `on-session-invalidated` hook (docs/sessions.md, "The hook"): the program named by
/// PORTAL_TOKEN_ON_SESSION_INVALIDATED (or the config file), else
/// `$XDG_CONFIG_HOME/portal-token/hooks/on-session-invalidated` when something is there. Its
/// failure is reported on stderr, with its path, and changes no exit code.
///
/// A configured path must be absolute or start with `~/` (docs/security.md, "Hardening rules"): a relative one
/// would run whatever file of that name the current directory holds, such as one planted in a
/// cloned repository. It is a configuration error, found before the command does anything.
package struct SessionHook {
    package let context: Context

    package init(context: Context) { self.context = context }

    /// The configured path made absolute; nil when none is configured.
    package static func configuredPath(_ settings: Settings, environment: [String: String]) throws(CLIError) -> String?
    {
        guard let value = settings.value(.onSessionInvalidated), !value.isEmpty else { return nil }
        if value.hasPrefix("/") { return value }
        if value.hasPrefix("~/"), let home = environment["HOME"], home.hasPrefix("/") {
            return home + value.dropFirst(1)
        }
        throw .usage(
            """
            \(settings.origin(of: .onSessionInvalidated)): the hook path '\(TerminalText.escaped(value))' is not \
            absolute
            """,
            hint:
                """
                give the hook's full path, or one starting with ~/; a relative path would run from whatever \
                directory portal-token is started in
                """
        )
    }

    package var executable: String? {
        if let configured = try? Self.configuredPath(context.settings, environment: context.environment) {
            return configured
        }
        let path =
            context.xdgDirectory("XDG_CONFIG_HOME", default: ".config") + "/portal-token/hooks/on-session-invalidated"
        // A relative HOME makes a relative default: never looked up in the current directory.
        guard path.hasPrefix("/") else { return nil }
        // Anything there is the hook: one that is not executable is reported when it would run.
        var information = stat()
        return lstat(path, &information) == 0 ? path : nil
    }

    package func run(_ event: SessionEndedEvent) {
        // This process removed the session: its audit line says so (docs/audit.md, "Fields").
        context.audit?.endedSession = true
        guard let executable else { return }
        let outcome = context.services.hookLauncher(context.environment).run(
            executable: executable, variables: event.environment)
        if let failure = outcome.failureMessage(path: executable) {
            context.streams.printError("portal-token: warning: \(failure)")
            if outcome == .notExecutable {
                context.streams.printError("hint: make it executable: chmod +x \(executable)")
            }
            if case .writableByOthers = outcome {
                context.streams.printError("hint: restrict it with 'chmod go-w \(executable)'")
            }
        }
    }
}

extension Context {
    /// The settings only the Portal session and sign-in read (account abstraction, the hook
    /// path), checked when they are about to be used: a git request for another host never fails
    /// on them, and a Portal command refuses a wrong value before it does anything.
    package func checkPortalSettings() throws {
        _ = try settings.bool(.accountAbstracted)
        _ = try SessionHook.configuredPath(settings, environment: environment)
    }
}
