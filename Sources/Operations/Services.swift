import PortalTokenCore

/// The adapters a command reaches, through its Context and nowhere else: the ports of the
/// outside world, each as the one operation that makes or runs its adapter. The composition root
/// (`Composition`, the one module that imports the adapter modules) fills them with the real ones
/// once per invocation; a test fills them with fakes, and the rest (the `auto` decision, the
/// locks, the session cache) runs as it does for real (docs/development.md, "Modules and the
/// dependency rule").
public struct Services {
    /// The D-Bus session bus, bounded; nil when there is none.
    public var connectSessionBus: (_ timeoutMilliseconds: Int) throws(StoreError) -> (any SessionBusConnection)?
    /// The Secret Service as an item store, every call bounded; it asks `promptPermission`
    /// before an unlock prompt, and only then, and reads through `sessionBus` (the run's one
    /// connection) when no unlock is needed.
    public var keyringItems:
        (
            _ timeoutMilliseconds: Int, _ promptPermission: @escaping () -> PromptPermission,
            _ sessionBus: @escaping () -> (any SessionBusConnection)?
        ) -> any ItemStore
    /// What `doctor` asks the Secret Service.
    public var keyringDiagnosis: (_ timeoutMilliseconds: Int) -> any KeyringDiagnosis
    /// The encrypted file as an item store.
    public var fileItems: (FileStoreOptions) -> any ItemStore
    /// Writes the store file again with its key as the options ask, under a new passphrase when
    /// one is asked for (once the file is open: `file-key`); returns what opens it now, nil when
    /// there is no file.
    public var rekeyFile:
        (FileStoreOptions, _ newPassphrase: (() throws(StoreError) -> Passphrase)?) throws(StoreError)
            -> FileKeyProtection?
    /// KV version 2 on an OpenBao or Vault server as an item store.
    public var vaultItems: (VaultOptions, VaultLoginCache?) -> any ItemStore
    /// Whether a store file is there, in any state.
    public var fileExists: (_ path: String) -> Bool
    /// What opens the store file, from its header; nil when it is not there or not readable.
    public var fileKeyProtection: (_ path: String) -> FileKeyProtection?
    /// The store file's lock (`<file>.lock`), the file backend's store lock: held around a whole
    /// change, and taken again, reentrantly, by the file's own writes.
    public var fileLock: (_ storePath: String, _ timeoutMilliseconds: Int) -> any SessionLock
    /// Renames a migrated store file aside under its lock; returns the new path.
    public var moveFileAside: (_ path: String, _ lock: any SessionLock) throws(StoreError) -> String
    /// The HTTP transport to Portal.
    public var transport: (HTTPTransportOptions) -> any HTTPTransport
    /// Short-lived secrets outside any store (the kernel keyring).
    public var secretCache: () -> any SecretCache
    /// Runs the on-session-invalidated hook with the caller's environment as its parent.
    public var hookLauncher: (_ parentEnvironment: [String: String]) -> any HookLauncher
    /// Other programs: git, the browser, notifications.
    public var programs: any ProgramLauncher
    /// Listens for the browser's redirect on a loopback address.
    public var listen:
        (_ redirect: LoopbackRedirect, _ configuredRedirectURL: String, _ timeoutMilliseconds: Int64)
            throws(RedirectListenerError) -> any RedirectListening
    /// The QR code of a text, drawn for a terminal.
    public var renderQRCode: (Secret) throws(CLIError) -> Secret
    /// Serves the desktop handler's `org.freedesktop.Application` on the session bus until it is
    /// idle, handing each URL to `accept`, which checks it (what it throws answers `Open`) and
    /// returns what finishes the sign-in, run once `Open` is answered; returns whether an `Open`
    /// call came (docs/signing-in.md, "Completing it: a custom scheme and the desktop handler").
    public var serveDesktopActivation:
        (_ streams: StandardStreams, _ accept: @escaping (Secret) throws -> DesktopSignIn) throws -> Bool
    /// The audit log (docs/audit.md), opened only when a credential event is recorded or the
    /// log is read.
    public var auditLog: (AuditLogOptions) -> any AuditLog
    /// What /proc shows of another process, named by the kernel (a socket's peer), for its audit
    /// line: its pid, executable, user namespace and parents, as far as they can be read.
    public var describeProcess: @Sendable (_ pid: Int32) -> AuditCaller
    /// The clock, in seconds since the epoch.
    public var now: () -> Int64
    /// The text of `/proc/self/mountinfo`, nil when it cannot be read: whether other users can
    /// read command lines (`ProcessListVisibility`).
    public var procMountInfo: () -> String?
    /// The proxy's transport: bodies streamed both ways, no redirect, no proxy.
    public var streamingTransport: (HTTPTransportOptions) -> any StreamingHTTPTransport
    /// Binds a local server whose bodies stream; on a Unix socket each request comes with the
    /// caller's kernel identity, for the handler to judge by the rules.
    public var bindLocalServer: (_ address: LocalListenAddress) throws(CLIError) -> any LocalStreamingServer
    /// Serves the agent's sockets until a signal or the idle exit (docs/agent.md, "The sockets"):
    /// each request is handed to `handle` as soon as its head is read, its body streaming, with
    /// the caller's kernel identity and the socket it came in on.
    public var serveAgent: (_ options: AgentServeOptions, _ handle: @escaping AgentHandler) throws -> Void
    /// One exchange with the agent over its socket, bounded (docs/agent.md, "Client mode").
    public var agentExchange:
        (_ socketPath: String, _ request: HTTPRequest, _ timeoutMilliseconds: Int) throws(HTTPError) -> HTTPResponse
    /// What the agent serves its requests with (Composition's): secrets cached in the kernel
    /// keyring where the agent may use it, else in its own memory (docs/agent.md, "Where the keys
    /// are kept"), and no agent of its own to ask. nil: these services.
    public var agentServices: (() -> Services)?
    /// Puts one of the agent's questions on the desktop, with "Allow" and "Deny", and waits for
    /// the user's choice (docs/agent.md, "Asking the user").
    public var askOnDesktop: DesktopAsking

    public init(
        connectSessionBus: @escaping (Int) throws(StoreError) -> (any SessionBusConnection)?,
        keyringItems:
            @escaping (
                Int, @escaping () -> PromptPermission, @escaping () -> (any SessionBusConnection)?
            ) -> any ItemStore,
        keyringDiagnosis: @escaping (Int) -> any KeyringDiagnosis,
        fileItems: @escaping (FileStoreOptions) -> any ItemStore,
        rekeyFile:
            @escaping (FileStoreOptions, (() throws(StoreError) -> Passphrase)?) throws(StoreError)
            -> FileKeyProtection? = {
                _, _ throws(StoreError) in throw StoreError(.unavailable, "this build cannot re-key the store file")
            },
        vaultItems: @escaping (VaultOptions, VaultLoginCache?) -> any ItemStore,
        fileExists: @escaping (String) -> Bool,
        fileLock: @escaping (String, Int) -> any SessionLock,
        moveFileAside: @escaping (String, any SessionLock) throws(StoreError) -> String,
        transport: @escaping (HTTPTransportOptions) -> any HTTPTransport,
        secretCache: @escaping () -> any SecretCache,
        hookLauncher: @escaping ([String: String]) -> any HookLauncher,
        programs: any ProgramLauncher,
        listen: @escaping (LoopbackRedirect, String, Int64) throws(RedirectListenerError) -> any RedirectListening,
        renderQRCode: @escaping (Secret) throws(CLIError) -> Secret,
        serveDesktopActivation: @escaping (StandardStreams, @escaping (Secret) throws -> DesktopSignIn) throws -> Bool,
        now: @escaping () -> Int64,
        procMountInfo: @escaping () -> String? = { nil },
        fileKeyProtection: @escaping (String) -> FileKeyProtection? = { _ in nil },
        serveAgent: @escaping (AgentServeOptions, @escaping AgentHandler) throws -> Void = { _, _ in
            throw CLIError("this build cannot serve an agent", exitCode: .storage)
        },
        agentExchange: @escaping (String, HTTPRequest, Int) throws(HTTPError) -> HTTPResponse = {
            path, _, _ throws(HTTPError) in throw .cannotConnect(host: "the agent at \(path)")
        },
        agentServices: (() -> Services)? = nil,
        askOnDesktop: @escaping DesktopAsking = { _, _, _, _ in .unavailable("this build shows no notifications") },
        auditLog: @escaping (AuditLogOptions) -> any AuditLog = { _ in NoAuditLog() },
        describeProcess: @escaping @Sendable (Int32) -> AuditCaller = { AuditCaller(pid: $0 > 0 ? $0 : nil) },
        streamingTransport: @escaping (HTTPTransportOptions) -> any StreamingHTTPTransport = { _ in
            UnavailableStreamingTransport()
        },
        bindLocalServer: @escaping (LocalListenAddress) throws(CLIError) -> any LocalStreamingServer = {
            _ throws(CLIError) in
            throw CLIError("this build cannot serve a local socket", exitCode: .usage)
        }
    ) {
        self.auditLog = auditLog
        self.askOnDesktop = askOnDesktop
        self.describeProcess = describeProcess
        self.connectSessionBus = connectSessionBus
        self.keyringItems = keyringItems
        self.keyringDiagnosis = keyringDiagnosis
        self.fileItems = fileItems
        self.rekeyFile = rekeyFile
        self.vaultItems = vaultItems
        self.fileExists = fileExists
        self.fileKeyProtection = fileKeyProtection
        self.fileLock = fileLock
        self.moveFileAside = moveFileAside
        self.transport = transport
        self.secretCache = secretCache
        self.hookLauncher = hookLauncher
        self.programs = programs
        self.listen = listen
        self.renderQRCode = renderQRCode
        self.serveDesktopActivation = serveDesktopActivation
        self.now = now
        self.procMountInfo = procMountInfo
        self.streamingTransport = streamingTransport
        self.bindLocalServer = bindLocalServer
        self.serveAgent = serveAgent
        self.agentExchange = agentExchange
        self.agentServices = agentServices
    }
}

/// Where the agent listens and for how long.
public struct AgentServeOptions {
    /// The main socket's path, used when systemd passed no sockets; nil when none is known
    /// (no `XDG_RUNTIME_DIR`), which only socket activation can make up for.
    public var mainSocketPath: String?
    /// The restricted socket's path, likewise.
    public var restrictedSocketPath: String?
    /// Stop once no client has been connected for this long; nil serves until a signal.
    public var idleExitMilliseconds: Int64?
    /// One line for the agent's log (stderr).
    public var log: @Sendable (String) -> Void

    public init(
        mainSocketPath: String?, restrictedSocketPath: String?, idleExitMilliseconds: Int64?,
        log: @escaping @Sendable (String) -> Void
    ) {
        self.mainSocketPath = mainSocketPath
        self.restrictedSocketPath = restrictedSocketPath
        self.idleExitMilliseconds = idleExitMilliseconds
        self.log = log
    }
}

/// Answers one request to the agent through its exchange (the body read while it arrives, the
/// answer written while it is made), given who asked and on which socket. Called on the
/// connection's thread; several run at once.
public typealias AgentHandler =
    @Sendable (HTTPServerRequest, any LocalExchange, CallerIdentity, AgentRules.Socket) -> Void

/// What finishes a sign-in the desktop handler accepted: the grant's exchange, which runs after
/// the launcher has its answer; what it throws is reported on stderr (and in a notification).
public typealias DesktopSignIn = () throws -> Void

/// What the encrypted file store is opened with.
public struct FileStoreOptions {
    public var path: String
    /// How long a derived key stays in the kernel keyring unused (each use starts it again);
    /// 0 turns the cache off.
    public var keyCacheTimeoutSeconds: Int
    /// The longest a derived key stays there, however often it is used; 0 turns the cache off.
    public var keyCacheMaximumSeconds: Int
    /// The file's lock (`Services.fileLock`), which the caller holds around a whole change.
    public var lock: any SessionLock
    /// Asked only when a key must be derived; throws when there is none.
    public var passphrase: (PassphrasePurpose) throws(StoreError) -> Passphrase
    /// One line for each damaged file moved aside.
    public var warn: (String) -> Void
    /// Called after the write that created the file.
    public var created: () -> Void
    /// Where derived keys are cached: the run's secret cache (`Services.secretCache`).
    public var keyCache: any SecretCache
    /// The PCRs every write seals the key to (`file-tpm`); nil: writes do not seal it.
    public var sealTo: [Int]?
    /// Whether the passphrase opens a sealed file too (`file-tpm-recovery`).
    public var passphraseRecovery: Bool
    /// The TPM's TCTI, as tpm2-tools take it (`TPM2TOOLS_TCTI`); nil: `/dev/tpmrm0`.
    public var tcti: String?
}

/// Where the audit log is and how it behaves (docs/audit.md).
public struct AuditLogOptions {
    /// `$XDG_STATE_HOME/portal-token`.
    public var directory: String
    /// The size at which the log is rotated.
    public var maximumBytes: Int
    /// Whether each line also goes to the systemd journal.
    public var journal: Bool
    /// Says, once per process, that the log cannot be written, and how to fix it.
    public var warn: (_ message: String, _ hint: String?) -> Void
}

/// The streaming transport of a `Services` that has none (the in-process tests').
public struct UnavailableStreamingTransport: StreamingHTTPTransport {
    public init() {}

    public func exchange(_ request: StreamedHTTPRequest, into sink: any HTTPResponseSink) throws(HTTPError)
        -> StreamedHTTPOutcome
    {
        throw .other(host: HTTPError.hostForMessages(request.url) ?? "?", detail: "no streaming transport")
    }
}
