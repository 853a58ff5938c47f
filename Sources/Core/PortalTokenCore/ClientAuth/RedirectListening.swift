import Glibc

/// What the loopback redirect listener shows and decides, as the commands see it
/// (docs/signing-in.md): the port is `RedirectListening`, the adapter `LoopbackRedirectListener`.

/// Listens for the browser's redirect to a loopback address and hands each arriving URL to a
/// handler, until the handler finishes or the wait times out.
public protocol RedirectListening: AnyObject {
    func wait<Result>(
        progress: (RedirectListenerProgress) -> Void, handler: (Secret) -> RedirectDecision<Result>
    ) throws(RedirectListenerError) -> Result
    func close()
}

/// What happened while waiting, for a live line on a terminal.
public enum RedirectListenerProgress: Sendable, Equatable {
    /// Listening; the addresses are `127.0.0.1` and perhaps `::1`.
    case listening(addresses: [String], port: UInt16)
    /// Still waiting, this long left.
    case waiting(remainingMilliseconds: Int64)
    /// A request that is not the redirect was answered with this status.
    case ignoredRequest(status: Int)
    /// The redirect arrived; the handler is running.
    case redirectReceived
}

/// The page the browser gets. Its text is the caller's and is HTML-escaped.
public struct RedirectPage: Sendable, Equatable {
    public var status: Int
    public var title: String
    public var message: String

    public init(status: Int, title: String, message: String) {
        self.status = status
        self.title = title
        self.message = message
    }

    public static let signedIn = RedirectPage(
        status: 200, title: "Signed in",
        message: "portal-token has signed you in. You can close this tab and return to the terminal.")

    public static func failed(_ message: String) -> RedirectPage {
        RedirectPage(status: 400, title: "Sign-in failed", message: message + " See the terminal for details.")
    }

    public static let notFound = RedirectPage(
        status: 404, title: "Not found", message: "This address is not the sign-in redirect.")
    public static let methodNotAllowed = RedirectPage(
        status: 405, title: "Method not allowed", message: "Only GET is answered here.")
    public static let badRequest = RedirectPage(
        status: 400, title: "Bad request", message: "The request could not be read.")
    public static let tooLarge = RedirectPage(
        status: 431, title: "Request too large", message: "The request was larger than allowed.")
}

/// What the handler decided about a redirect.
public enum RedirectDecision<Result> {
    /// Answer with `page` and stop waiting; `wait` returns the result.
    case finish(Result, page: RedirectPage)
    /// Answer with `page` and go on waiting (for a redirect that was not ours after all).
    case keepWaiting(page: RedirectPage)
}

public enum RedirectListenerError: Error, Sendable, Equatable {
    case cannotListen(address: String, port: UInt16, errorNumber: Int32)
    case timedOut(milliseconds: Int64)
    case interrupted(signal: Int32)
    case socketFailure(errorNumber: Int32)

    public var message: String {
        switch self {
        case .cannotListen(let address, let port, let number):
            let reason =
                number == EADDRINUSE
                ? "the port is in use" : number == EACCES ? "permission denied" : "errno \(number)"
            return "could not listen on \(address.contains(":") ? "[\(address)]" : address):\(port): \(reason)"
        case .timedOut(let milliseconds):
            return "no sign-in arrived within \(Self.duration(milliseconds))"
        case .interrupted:
            return "sign-in interrupted"
        case .socketFailure(let number):
            return "waiting for the sign-in failed (errno \(number))"
        }
    }

    public var hint: String? {
        switch self {
        case .cannotListen(_, _, let number) where number == EADDRINUSE:
            return
                """
                stop the program using that port, or choose another port in the redirect URL and allow-list it \
                in Portal's dashboard
                """
        case .cannotListen(_, _, let number) where number == EACCES:
            return "ports below 1024 need privileges; choose a port above 1024 in the redirect URL"
        case .timedOut:
            return "run 'portal-token login' again, or give it longer with --timeout SECONDS"
        default:
            return nil
        }
    }

    public static func duration(_ milliseconds: Int64) -> String {
        let seconds = milliseconds / 1000
        if seconds >= 60, seconds % 60 == 0 { return seconds == 60 ? "1 minute" : "\(seconds / 60) minutes" }
        if seconds >= 1 { return seconds == 1 ? "1 second" : "\(seconds) seconds" }
        return "\(milliseconds) ms"
    }
}
