import Glibc
import HookRunner
import PortalTokenCore

/// Runs the user's `on-session-invalidated` hook (product contract §5): the program named by
/// PORTAL_TOKEN_ON_SESSION_INVALIDATED, else `$XDG_CONFIG_HOME/portal-token/hooks/on-session-invalidated`
/// when it exists and is executable. Its failure is reported on stderr and changes no exit code.
struct SessionHook {
    let context: Context

    var executable: String? {
        if let configured = context.settings.value(.onSessionInvalidated) { return configured }
        let path = context.xdgDirectory("XDG_CONFIG_HOME", default: ".config") + "/portal-token/hooks/on-session-invalidated"
        return access(path, X_OK) == 0 ? path : nil
    }

    func run(_ event: SessionEndedEvent) {
        guard let executable else { return }
        let outcome = HookRunner(parentEnvironment: context.environment).run(executable: executable, variables: event.environment)
        if let failure = outcome.failureMessage {
            context.streams.printError("portal-token: warning: \(failure)")
        }
    }
}
