import LoopbackRedirectListener
import PortalTokenCore

/// Exit codes (docs/exit-codes.md, "The codes").
public enum ExitCode: Int32, Sendable {
    case success = 0
    case notSignedIn = 1
    case usage = 2
    case sessionEnded = 3
    case storage = 4
    case network = 5
    case rejected = 6
    case notARedirect = 7
    /// An error no part of portal-token expected: a bug, never a storage failure. 70 is
    /// EX_SOFTWARE of sysexits.h ("internal software error"); no code of 0 to 7 fits it
    /// (docs/exit-codes.md, "Internal errors").
    case internalError = 70
    /// `exec`: the command was found but could not be run, as env(1) reports it.
    case commandNotExecutable = 126
    /// `exec`: the command was not found, as env(1) reports it.
    case commandNotFound = 127
    /// Stopped by Ctrl-C (SIGINT) or SIGTERM while waiting for a sign-in, as a shell reports a
    /// command killed by SIGINT: 128 + 2.
    case interrupted = 130
}

/// An error on its way to the one funnel that prints it and picks the exit code.
/// The message follows git's grammar: lowercase, no full stop, what failed first.
public struct CLIError: Error, Sendable {
    public var message: String
    public var hint: String?
    public var exitCode: ExitCode

    public init(_ message: String, hint: String? = nil, exitCode: ExitCode) {
        self.message = message
        self.hint = hint
        self.exitCode = exitCode
    }

    static func usage(_ message: String, hint: String? = nil) -> CLIError {
        CLIError(message, hint: hint, exitCode: .usage)
    }
}

extension CLIError {
    /// The single mapping from every error type the commands throw to message and exit code.
    init(_ error: any Error) {
        switch error {
        case let error as CLIError:
            self = error
        case let error as StoreError:
            self.init(error.message, hint: error.hint, exitCode: .storage)
        case let error as SettingError:
            self.init(error.message, hint: error.hint, exitCode: .usage)
        case let error as SessionError:
            let code: ExitCode
            switch error {
            case .notSignedIn: code = .notSignedIn
            case .ended: code = .sessionEnded
            case .network, .checkFailed: code = .network
            case .foreignOrigin: code = .usage
            }
            self.init(error.message, hint: error.hint, exitCode: code)
        case let error as HTTPError:
            self.init(error.message, hint: error.hint, exitCode: .network)
        case let error as ClientAuthError:
            // The core names the product's exit code (2, 5 or 6) for each sign-in error.
            self.init(
                error.message, hint: error.hint, exitCode: ExitCode(rawValue: error.exitCode.rawValue) ?? .rejected)
        case let error as SignInError:
            let code: ExitCode
            switch error {
            case .notARedirect: code = .notARedirect
            case .notStored: code = .storage
            case .noPendingStep: code = .notSignedIn
            case .stepExpired: code = .rejected
            }
            self.init(error.message, hint: error.hint, exitCode: code)
        case let error as LoopbackRedirectListener.ListenerError:
            let code: ExitCode
            switch error {
            // The redirect URL names a port this machine cannot listen on: a configuration to change.
            case .cannotListen: code = .usage
            // The browser never came back: still not signed in.
            case .timedOut: code = .notSignedIn
            case .interrupted: code = .interrupted
            case .socketFailure: code = .network
            }
            self.init(error.message, hint: error.hint, exitCode: code)
        case let error as CredentialProtocolError:
            self.init(error.message, hint: "see gitcredentials(7) for the input format", exitCode: .usage)
        default:
            // Only the type name: an arbitrary error's description may carry input.
            self.init(
                "internal error: unexpected \(type(of: error))",
                hint: "this is a bug in portal-token; please report it with the command that was run",
                exitCode: .internalError)
        }
    }
}
