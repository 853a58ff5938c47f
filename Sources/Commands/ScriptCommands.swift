import Basics
import Glibc
import Operations
import PortalTokenCore

/// How scripts and tools receive the session token: `token`, script-mode `get`, `exec` and
/// `exec-credential` all read the session the same way (docs/sessions.md, "The commands that read the session"), so one
/// place renders it.
enum TokenOutput {
    /// Prints the token alone on one line, or the JSON object, and wipes the buffer.
    static func printToken(_ session: PortalSession, json asJSON: Bool, _ context: Context) {
        var bytes = Array(((asJSON ? SessionOutput.json(session) : session.token.text) + "\n").utf8)
        context.streams.write(bytes, to: context.streams.output)
        zeroize(&bytes)
    }
}

/// Follows a script command's own text, after the blank line that separates them.
private let scriptSessionRules = """
    The session is read as script-mode get reads it: handed out with no network call
    before its expiry, checked once with Portal after the 24-hour idle window, ended
    at the 7-day cap. Exit status 1 when not signed in, 3 when the session just
    ended, 4 when the store cannot be read, 5 when Portal cannot be reached.

    """ + sessionSettings

struct TokenCommand: Command {
    static let name = "token"
    static let auditOperation: AuditOperation? = .token
    static let summary = "Print the Portal session token, for scripts (never reads stdin)"
    static let details = """
        Prints the configured environment's session token alone on one line:
        TOKEN=$(portal-token token). With --format json, prints {"authEnvironmentId",
        "endUserId", "expiresAt", "token"} instead, expiresAt in RFC 3339, as
        script-mode get does. Never reads stdin, so it is safe inside a while read loop
        and on an open pipe; scripts should prefer it to get.


        """ + scriptSessionRules

    let json: Bool

    init(arguments: ParsedArguments) throws(CLIError) {
        json = try arguments.jsonFormat()
    }

    func run(in context: Context) throws {
        let session = try context.usableSession()
        TokenOutput.printToken(session, json: json, context)
    }
}

struct ExecCommand: Command {
    static let name = "exec"
    static let auditOperation: AuditOperation? = .exec
    static let summary = "Run a command with the session token in its environment"
    static let details = """
        Replaces itself (execvp) with COMMAND, found on PATH as the shell would find it,
        whose environment gains PORTAL_CLIENT_SESSION_TOKEN (or NAME with --token-var),
        PORTAL_CLIENT_SESSION_TOKEN_EXPIRES_AT (RFC 3339, when the session has an
        expiry), PORTAL_AUTH_ENVIRONMENT_ID and PORTAL_END_USER_ID. NAME cannot be one
        of the other three, nor PATH (exit status 2). The token is never in an argument.
        COMMAND keeps portal-token's process ID, so signals reach it and the exit
        status is COMMAND's: 127 when it is not found, 126 when it cannot be run, as
        env(1) gives them.

        Every word from COMMAND on is COMMAND's, with or without '--': settings flags
        go before exec (portal-token --env ID exec COMMAND). Descriptors portal-token
        opened itself (a keyring connection, a lock) are closed in COMMAND; those it
        was started with are passed on.

        With --proxy, COMMAND never gets the token: portal-token starts a proxy to the
        Portal API on 127.0.0.1 for COMMAND alone (any free port), with a delegated
        credential for COMMAND that the proxy alone can verify, living --ttl (default
        12h, at most 7d) and no longer than the proxy; it runs COMMAND as its child
        with PORTAL_API_HOST=127.0.0.1:PORT,
        PORTAL_TOKEN_PROXY_URL, PORTAL_TOKEN_PROXY_HEADER (Portal-Token-Proxy),
        PORTAL_TOKEN_PROXY_CREDENTIAL and PORTAL_AUTH_ENVIRONMENT_ID in its environment
        (an inherited PORTAL_CLIENT_SESSION_TOKEN removed), and stops the proxy once
        COMMAND has exited. Each request COMMAND sends carries the header
        Portal-Token-Proxy: $PORTAL_TOKEN_PROXY_CREDENTIAL; the proxy adds the bearer
        (see portal-token proxy --help). COMMAND may narrow its credential further with
        delegate --from, and delegations lists and revokes it. SIGTERM and SIGHUP are passed on; SIGINT and
        SIGQUIT from the terminal reach COMMAND directly. The exit status is COMMAND's,
        128 + N after signal N.


        """ + scriptSessionRules

    static let defaultTokenVariable = "PORTAL_CLIENT_SESSION_TOKEN"
    static let reservedVariables: Set<String> = [
        "PORTAL_CLIENT_SESSION_TOKEN_EXPIRES_AT", "PORTAL_AUTH_ENVIRONMENT_ID", "PORTAL_END_USER_ID", "PATH",
    ]

    let tokenVariable: String
    let command: [String]
    /// `--proxy`: the command gets a proxy to the Portal API, never the token.
    let useProxy: Bool
    /// With `--proxy`: the seconds the child's credential lives.
    let proxyLifetime: Int64
    /// The descriptors open when the command started: those the caller meant the child to have.
    /// Anything portal-token opens afterwards (a keyring connection, a lock) is closed at exec.
    let inheritedDescriptors: Set<Int32>

    init(arguments: ParsedArguments) throws(CLIError) {
        inheritedDescriptors = Self.openDescriptors()
        let variable = arguments.value(.tokenVar) ?? Self.defaultTokenVariable
        guard Self.isVariableName(variable) else {
            throw .usage(
                "--token-var takes an environment variable name such as PORTAL_CLIENT_SESSION_TOKEN",
                hint: "use letters, digits and underscores, not starting with a digit")
        }
        // The names exec sets itself would overwrite the token (or it them), and PATH is how
        // COMMAND is found.
        guard !Self.reservedVariables.contains(variable) else {
            throw .usage(
                """
                --token-var cannot be \(variable): \
                \(variable == "PATH" ? "COMMAND is looked up through it" : "exec sets it itself")
                """,
                hint: "choose another name, such as API_TOKEN")
        }
        tokenVariable = variable
        useProxy = arguments.has(.proxy)
        var lifetime: Int64 = 12 * 3600
        if let text = arguments.value(.ttl) {
            guard useProxy else { throw .usage("--ttl goes with --proxy") }
            guard let seconds = AuditDuration.seconds(text), seconds > 0, seconds <= Delegate.maximumLifetime else {
                throw .usage("--ttl takes a duration such as 90s, 30m, 12h or 7d, at most 7d")
            }
            lifetime = seconds
        }
        proxyLifetime = lifetime
        command = arguments.operands
        guard !command.isEmpty, !command[0].isEmpty else {
            throw .usage("'exec' needs a command to run", hint: "portal-token exec [--] COMMAND [ARG...]")
        }
    }

    static func isVariableName(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else {
            return false
        }
        return name.utf8.allSatisfy { byte in
            byte == UInt8(ascii: "_") || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
        }
    }

    func run(in context: Context) throws {
        if useProxy { try runWithProxy(in: context) }
        let session = try context.usableSession()
        // What the command gets; put back as it was when the exec fails and this process goes on.
        let exported = [
            tokenVariable, "PORTAL_CLIENT_SESSION_TOKEN_EXPIRES_AT", "PORTAL_AUTH_ENVIRONMENT_ID", "PORTAL_END_USER_ID",
        ]
        let previous = exported.map { name in getenv(name).map { String(cString: $0) } }
        setenv(tokenVariable, session.token.text, 1)
        if let expiresAt = session.expiresAt {
            setenv("PORTAL_CLIENT_SESSION_TOKEN_EXPIRES_AT", RFC3339.format(expiresAt), 1)
        } else {
            unsetenv("PORTAL_CLIENT_SESSION_TOKEN_EXPIRES_AT")
        }
        setenv("PORTAL_AUTH_ENVIRONMENT_ID", session.authEnvironmentID, 1)
        setenv("PORTAL_END_USER_ID", session.endUserID, 1)
        // Written now: COMMAND replaces this process, and its exit code is its own.
        context.audit?.program = String(command[0].split(separator: "/").last ?? "")
        context.recordAudit(error: nil, exitCode: nil)
        closeOwnDescriptorsOnExec()
        var argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        // The command gets the caller's core-file limits, not portal-token's 0 (docs/security.md,
        // "Hardening rules"); execve makes it dumpable again.
        var failure: Int32 = 0
        CoreFileLimit.withCallerLimits {
            execvp(command[0], &argv)
            // Only a failed exec returns.
            failure = errno
        }
        for pointer in argv { free(pointer) }
        for (name, value) in zip(exported, previous) {
            if let value { setenv(name, value, 1) } else { unsetenv(name) }
        }
        let name = String(command[0].prefix(256))
        if failure == ENOENT || failure == ENOTDIR {
            throw CLIError(
                "cannot run '\(name)': command not found", hint: "check the name and PATH", exitCode: .commandNotFound)
        }
        throw CLIError("cannot run '\(name)': \(String(cString: strerror(failure)))", exitCode: .commandNotExecutable)
    }

    /// Marks close-on-exec every descriptor this process opened after the command started.
    func closeOwnDescriptorsOnExec() {
        for descriptor in Self.openDescriptors() where descriptor > 2 && !inheritedDescriptors.contains(descriptor) {
            let flags = fcntl(descriptor, F_GETFD)
            if flags >= 0 { _ = fcntl(descriptor, F_SETFD, flags | FD_CLOEXEC) }
        }
    }

    /// The process's open descriptors, from /proc/self/fd.
    static func openDescriptors() -> Set<Int32> {
        guard let directory = opendir("/proc/self/fd") else { return [] }
        defer { closedir(directory) }
        var result: Set<Int32> = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if let descriptor = Int32(name) { result.insert(descriptor) }
        }
        return result
    }
}

struct ExecCredentialCommand: Command {
    static let name = "exec-credential"
    static let auditOperation: AuditOperation? = .execCredential
    static let summary = "Print the token as a Kubernetes ExecCredential (client-go credential plugin)"
    static let details = """
        Prints {"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
        "status":{"expirationTimestamp":…,"token":…}}, the expiry in RFC 3339 (left out
        when the session has none). Answers in v1beta1 when the apiVersion in
        KUBERNETES_EXEC_INFO (set by kubectl and other client-go programs) asks for it,
        else in v1; a KUBERNETES_EXEC_INFO that is not JSON, or asks for another
        apiVersion, is exit status 2. In a kubeconfig: users[].user.exec with
        apiVersion, command: portal-token, args: [exec-credential] and
        interactiveMode: Never.


        """ + scriptSessionRules

    init(arguments: ParsedArguments) throws(CLIError) {}

    func run(in context: Context) throws {
        let apiVersion = try ExecCredential.apiVersion(execInfo: context.environment["KUBERNETES_EXEC_INFO"])
        var bytes = ExecCredential.document(try context.usableSession(), apiVersion: apiVersion)
        context.streams.write(bytes, to: context.streams.output)
        zeroize(&bytes)
    }

}

/// `login --with-token`: adopts a token minted by the user's own backend, read from stdin so it
/// never sits in an argument, once Portal has accepted it.
struct TokenAdoption {
    static let maximumTokenBytes = 64 * 1024

    let endUserID: String?

    func run(in context: Context) throws {
        _ = try context.authEnvironmentID()
        let token: Secret
        if context.streams.inputIsTerminal, let setting = context.promptsRuledOutBy() {
            throw CLIError.usage(
                "no token on stdin, and \(setting) rules out asking for it",
                hint: "portal-token login --with-token < token-file")
        }
        if context.streams.inputIsTerminal, let prompt = TerminalPrompt() {
            // Typed or pasted at the terminal, with echo off, as a passphrase is.
            token = Secret(prompt.read(prompt: "Client Session Token: ").text.trimmingWhitespace)
            prompt.close()
        } else {
            var bytes = context.streams.readAll(limit: Self.maximumTokenBytes)
            defer { zeroize(&bytes) }
            guard bytes.count <= Self.maximumTokenBytes else {
                throw CLIError.usage(
                    "the input on stdin is larger than a token (64 KiB)", hint: "give one token on one line")
            }
            token = Secret(String(decoding: bytes, as: UTF8.self).trimmingWhitespace)
        }
        guard !token.isEmpty else {
            throw CLIError.usage("no token on stdin", hint: "portal-token login --with-token < token-file")
        }
        guard token.withBytes({ !$0.contains { $0 < 0x21 || $0 == 0x7f } }) else {
            throw CLIError.usage(
                "the token on stdin holds spaces or control characters", hint: "give one token on one line")
        }
        let sessions = try context.sessionService()
        switch try sessions.adoptChecked(token: token, endUserID: endUserID?.trimmingWhitespace) {
        case .adopted(let session):
            context.rememberAccount(session)
            context.streams.printError(
                "portal-token: signed in as \(session.endUserID) in environment '\(session.authEnvironmentID)'")
        case .refused(let status):
            throw CLIError(
                "Portal refused the token (HTTP \(status) to GET \(SessionService.validationPath)); nothing was stored",
                hint: "mint a new token for the end user, or check --env and --api-host", exitCode: .rejected)
        case .noEndUser:
            throw CLIError(
                "Portal accepted the token but named no end user; nothing was stored",
                hint: "give the end user with --end-user ID", exitCode: .rejected)
        }
    }
}
