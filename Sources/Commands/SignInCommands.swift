import Glibc
import Operations
import PortalTokenCore

/// Follows a command's own text, after the blank line that separates them.
private let redirectSettings = """

    Settings: --env ID (PORTAL_AUTH_ENVIRONMENT_ID), --api-host HOST
    (PORTAL_API_HOST), --redirect-url URL (PORTAL_REDIRECT_URL),
    --account-abstracted true|false (PORTAL_ACCOUNT_ABSTRACTED).
    """

private let loginSettings = """

    Settings: --env ID (PORTAL_AUTH_ENVIRONMENT_ID), --api-host HOST
    (PORTAL_API_HOST), --redirect-url URL (PORTAL_REDIRECT_URL),
    --account-abstracted true|false (PORTAL_ACCOUNT_ABSTRACTED), --end-user ID
    (PORTAL_END_USER_ID) for --with-token; for --email also
    PORTAL_MAGIC_LINK_FROM_EMAIL and PORTAL_MAGIC_LINK_TEMPLATE_ID.
    """

/// A browser opens a custom-scheme redirect URL through a launcher (xdg-open, gio open) that
/// holds it, grant included, in its command line: where other local users can read command lines
/// they can exchange the grant first. So a custom-scheme sign-in needs /proc mounted with hidepid,
/// or accept-custom-scheme-risk (docs/security.md, "The sign-in grant"). Returns whether the risk
/// was accepted rather than absent.
private func requireCustomSchemeAllowed(_ context: Context) throws -> Bool {
    if ProcessListVisibility.hidesOtherUsers(mountInfo: context.services.procMountInfo() ?? "") { return false }
    if try context.settings.bool(.acceptCustomSchemeRisk) == true { return true }
    throw CLIError(
        """
        other local users can read command lines here (/proc is not mounted with hidepid), and a browser opens a \
        custom-scheme redirect URL through a launcher whose command line holds the sign-in grant
        """,
        hint: """
            register a loopback redirect URL, http://127.0.0.1:PORT/path, in Portal's dashboard and set \
            PORTAL_REDIRECT_URL to it; or mount /proc with hidepid=invisible; or accept the risk with \
            PORTAL_TOKEN_ACCEPT_CUSTOM_SCHEME_RISK=true
            """,
        exitCode: .usage)
}

/// The Client Auth settings, checked before anything is sent.
private func signInConfiguration(_ context: Context) throws -> ClientAuthConfiguration {
    try context.checkPortalSettings()
    return try ClientAuthConfiguration(settings: context.settings)
}

struct MethodsCommand: Command {
    static let name = "methods"
    static let summary = "List the sign-in methods the auth environment allows"
    static let details = """
        Asks Portal (GET /api/v3/auth/methods) and shows each method with the login
        command that uses it, then whether Portal creates a wallet on sign-up
        (autoCreateWallet). Methods portal-token does not know are left out. With
        --format json: {"allowedAuthMethods":[…],"autoCreateWallet":…}.

        Settings: --env ID (PORTAL_AUTH_ENVIRONMENT_ID), --api-host HOST
        (PORTAL_API_HOST).
        """

    let json: Bool

    init(arguments: ParsedArguments) throws(CLIError) {
        json = try arguments.jsonFormat()
    }

    func run(in context: Context) throws {
        let client = try context.clientAuthClient(configuration: try signInConfiguration(context))
        let methods = try client.methods()
        if json {
            context.streams.print(methods.json)
            return
        }
        if methods.allowed.isEmpty {
            context.streams.print("no sign-in method portal-token knows is enabled for this environment")
        }
        for method in methods.allowed {
            let command: String
            switch method {
            case .emailMagicLink: command = "portal-token login --email ADDRESS"
            case .google: command = "portal-token login --google"
            case .apple: command = "portal-token login --apple"
            }
            context.streams.print(method.rawValue.padding(18) + command)
        }
        context.streams.print("autoCreateWallet: \(methods.autoCreateWallet)")
    }
}

struct LoginCommand: Command {
    static let name = "login"
    static let auditOperation: AuditOperation? = .login
    static let isRefusedInClientMode = true
    static let summary = "Sign in to Portal with a magic link, Google or Apple, or adopt a token"
    static let details = """
        With --email, --google or --apple: needs --env and --redirect-url, completes a
        two-factor step when the environment asks for one, and stores the session
        before it reports success (exit 0).

        With a loopback redirect URL (http://127.0.0.1:PORT/path or
        http://localhost:PORT/path) login listens on that address and port only, for
        that path only, and finishes the sign-in itself. The listener opens before
        anything is sent, so a port in use (exit 2), like a store that cannot be read
        (exit 4), fails before any email goes out or any grant exists. Other requests
        on the port (such as /favicon.ico) get 404, an idle or slow connection is
        closed after 10 seconds, and on a terminal a live line shows the time left. A
        callback whose grant Portal refuses (any web page can send one) is reported on
        stderr, and waiting goes on until the timeout. Ctrl-C (or SIGTERM) while
        waiting stops at once with exit 130, the port released.

        With any other redirect URL the desktop handler, portal-token redirect,
        finishes the sign-in, and login exits 0 once the link is sent or the page
        opened. A browser opens a custom-scheme one through a launcher (xdg-open, gio
        open) that holds it, grant included, in a command line other local users can
        read: unless /proc is mounted with hidepid, login refuses it (exit 2) before
        anything is sent, and redirect reads no URL;
        PORTAL_TOKEN_ACCEPT_CUSTOM_SCHEME_RISK=true accepts the risk, and login then
        warns on stderr.

        On a terminal where prompts are allowed, a two-factor step shows the
        enrollment QR code and secret (first enrollment only) on the terminal itself,
        never on stderr, then asks for the code with echo off, three tries at most. A
        code that is not exactly six digits is refused before it is sent; a code
        Portal refuses leaves the step usable. Otherwise the step waits for
        verify-totp.

        --email: ADDRESS is trimmed and lowercased, and never shown back; open the
        link on this computer. Needs PORTAL_MAGIC_LINK_FROM_EMAIL and
        PORTAL_MAGIC_LINK_TEMPLATE_ID. Portal limits links per address: a refusal is
        exit 6, never retried.

        --no-browser: the provider's address is printed on stderr, to be opened
        elsewhere. Without it --google and --apple open the address with xdg-open when
        DISPLAY or WAYLAND_DISPLAY is set, and print it otherwise (also when xdg-open
        fails or a setting rules prompts out).

        --timeout: how long the loopback listener waits for the browser; by default
        600 seconds for a magic link (whose grant lives 15 minutes) and 300 for Google
        and Apple, at most 3600. Giving up is exit 1.

        --with-token adopts a Client Session Token minted by your own backend, read
        from stdin, never from an argument (on a terminal it is asked for with echo
        off, unless a setting rules prompts out: exit 2). One GET /api/v3/clients/me
        checks it: a token Portal refuses is exit 6 and nothing is stored (the stored
        session, if any, is left as it was). The end user is --end-user ID, else the
        id that call returns; with neither, exit 6 and nothing stored.

        """ + loginSettings

    enum Method: Equatable {
        case email(String)
        case google
        case apple

        var authMethod: AuthMethod {
            switch self {
            case .email: return .emailMagicLink
            case .google: return .google
            case .apple: return .apple
            }
        }
    }

    static let maximumTimeoutSeconds = 3600

    /// How to sign in; nil for `--with-token`, which adopts a token instead.
    let method: Method?
    let opensBrowser: Bool
    let timeoutSeconds: Int

    init(arguments: ParsedArguments) throws(CLIError) {
        let email = arguments.value(.email)
        let google = arguments.has(.google)
        let apple = arguments.has(.apple)
        let withToken = arguments.has(.withToken)
        var chosen: [Method] = []
        if let email { chosen.append(.email(email)) }
        if google { chosen.append(.google) }
        if apple { chosen.append(.apple) }
        if withToken {
            guard chosen.isEmpty else { throw .usage("--with-token adopts a token; it takes no sign-in method") }
            method = nil
            opensBrowser = false
            timeoutSeconds = 0
            return
        }
        guard chosen.count == 1, let method = chosen.first else {
            throw .usage(
                chosen.isEmpty
                    ? "choose how to sign in: --email ADDRESS, --google, --apple or --with-token"
                    : "choose one way to sign in, not \(chosen.count)",
                hint: "run 'portal-token methods' to see the methods this environment allows")
        }
        self.method = method
        opensBrowser = !arguments.has(.noBrowser)
        if let text = arguments.value(.timeout) {
            guard let seconds = Int(text), seconds > 0, seconds <= Self.maximumTimeoutSeconds else {
                throw .usage("--timeout takes a whole number of seconds between 1 and \(Self.maximumTimeoutSeconds)")
            }
            timeoutSeconds = seconds
        } else {
            // A magic link's grant lives 15 minutes; a provider's page is a quicker affair.
            timeoutSeconds = method == .google || method == .apple ? 300 : 600
        }
    }

    func run(in context: Context) throws {
        guard let method else {
            // --end-user (PORTAL_END_USER_ID) names the token's end user where Portal's answer does not.
            let endUser = context.settings.value(.endUser)
            if let endUser, endUser.trimmingWhitespace.isEmpty {
                throw CLIError.usage("--end-user needs an end user ID")
            }
            return try TokenAdoption(endUserID: endUser).run(in: context)
        }
        let configuration = try signInConfiguration(context)
        let redirectURL = try configuration.requireRedirectURL()
        var acceptedRisk = false
        if LoopbackRedirect(redirectURL: redirectURL) == nil { acceptedRisk = try requireCustomSchemeAllowed(context) }
        if case .email(let address) = method {
            _ = try configuration.requireMagicLink()
            _ = try EmailAddress.normalize(address)
        }
        let service = try context.signInService(configuration: configuration)
        // A store that cannot be read fails now, before an email is sent or a grant exists.
        try service.checkStore()
        // Listen before anything is sent, so a busy port is reported before any grant exists.
        var listener: (any RedirectListening)?
        if let loopback = LoopbackRedirect(redirectURL: redirectURL) {
            listener = try context.services.listen(loopback, redirectURL, Int64(timeoutSeconds) * 1000)
            context.trace("login: listening on \(loopback.host):\(loopback.port)")
        }
        defer { listener?.close() }
        if acceptedRisk {
            // The browser's launcher may hold the URL, grant included, in its command line
            // (docs/signing-in.md, "Which browsers put the URL on a command line").
            context.streams.printError(
                """
                portal-token: warning: other local users can read command lines here (/proc is not mounted with \
                hidepid), and a browser may open this custom-scheme redirect URL through a launcher that holds \
                it in its own; prefer a loopback redirect URL, http://127.0.0.1:PORT/path, registered in Portal's \
                dashboard
                """
            )
        }
        try start(method, service, context)
        guard let listener else {
            context.streams.printError(
                """
                portal-token: the desktop handler ('portal-token redirect') finishes the sign-in when the browser \
                is sent back
                """
            )
            if let registration = DesktopRedirectHandler.registrationCommand(redirectURL: redirectURL) {
                context.streams.printError(
                    """
                    hint: if it is not set up yet: install \(DesktopRedirectHandler.fileName) and run \
                    '\(registration)'
                    """
                )
            }
            return
        }
        try SignInCompletion(context: context, service: service).finish(try wait(for: listener, service, context))
    }

    /// Sends the magic link, or opens (or shows) the provider's page.
    private func start(_ method: Method, _ service: SignInService, _ context: Context) throws {
        switch method {
        case .email(let address):
            try service.client.sendMagicLink(email: address)
            context.streams.printError(
                "portal-token: a sign-in link was sent to the address you gave; open it on this computer")
        case .google, .apple:
            let url = try service.client.authorizeURL(for: method.authMethod)
            let provider = method == .google ? "Google" : "Apple"
            var opens = opensBrowser && DesktopLauncher(context).hasDisplay
            if opens, let setting = context.promptsRuledOutBy() {
                context.streams.printError("portal-token: \(setting) rules out opening a browser")
                opens = false
            }
            if opens, DesktopLauncher(context).openBrowser(url) {
                context.trace("login: opened the \(provider) page with xdg-open")
                context.streams.printError("portal-token: continue in the browser to sign in with \(provider)")
            } else {
                // The one place the authorize URL is shown; its state is single-use.
                context.streams.printError("portal-token: open this address in a browser to sign in with \(provider):")
                context.streams.printError(url.text)
            }
        }
    }

    /// Waits for the browser; the redirect is completed while the browser waits for its page.
    private func wait(for listener: any RedirectListening, _ service: SignInService, _ context: Context) throws
        -> RedirectOutcome
    {
        let progress = ProgressLine(streams: context.streams)
        defer { progress.clear() }
        let result: Result<RedirectOutcome, any Error> = try listener.wait(progress: progress.show) { url in
            do {
                let outcome = try service.completeRedirect(url)
                if case .twoFactorRequired = outcome {
                    return .finish(
                        .success(outcome),
                        page: RedirectPage(
                            status: 200, title: "Two-factor code needed",
                            message:
                                """
                                Return to the terminal and enter the code from your authenticator app to finish \
                                signing in.
                                """
                        ))
                }
                return .finish(.success(outcome), page: .signedIn)
            } catch SignInError.notARedirect {
                return .keepWaiting(page: .failed("This address carries no sign-in."))
            } catch let error where CLIError(error).exitCode == .rejected {
                // Any web page can send the browser to the listener with a made-up grant or an
                // error parameter: Portal's refusal is reported and the real one still awaited
                // (docs/security.md, "Hardening rules"). Its timeout still bounds the wait.
                progress.clear()
                context.streams.printError(
                    """
                    portal-token: a sign-in that reached the listener was refused: \(CLIError(error).message); \
                    still waiting
                    """
                )
                return .keepWaiting(page: .failed("portal-token could not complete this sign-in."))
            } catch {
                return .finish(.failure(error), page: .failed("portal-token could not complete the sign-in."))
            }
        }
        return try result.get()
    }
}

struct RedirectCommand: Command {
    static let name = "redirect"
    static let auditOperation: AuditOperation? = .redirect
    static let isRefusedInClientMode = true
    static let summary = "Finish a sign-in from the URL the browser was sent back to"
    static let details = """
        Needs --env and --redirect-url. With -, the URL is read from stdin, which keeps
        it off the process list. Given as URL, it sits in this process's arguments,
        which any local user can read while it runs; its grant works once, so prefer -.

        --dbus-activated: how the desktop x-scheme-handler starts it
        (io.portalhq.PortalToken.desktop and io.portalhq.PortalToken.service, in
        contrib/desktop): the session bus starts it and the launcher hands it the URL
        in an org.freedesktop.Application.Open call, never on the command line; it
        leaves after 10 idle seconds. It answers the call once the URL is checked,
        before the grant is exchanged, so a launcher that was given the URL as an
        argument (a Chromium-based browser runs xdg-open URL, which on GNOME runs gio
        open URL) exits at once; the exchange's outcome goes to stderr (the session
        bus's log) and a desktop notification. Those launchers still hold the URL,
        readable by every local user, while they run: on a desktop, prefer a loopback
        redirect URL. Started by a launcher that ignores DBusActivatable, it receives
        no URL and says so, in a notification too (exit 2).

        With a custom-scheme redirect URL configured, redirect reads no URL unless
        login could accept one (/proc mounted with hidepid, or
        PORTAL_TOKEN_ACCEPT_CUSTOM_SCHEME_RISK=true): exit 2 otherwise. Exit 7, with
        nothing sent, when the URL is not a sign-in redirect for this configuration.

        A URL delivered again, by any process, resolves to the session it produced with
        nothing sent while that session is stored: the session record keeps a digest
        of the grant, never the grant. When Portal accepted the grant but the
        store refused the session (exit 4), the session waits in the kernel keyring
        for 15 minutes, and delivering the same URL again finishes the write without a
        second exchange. On a terminal a two-factor step is shown and asked for as by
        login; without one the step waits in the store for verify-totp, and a desktop
        notification says so.

        """ + redirectSettings

    enum Source: Equatable { case argument(String), standardInput, sessionBus }

    let source: Source

    init(arguments: ParsedArguments) throws(CLIError) {
        if arguments.has(.dbusActivated) {
            source = .sessionBus
            return
        }
        guard let url = arguments.operands.first else {
            throw .usage("'redirect' needs the URL the browser was sent to", hint: "see 'portal-token redirect --help'")
        }
        source = url == "-" ? .standardInput : .argument(url)
    }

    func run(in context: Context) throws {
        let configuration = try signInConfiguration(context)
        let redirectURL = try configuration.requireRedirectURL()
        if LoopbackRedirect(redirectURL: redirectURL) == nil {
            // No login could have accepted this URL: nothing of it is read or exchanged.
            do {
                _ = try requireCustomSchemeAllowed(context)
            } catch {
                if source == .sessionBus { Self.notifyFailure(error, context) }
                throw error
            }
        }
        let text: Secret
        switch source {
        case .argument(let url): text = Secret(url)
        case .standardInput: text = readLine(context)
        case .sessionBus:
            // The launcher that called Open waits for its answer with the URL on its command
            // line, so the answer comes once the URL is checked, before the grant is exchanged;
            // how the exchange went is told on stderr and in a notification (docs/signing-in.md,
            // "Completing it: a custom scheme and the desktop handler").
            let receivedOpen = try context.services.serveDesktopActivation(context.streams) { url in
                let service: SignInService
                let accepted: SignInService.AcceptedRedirect
                do {
                    service = try context.signInService(configuration: configuration)
                    accepted = try service.accept(url)
                } catch {
                    Self.notifyFailure(error, context)
                    throw error
                }
                return {
                    do {
                        try SignInCompletion(context: context, service: service, notifies: true).finish(
                            try service.complete(accepted))
                    } catch {
                        Self.notifyFailure(error, context)
                        throw error
                    }
                }
            }
            // Started from the entry's Exec= line rather than by the bus: the URL went nowhere,
            // and the person waiting in the browser must hear so rather than nothing.
            if !receivedOpen && context.environment["DBUS_STARTER_ADDRESS"] == nil {
                DesktopLauncher(context).notify(
                    "Portal sign-in did not finish",
                    """
                    The redirect URL did not reach portal-token. Copy it from the browser and run: portal-token \
                    redirect -
                    """)
                throw CLIError(
                    """
                    no redirect URL arrived: the desktop handler was started without D-Bus activation, so the \
                    launcher kept the URL
                    """,
                    hint:
                        """
                        use a launcher that honours DBusActivatable (GIO: gio open, GNOME, browsers), or copy the \
                        URL the browser was sent to and run 'portal-token redirect -'
                        """,
                    exitCode: .usage)
            }
            return
        }
        try complete(text, configuration: configuration, context: context, notifies: !context.streams.inputIsTerminal)
    }

    /// The desktop handler has no terminal: a failure is also a notification, with the error's
    /// message (which never holds a secret).
    private static func notifyFailure(_ error: any Error, _ context: Context) {
        DesktopLauncher(context).notify("Portal sign-in did not finish", CLIError(error).message)
    }

    private func complete(_ url: Secret, configuration: ClientAuthConfiguration, context: Context, notifies: Bool)
        throws
    {
        let service = try context.signInService(configuration: configuration)
        let outcome = try service.completeRedirect(url)
        try SignInCompletion(context: context, service: service, notifies: notifies).finish(outcome)
    }

    private func readLine(_ context: Context) -> Secret {
        var bytes = context.streams.readLine(limit: RedirectURL.maximumUTF16Length * 4 + 2)
        defer { zeroize(&bytes) }
        return Secret(bytes: bytes)
    }
}

struct VerifyTOTPCommand: Command {
    static let name = "verify-totp"
    static let auditOperation: AuditOperation? = .verifyTOTP
    static let isRefusedInClientMode = true
    static let summary = "Finish a sign-in that waits for a two-factor code"
    static let details = """
        Completes the two-factor step a sign-in left waiting, such as after the desktop
        handler; a step waits 10 minutes. The code comes from CODE, else a prompt on
        the terminal (three tries), else one line on stdin; on a terminal where a
        setting rules prompts out, CODE is needed (exit 2). A code that is not exactly
        six digits is refused before it is sent (exit 2); a code Portal refuses leaves
        the step usable (exit 6). When Portal accepted a code but the store refused the
        session, verify-totp run again within 15 minutes finishes the write without a
        new code. Exit 1 when no step is waiting, 6 when it expired.

        """ + redirectSettings

    let code: String?

    init(arguments: ParsedArguments) throws(CLIError) {
        code = arguments.operands.first
    }

    func run(in context: Context) throws {
        let service = try context.signInService(configuration: try signInConfiguration(context))
        let step = try service.pendingStep()
        let completion = SignInCompletion(context: context, service: service)
        defer { completion.prompt?.close() }
        let session: PortalSession
        if let kept = try service.finishAcceptedCode(for: step) {
            session = kept
        } else if let code {
            session = try verifyOnce(code, step, service)
        } else if let prompt = completion.prompt {
            session = try completion.askForCode(step, on: prompt, stepKept: true)
        } else {
            if context.streams.inputIsTerminal, let setting = context.promptsRuledOutBy() {
                throw CLIError.usage(
                    "no two-factor code given, and \(setting) rules out asking for it",
                    hint: "give it as 'portal-token verify-totp CODE'")
            }
            var line = context.streams.readLine(limit: 256)
            defer { zeroize(&line) }
            guard !line.isEmpty else {
                throw CLIError.usage(
                    "no two-factor code given", hint: "give it as 'portal-token verify-totp CODE', or on stdin")
            }
            session = try verifyOnce(String(decoding: line, as: UTF8.self), step, service)
        }
        completion.report(session, replayed: false)
    }

    private func verifyOnce(_ code: String, _ step: PendingTwoFactor, _ service: SignInService) throws -> PortalSession
    {
        do {
            return try service.verify(code: code, for: step)
        } catch let error as ClientAuthError where error.isRejectedCode {
            throw CLIError(
                error.message,
                hint:
                    """
                    the step stays usable until it expires: run 'portal-token verify-totp' with the code your app \
                    shows now
                    """,
                exitCode: .rejected)
        }
    }
}

extension String {
    /// Left-aligned in `width` columns, at least one space after.
    func padding(_ width: Int) -> String {
        self + String(repeating: " ", count: max(1, width - count))
    }
}
