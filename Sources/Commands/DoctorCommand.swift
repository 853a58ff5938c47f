import Glibc
import Operations
import PortalTokenCore

struct DoctorCommand: Command {
    static let name = "doctor"
    static let summary = "Check the keyring, the encrypted file, the config and the hook"
    static let details = """
        One line per check, ok or problem, with a hint for each problem, in this order:
        the config file; the session bus; the Secret Service provider (gnome-keyring,
        KeePassXC, KWallet, oo7 or another, named from the process that owns
        org.freedesktop.secrets) and a provider quirks line with what portal-token
        knows of its ways; whether the default keyring is locked; the backend in use
        and why; the encrypted file (path, owner, mode, passphrase source: a problem
        when it is the backend in use and only a prompt could give the passphrase,
        since a caller with no terminal cannot be asked); a second store (the store
        not in use also holds items); the hook; git's credential helpers in every
        scope (a problem when a plaintext store helper is in effect; an empty value
        resets the list, as git reads it); whether prompts are possible and what rules
        them out (GIT_TERMINAL_PROMPT=0, credential.interactive); the kernel keyring;
        with --network, whether the Portal API answers.

        A session with no bus, or a bus with no Secret Service provider, is a problem
        only when the secret-service backend is asked for. Without git, the helpers
        are not checked. Prompts and the kernel keyring are reported, never a
        problem. Every keyring call is bounded. Never prints a secret. Exit status 0
        when nothing is a problem, else 1.

        With --format json, prints {"checks":[{"check","detail","hint","status"}],
        "ok"}: status ok or problem, hint null when there is none, ok true when
        nothing is a problem.
        """

    let json: Bool
    let network: Bool

    init(arguments: ParsedArguments) throws(CLIError) {
        json = try arguments.jsonFormat()
        network = arguments.has(.network)
    }

    func run(in context: Context) throws {
        let checks = Doctor.run(context, network: network).checks
        if json {
            let objects: [JSONValue] = checks.map { check in
                .object([
                    "check": .string(check.name), "status": .string(check.ok ? "ok" : "problem"),
                    "detail": .string(check.detail), "hint": check.hint.map { .string($0) } ?? .null,
                ])
            }
            context.streams.print(
                JSONValue.object(["ok": .bool(checks.allSatisfy(\.ok)), "checks": .array(objects)]).serialized)
        } else {
            for check in checks {
                context.streams.print(
                    "\(check.ok ? "ok     " : "problem") \(check.name): \(TerminalText.escaped(check.detail))")
                if let hint = check.hint { context.streams.print("        hint: \(hint)") }
            }
        }
        // Exit 1 for "something is a problem", as the lines above already say what.
        if !checks.allSatisfy(\.ok) { throw SilentExit(code: .notSignedIn) }
    }
}
