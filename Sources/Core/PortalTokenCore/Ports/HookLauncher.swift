import Glibc

/// Why a session ended, as the hook reads it in `PORTAL_SESSION_END_REASON` (docs/sessions.md, "The hook").
public enum SessionEndReason: String, Sendable, Equatable {
    /// Portal answered 401 to the session token, or git erased it after a 401.
    case unauthorized
    /// The 7-day cap passed.
    case expired
}

/// The variables the `on-session-invalidated` hook receives about the session that ended; the
/// launcher adds only `PATH`, `HOME`, locale and display variables. The token is never among them.
public struct SessionEndedEvent: Sendable, Equatable {
    public var authEnvironmentID: String
    public var endUserID: String
    public var reason: SessionEndReason

    public init(authEnvironmentID: String, endUserID: String, reason: SessionEndReason) {
        self.authEnvironmentID = authEnvironmentID
        self.endUserID = endUserID
        self.reason = reason
    }

    public var environment: [String: String] {
        [
            "PORTAL_AUTH_ENVIRONMENT_ID": authEnvironmentID,
            "PORTAL_END_USER_ID": endUserID,
            "PORTAL_SESSION_END_REASON": reason.rawValue,
        ]
    }
}

/// How a hook run ended. The caller reports a failure on stderr and keeps its own exit code.
public enum HookOutcome: Sendable, Equatable {
    case exited(status: Int32)
    case signalled(signal: Int32)
    /// Still running at the timeout; its process group was terminated.
    case timedOut(milliseconds: Int)
    /// `posix_spawn` failed; `errorNumber` is the errno.
    case couldNotStart(errorNumber: Int32)
    /// It ran, but its exit status was lost (SIGCHLD ignored, so the kernel reaped it).
    case statusUnavailable
    /// Nothing exists at the hook's path.
    case missing
    /// Something is at the hook's path, but it is not an executable file.
    case notExecutable
    /// The hook belongs to a user other than this one or root: it would run their code.
    case foreignOwner(uid: UInt32)
    /// Group or others may write the hook: it would run whatever they put there.
    case writableByOthers(mode: UInt32)

    public var succeeded: Bool { self == .exited(status: 0) }

    /// Why a hook with this owner and mode must not run, as ssh judges its config: another
    /// user (other than root) owns it, or group or others may write it. Nil when it may run.
    public static func untrusted(owner: UInt32, mode: UInt32, user: UInt32) -> HookOutcome? {
        if owner != user && owner != 0 { return .foreignOwner(uid: owner) }
        if mode & 0o022 != 0 { return .writableByOthers(mode: mode & 0o7777) }
        return nil
    }

    /// One line for stderr when the hook failed, naming how; nil on success.
    public var failureMessage: String? {
        switch self {
        case .exited(0): return nil
        case .exited(let status): return "the on-session-invalidated hook exited with status \(status)"
        case .signalled(let signal): return "the on-session-invalidated hook was killed by signal \(signal)"
        case .timedOut(let milliseconds): return "the on-session-invalidated hook was stopped after \(milliseconds) ms"
        case .couldNotStart(let errorNumber):
            return "the on-session-invalidated hook could not be started (errno \(errorNumber))"
        case .statusUnavailable: return "the on-session-invalidated hook ended with an unknown status"
        case .missing: return "the on-session-invalidated hook does not exist"
        case .notExecutable: return "the on-session-invalidated hook is not an executable file; it was not run"
        case .foreignOwner(let uid):
            return "the on-session-invalidated hook belongs to another user (uid \(uid)); it was not run"
        case .writableByOthers(let mode):
            return
                """
                the on-session-invalidated hook is writable by other users (mode \(String(mode, radix: 8))); it \
                was not run
                """
        }
    }

    /// `failureMessage` naming the hook's path, which a user needs to find it
    /// (docs/security.md, "Hardening rules": a hook that is not run is reported, never skipped silently).
    public func failureMessage(path: String) -> String? {
        guard let message = failureMessage else { return nil }
        let named = "the on-session-invalidated hook " + path
        if case .couldNotStart(let errorNumber) = self {
            return named + " could not be started (" + String(cString: strerror(errorNumber)) + ")"
        }
        return named + message.dropFirst("the on-session-invalidated hook".count)
    }
}

/// Runs the user's hook (the port; `HookRunner` is the adapter).
public protocol HookLauncher: Sendable {
    /// Runs `executable` with no arguments and `variables` plus the launcher's short list of
    /// inherited variables as its whole environment, and waits for it within the launcher's bound.
    func run(executable: String, variables: [String: String]) -> HookOutcome
}
