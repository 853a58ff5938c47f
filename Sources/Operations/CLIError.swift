import Basics
import PortalTokenCore

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

    public static func usage(_ message: String, hint: String? = nil) -> CLIError {
        CLIError(message, hint: hint, exitCode: .usage)
    }
}

extension CLIError {
    /// The single mapping from every error type the commands throw to message and exit code.
    package init(_ error: any Error) {
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
            self.init(error.message, hint: error.hint, exitCode: error.exitCode)
        case let error as SignInError:
            let code: ExitCode
            switch error {
            case .notARedirect: code = .notARedirect
            case .notStored: code = .storage
            case .noPendingStep: code = .notSignedIn
            case .stepExpired: code = .rejected
            }
            self.init(error.message, hint: error.hint, exitCode: code)
        case let error as RedirectListenerError:
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

extension FileReading.Failure {
    /// The failure as an error message words it.
    package func described(limit: Int = FileReading.defaultLimit) -> String {
        switch self {
        case .missing: return "no such file"
        case .tooLarge: return "larger than \(limit >> 20) MiB"
        default: return reason
        }
    }
}

/// An exit code with nothing more to say: the command already printed what the user needs.
package struct SilentExit: Error {
    package let code: ExitCode
    package init(code: ExitCode) { self.code = code }
}
