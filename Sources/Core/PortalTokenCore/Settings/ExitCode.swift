/// Every exit status portal-token gives, with what it means (docs/exit-codes.md): the one
/// declaration `--help`, the man page and the README take them from.
public enum ExitCode: Int32, Sendable, CaseIterable {
    case success = 0
    case notSignedIn = 1
    case usage = 2
    case sessionEnded = 3
    case storage = 4
    case network = 5
    case rejected = 6
    case notARedirect = 7
    /// 70 is EX_SOFTWARE of sysexits.h ("internal software error"); codes 0 to 7 name none
    /// for an error no part of portal-token expected (docs/exit-codes.md, "Internal errors").
    case internalError = 70
    /// `exec`: the command was found but could not be run, as env(1) reports it.
    case commandNotExecutable = 126
    /// `exec`: the command was not found, as env(1) reports it.
    case commandNotFound = 127
    /// Stopped by Ctrl-C (SIGINT) or SIGTERM while waiting for a sign-in, as a shell reports a
    /// command killed by SIGINT: 128 + 2.
    case interrupted = 130

    /// A few words, for the list in `--help`.
    public var meaning: String {
        switch self {
        case .success: return "success"
        case .notSignedIn: return "not signed in"
        case .usage: return "usage or configuration error"
        case .sessionEnded: return "the session just ended"
        case .storage: return "storage failure (nothing was deleted, unless it says otherwise)"
        case .network: return "network failure"
        case .rejected: return "Portal rejected the request"
        case .notARedirect: return "not a sign-in redirect"
        case .internalError: return "internal error (please report it)"
        case .commandNotExecutable: return "exec: the command cannot be run"
        case .commandNotFound: return "exec: the command is not found"
        case .interrupted: return "interrupted while waiting for a sign-in"
        }
    }

    /// The whole meaning, for the manual.
    public var explanation: String {
        switch self {
        case .success:
            return """
                Success; also a credential-protocol get that found nothing, a store or erase that had \
                nothing to do, and an unknown operation under the name git-credential-portal-token.
                """
        case .notSignedIn:
            return """
                Not signed in: no usable session for this environment; also a login whose browser never \
                came back within --timeout, and a verify-totp with no two-factor step waiting.
                """
        case .usage:
            return """
                Usage or configuration error: an unknown or misplaced option, a missing setting, an invalid \
                value, malformed credential input.
                """
        case .sessionEnded:
            return "The session just ended: Portal answered 401, or the 7-day cap passed (the hook has run)."
        case .storage:
            return """
                Storage failure: keyring locked, unreachable or too slow, no session bus, no Secret Service \
                provider, encrypted file locked or unreadable, wrong or missing passphrase. Retrying may \
                work; nothing was deleted, unless the message says a deletion may still take effect (a \
                keyring that stopped answering mid-delete). get, store and erase use it too, with the \
                "portal-token: error: ..." line that git shows the user.
                """
        case .network: return "Network failure: Portal could not be reached."
        case .rejected:
            return """
                Portal rejected the request: grant spent or expired, code rejected, method unavailable, rate \
                limited, malformed response, or a non-2xx answer to api.
                """
        case .notARedirect:
            return "redirect was given a URL that is not a sign-in redirect for this configuration."
        case .internalError:
            return """
                Internal error: an error portal-token did not expect, reported as \
                "portal-token: error: internal error: ..." with a request to report it; a bug, never a \
                storage failure (EX_SOFTWARE of sysexits.h).
                """
        case .commandNotExecutable:
            return "exec only: the command was found but cannot be run, as env(1) reports it."
        case .commandNotFound:
            return """
                exec only: the command is not found, as env(1) reports it. Otherwise exec exits with the \
                command's own status.
                """
        case .interrupted: return "login was stopped by Ctrl-C or SIGTERM while it waited for the browser."
        }
    }
}
