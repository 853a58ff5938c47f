import Glibc
import Operations
import PortalTokenCore

/// The live line `login` shows on a terminal while it waits for the browser: where it listens
/// and how long is left, redrawn in place each second and cleared when the browser arrives.
/// Without a terminal it says once where it listens and for how long.
final class ProgressLine {
    private let streams: StandardStreams
    private let isLive: Bool
    private var address = ""
    private var drawn = false
    private var announced = false

    init(streams: StandardStreams) {
        self.streams = streams
        isLive = streams.errorIsTerminal
    }

    func show(_ event: RedirectListenerProgress) {
        switch event {
        case .listening(let addresses, let port):
            address = (addresses.first ?? "127.0.0.1") + ":\(port)"
        case .waiting(let remaining):
            if isLive {
                draw(
                    """
                    portal-token: waiting for the browser on \(address), \(Self.clock(remaining)) left (Ctrl-C to \
                    stop)
                    """
                )
            } else if !announced {
                streams.printError(
                    "portal-token: waiting for the browser on \(address) for up to \(Self.clock(remaining))")
            }
            announced = true
        case .ignoredRequest:
            break
        case .redirectReceived:
            clear()
        }
    }

    func clear() {
        guard drawn else { return }
        streams.write(Array("\r\u{1B}[2K".utf8), to: streams.error)
        drawn = false
    }

    private func draw(_ text: String) {
        streams.write(Array(("\r\u{1B}[2K" + text).utf8), to: streams.error)
        drawn = true
    }

    /// `m:ss`.
    static func clock(_ milliseconds: Int64) -> String {
        let seconds = max(0, (milliseconds + 999) / 1000)
        let rest = seconds % 60
        return "\(seconds / 60):\(rest < 10 ? "0" : "")\(rest)"
    }
}

/// Starting programs of the desktop on the user's behalf: the browser for an authorize URL,
/// a notification when the desktop handler finishes. Each gets portal-token's environment (the
/// passphrase variable was already removed from it), `/dev/null` for its streams, a process
/// group of its own (Ctrl-C in the terminal does not close the browser), and default signals.
struct DesktopLauncher {
    let programs: any ProgramLauncher
    let environment: [String: String]

    init(_ context: Context) {
        programs = context.services.programs
        environment = context.environment
    }

    /// A graphical session to open a browser in.
    var hasDisplay: Bool {
        !(environment["DISPLAY"] ?? "").isEmpty || !(environment["WAYLAND_DISPLAY"] ?? "").isEmpty
    }

    /// `xdg-open URL`: the authorize URL on its command line is the one place it leaves the process.
    func openBrowser(_ url: Secret) -> Bool {
        programs.start("xdg-open", [url.text], waitMilliseconds: 3000)
    }

    /// A desktop notification, for the desktop handler, which has no terminal to speak on; what
    /// it quotes has its control characters escaped, as on a terminal. Best effort: nothing
    /// happens without a display or `notify-send`.
    func notify(_ summary: String, _ body: String) {
        guard hasDisplay else { return }
        _ = programs.start(
            "notify-send", ["--app-name=portal-token", summary, TerminalText.escaped(body)], waitMilliseconds: 2000)
    }
}

/// Finishing a sign-in once the redirect is handled: the two-factor step on a terminal (the
/// enrollment code, then the prompt), or the word on what to do next without one.
struct SignInCompletion {
    static let attempts = 3

    let context: Context
    let service: SignInService
    /// Whether a person is at a terminal to show the enrollment to and ask for a code, and no
    /// setting rules the question out.
    let prompt: TerminalPrompt?
    /// The desktop handler: no terminal, so a notification says how it went.
    let notifies: Bool

    init(context: Context, service: SignInService, notifies: Bool = false) {
        self.context = context
        self.service = service
        prompt = context.streams.inputIsTerminal && context.promptsRuledOutBy() == nil ? TerminalPrompt() : nil
        self.notifies = notifies
    }

    func finish(_ outcome: RedirectOutcome) throws {
        defer { prompt?.close() }
        switch outcome {
        case .signedIn(let session, let replayed):
            report(session, replayed: replayed)
        case .twoFactorRequired(let step, let enrollment, let notKept, let replayed):
            guard let prompt else {
                // No one to ask: the step waits in the store for verify-totp, unless it could not be kept.
                if let notKept { throw notKept }
                let minutes = max(1, (step.expiresAt - context.now() + 59) / 60)
                let next = "run 'portal-token verify-totp' within \(minutes) minute\(minutes == 1 ? "" : "s")"
                context.streams.printError(
                    "portal-token: \(step.endUserID) needs a two-factor code to finish signing in: \(next)")
                if notifies {
                    DesktopLauncher(context).notify(
                        "Portal sign-in needs a two-factor code", "In a terminal, \(next).")
                }
                return
            }
            if let enrollment {
                showEnrollment(enrollment, endUserID: step.endUserID, on: prompt)
            } else if replayed {
                prompt.say("This sign-in link was opened before; its two-factor step is still waiting.\n")
            }
            let session = try askForCode(step, on: prompt, stepKept: notKept == nil)
            report(session, replayed: false)
        }
    }

    /// Asks up to three times. A code that is not six digits is refused here, and one Portal
    /// refuses leaves the `userJwt` usable, so both just ask again.
    func askForCode(_ step: PendingTwoFactor, on prompt: TerminalPrompt, stepKept: Bool) throws -> PortalSession {
        var lastError: ClientAuthError?
        for attempt in 1...Self.attempts {
            let code = prompt.read(prompt: "Two-factor code for \(TerminalText.escaped(step.endUserID)): ")
            do {
                return try service.verify(code: code.text, for: step)
            } catch let error as ClientAuthError where error.isRejectedCode || error == .invalidArgument(.totpCode) {
                lastError = error
                let left = Self.attempts - attempt
                if left > 0 {
                    prompt.say("\(TerminalText.escaped(error.message)); \(left) more tr\(left == 1 ? "y" : "ies")\n")
                }
            }
        }
        let error = lastError!
        let hint = stepKept ? "run 'portal-token verify-totp' before the step expires to try again" : error.hint
        throw CLIError(error.message, hint: hint, exitCode: error.exitCode)
    }

    /// The enrollment QR code, the secret for typing by hand, and the warning, on the terminal
    /// only: stderr may be a log file, and these make the user's codes.
    private func showEnrollment(_ link: Secret, endUserID: String, on prompt: TerminalPrompt) {
        prompt.say(
            """

            Set up two-factor sign-in for \(TerminalText.escaped(endUserID)): scan this code with your \
            authenticator app.


            """
        )
        do throws(CLIError) {
            prompt.show(try context.services.renderQRCode(link))
        } catch {
            prompt.say(TerminalText.escaped("(\(error.message)\(error.hint.map { "; \($0)" } ?? ""))") + "\n")
        }
        if let secret = TOTPEnrollment.secret(in: link) {
            prompt.say("\nOr enter this secret by hand: ")
            prompt.show(Self.grouped(secret))
            prompt.say("\n")
        }
        prompt.say("Never share this code or secret: anyone who has it can make your sign-in codes.\n\n")
    }

    /// The secret in groups of four, as authenticator apps show it.
    static func grouped(_ secret: Secret) -> Secret {
        secret.withBytes { bytes in
            var output: [UInt8] = []
            for (index, byte) in bytes.enumerated() {
                if index > 0, index % 4 == 0 { output.append(UInt8(ascii: " ")) }
                output.append(byte)
            }
            defer { zeroize(&output) }
            return Secret(bytes: output)
        }
    }

    func report(_ session: PortalSession, replayed: Bool) {
        context.rememberAccount(session)
        let note = replayed ? " (this sign-in link was used before; nothing was sent to Portal)" : ""
        context.streams.printError(
            "portal-token: signed in as \(session.endUserID) in environment '\(session.authEnvironmentID)'\(note)")
        if notifies {
            DesktopLauncher(context).notify(
                "Signed in to Portal", "Signed in as \(session.endUserID).")
        }
    }
}
