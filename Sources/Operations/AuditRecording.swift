import Basics
import PortalTokenCore
import Synchronization

/// What a run's audit line will say, filled in as the command learns it: the session it used
/// (Sessions tells), the host a credential request named, Portal's answer. The error funnel
/// writes it once the command's outcome is known, so each command only adds what it alone
/// knows (docs/audit.md, "When a line is written").
package final class AuditDraft {
    package var operation: AuditOperation
    /// The outcome when the command knows better than its error or its success would say.
    package var outcome: AuditOutcome?
    /// The last session read or written: its environment, end user and token.
    package var session: PortalSession?
    package var protocolName: String?
    package var host: String?
    package var method: String?
    package var httpStatus: Int?
    package var program: String?
    package var endedSession = false
    /// Who asked, where the kernel names it: the agent's caller at the other end of its socket.
    package var caller: AuditCaller?
    package var isRecorded = false
    /// Whether the event concerns the Portal session, so the configured environment is named
    /// even when no session was found; false for the credentials of other hosts.
    package var concernsPortalSession: Bool

    package init(_ operation: AuditOperation) {
        self.operation = operation
        switch operation {
        case .dockerGet, .dockerStore, .dockerErase, .dockerList: concernsPortalSession = false
        default: concernsPortalSession = true
        }
    }

    /// A credential-protocol or Docker request: its protocol and host, never its path or username.
    package func describe(_ request: CredentialRequest) {
        protocolName = request.protocolName
        host = request.host?.gitHost
    }

    /// What a command that returned normally did.
    package var successOutcome: AuditOutcome {
        switch operation {
        case .store, .dockerStore: return .stored
        case .erase, .dockerErase: return .erased
        case .login, .redirect, .verifyTOTP: return session == nil ? .pending : .signedIn
        case .logout: return .signedOut
        default: return .served
        }
    }

    /// What an error means for the log.
    package static func outcome(of error: any Error) -> AuditOutcome {
        switch error {
        case SessionError.notSignedIn: return .notSignedIn
        case SessionError.ended(.expired, _): return .expired
        case SessionError.ended(.unauthorized, _): return .unauthorized
        case SessionError.network, SessionError.checkFailed: return .unreachable
        case let error as StoreError where error.kind == .locked: return .locked
        default: break
        }
        let code = (error as? SilentExit)?.code ?? CLIError(error).exitCode
        switch code {
        case .notSignedIn: return .notSignedIn
        case .network: return .unreachable
        case .rejected: return .rejected
        default: return .failed
        }
    }
}

extension Context {
    /// The audit log, as the user's own config file sets it (docs/audit.md, "Turning it off"):
    /// `$XDG_STATE_HOME/portal-token/audit.jsonl`; nil when it is off, or when neither
    /// XDG_STATE_HOME nor HOME says where it would be.
    /// `forReading` opens it even when it is off, to show what it holds.
    package func auditLog(forReading: Bool = false) -> (any AuditLog)? {
        guard forReading || (try? settings.auditLogEnabled()) ?? true else { return nil }
        let stateHome: String
        if let value = environment["XDG_STATE_HOME"], value.hasPrefix("/") {
            stateHome = value
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            stateHome = home + "/.local/state"
        } else {
            return nil
        }
        let streams = self.streams
        return services.auditLog(
            AuditLogOptions(
                directory: stateHome + "/portal-token",
                maximumBytes: (try? settings.auditLogMaxBytes()) ?? Settings.defaultAuditLogBytes,
                journal: (try? settings.auditJournalEnabled()) ?? false,
                warn: { message, hint in
                    streams.printError("portal-token: warning: \(message)")
                    if let hint { streams.printError("hint: \(hint)") }
                }))
    }

    /// Writes this run's line, once: from `error`, or from success when there is none. `exitCode`
    /// nil leaves it out (`exec`, which writes before COMMAND replaces it).
    package func recordAudit(error: (any Error)?, exitCode: Int32?) {
        guard let draft = audit, !draft.isRecorded else { return }
        draft.isRecorded = true
        // In client mode the agent writes the line, naming the caller as the kernel does
        // (docs/agent.md, "Client mode").
        guard (settings.value(.agentSocket) ?? "").isEmpty else { return }
        guard let log = auditLog() else { return }
        let session = draft.session
        log.record(
            AuditEvent(
                operation: draft.operation,
                outcome: draft.outcome ?? error.map(AuditDraft.outcome(of:)) ?? draft.successOutcome,
                exitCode: exitCode, caller: draft.caller,
                authEnvironmentID: session?.authEnvironmentID ?? configuredEnvironmentID,
                endUserID: session?.endUserID, token: session?.token, protocolName: draft.protocolName,
                host: draft.host, method: draft.method, httpStatus: draft.httpStatus, program: draft.program,
                endedSession: draft.endedSession))
    }

    /// The chosen account's environment (named, bound to this directory, or remembered; never
    /// read from a store), for a line with no session: only for commands of the Portal session (a
    /// git request for another host names no environment).
    private var configuredEnvironmentID: String? {
        guard audit?.concernsPortalSession == true else { return nil }
        return ((try? localAccountChoice()) ?? nil)?.authEnvironmentID
            ?? settings.value(.authEnvironmentID)?.trimmingWhitespace
    }
}

/// The refusals this process writes a line for, in its audit log and on stderr: one throttle for
/// the agent's endpoints and the proxy alike (docs/audit.md, "Refusals").
package enum RefusalAudit {
    private static let throttle = Mutex(RefusalThrottle())

    package static func admit(_ kind: RefusalThrottle.Kind) -> RefusalThrottle.Verdict {
        throttle.withLock { $0.admit(kind, at: MonotonicClock.milliseconds()) }
    }

    /// What a log line on stderr adds for the refusals before it that were not logged.
    package static func unloggedNote(_ unwritten: Int) -> String {
        unwritten > 0 ? " (\(unwritten) refusals before it not logged)" : ""
    }
}
