import Basics
import Glibc
import PortalTokenCore

/// What a command runs with: the streams, the environment and the resolved settings, and what
/// follows from them once per run: the backend in use, its item store behind the store lock, the
/// session service, the sign-in service. Every adapter comes from `services`; nothing here names
/// one (docs/development.md, "Modules and the dependency rule").
public final class Context {
    package static let defaultKeyringTimeoutMilliseconds = 3000
    /// gpg-agent's default-cache-ttl is 10 minutes; a run of git commands over a quarter of an
    /// hour should ask once.
    package static let defaultKeyCacheTimeoutSeconds = 900
    /// gpg-agent's max-cache-ttl is 2 hours: however busy, the user unlocks again after that.
    package static let defaultKeyCacheMaximumSeconds = 7200
    package static let maximumKeyCacheTimeoutSeconds = 30 * 24 * 3600

    package let streams: StandardStreams
    package let environment: [String: String]
    package let settings: Settings
    package let services: Services
    /// The name the binary was started under, for messages.
    package let programName: String
    /// Why the config file could not be used, for `doctor`, which runs on without it.
    package var settingsError: (any Error)?
    /// The URL git's `credential.<url>.interactive` is matched against: the credential
    /// request's, once one is read; else the Portal API's (Prompting.swift).
    package var promptURL: String?
    /// Whether a setting rules every prompt out, once asked (Prompting.swift).
    package var decidedPromptRuling: String??
    /// This run's audit line, for a command that records one (AuditRecording.swift).
    package var audit: AuditDraft?

    package init(
        streams: StandardStreams, environment: [String: String], settings: Settings, programName: String,
        services: Services
    ) {
        self.streams = streams
        self.environment = environment
        self.settings = settings
        self.services = services
        self.programName = programName
    }

    /// Whether `--verbose` or `PORTAL_TOKEN_TRACE` asked for the debug trace.
    package var isTracing: Bool { ((try? settings.bool(.trace)) ?? nil) ?? false }

    /// The debug trace, on stderr: a line per step, every secret left out by the callers (they
    /// pass paths, statuses, end users and reasons, never a value).
    package var trace: @Sendable (String) -> Void {
        guard isTracing else { return { _ in } }
        let streams = self.streams
        return { streams.printError("portal-token: trace: \($0)") }
    }

    package func now() -> Int64 { services.now() }

    // MARK: Settings

    package static func requestedBackend(_ settings: Settings) throws(CLIError) -> RequestedBackend {
        guard let text = settings.value(.backend) else { return .auto }
        guard let backend = RequestedBackend(rawValue: text) else {
            throw .usage(
                "\(settings.origin(of: .backend)) must be auto, secret-service, file or vault",
                hint: backendHint(for: text, among: RequestedBackend.allCases.map(\.rawValue)))
        }
        return backend
    }

    /// "did you mean …?" for a word that is not a backend's name: a store's common name
    /// (`keyring`) or a near misspelling; nil when nothing is close. The word is never echoed.
    package static func backendHint(for word: String, among names: [String]) -> String? {
        let meant = RequestedBackend.commonlyCalled(word)?.rawValue ?? Suggestion.nearest(to: word, among: names)
        return meant.flatMap { names.contains($0) ? "did you mean '\($0)'?" : nil }
    }

    package var keyringTimeout: Int {
        get throws { try settings.milliseconds(.keyringTimeout, default: Self.defaultKeyringTimeoutMilliseconds) }
    }

    package var keyCacheTimeoutSeconds: Int {
        get throws {
            try settings.seconds(
                .keyCacheTimeout, default: Self.defaultKeyCacheTimeoutSeconds,
                maximum: Self.maximumKeyCacheTimeoutSeconds)
        }
    }

    /// A Vault session copy is served this long after the server last confirmed it: long enough
    /// for a burst of git commands or a script loop, short enough that a session another host
    /// ended is seen within seconds.
    package static let defaultVaultCacheSeconds = 10

    package var vaultCacheSeconds: Int {
        get throws {
            try settings.seconds(
                .vaultCacheSeconds, default: Self.defaultVaultCacheSeconds, maximum: Self.maximumKeyCacheTimeoutSeconds)
        }
    }

    package var keyCacheMaximumSeconds: Int {
        get throws {
            try settings.seconds(
                .keyCacheMax, default: Self.defaultKeyCacheMaximumSeconds, maximum: Self.maximumKeyCacheTimeoutSeconds)
        }
    }

    /// `PORTAL_TOKEN_FILE`, else `$XDG_DATA_HOME/portal-token/store` (docs/settings.md, "The
    /// encrypted file store").
    package func storeFilePath() throws(CLIError) -> String {
        if let path = settings.value(.storeFile) { return path }
        if environment["XDG_DATA_HOME"]?.hasPrefix("/") != true, environment["HOME"]?.isEmpty ?? true {
            throw .usage(
                "cannot place the encrypted store: neither XDG_DATA_HOME nor HOME is set",
                hint: "set PORTAL_TOKEN_FILE to the store's path")
        }
        return xdgDirectory("XDG_DATA_HOME", default: ".local/share") + "/portal-token/store"
    }

    /// XDG base directories (XDG Base Directory Specification): the variable when it holds an
    /// absolute path, otherwise the default under `HOME`.
    package func xdgDirectory(_ variable: String, default relative: String) -> String {
        if let value = environment[variable], value.hasPrefix("/") { return value }
        return (environment["HOME"] ?? "") + "/" + relative
    }

    /// The auth environment every Portal-session command acts in (`accountChoice`).
    package func authEnvironmentID() throws -> String { try accountChoice().authEnvironmentID }

    /// The Portal API base URL from the api-host setting, else the API host the chosen account
    /// signed in on (docs/portal-api.md, "Base URL").
    package func apiBase() throws -> PortalAPIBase {
        let configured = settings.value(.apiHost)
        let host = try configured ?? accountChoice().apiHost ?? PortalAPIBase.defaultHost
        do {
            return try PortalAPIBase(apiHost: host)
        } catch {
            let origin =
                configured == nil ? "the API host remembered in \(accountsPath)" : settings.origin(of: .apiHost)
            throw CLIError.usage("\(origin): \(error.message)", hint: error.hint)
        }
    }

    // MARK: Accounts

    /// Which account a command acts for, and why: what `status` and `accounts` say
    /// (docs/sessions.md, "Choosing an account").
    package struct AccountChoice {
        package var authEnvironmentID: String
        /// The end user, where one is named or bound; nil: the environment's session (its newest),
        /// which is the one end user's wherever one is signed in to it.
        package var endUserID: String?
        /// The API host it signed in on, used where no api-host setting names one.
        package var apiHost: String?
        package var reason: String
    }

    private var chosenAccount: AccountChoice?

    /// The account, decided once per run, in this order (docs/sessions.md, "Choosing an
    /// account"): --env or PORTAL_AUTH_ENVIRONMENT_ID (with --end-user or PORTAL_END_USER_ID);
    /// the account bound to this directory or the nearest one above it (`accounts use`); the
    /// config file's auth-environment-id (and end-user), the named default; the one account
    /// remembered here; the one session stored. Several, and none chosen, is a usage error that
    /// lists them. Nothing here is global state one shell changes for another.
    package func accountChoice() throws -> AccountChoice {
        if let chosenAccount { return chosenAccount }
        guard let choice = try chooseAccount(readingStores: true) else {
            throw CLIError.usage(
                "no auth environment ID is set, and no account is signed in on this machine",
                hint: "sign in with 'portal-token login --env ID …', or set PORTAL_AUTH_ENVIRONMENT_ID, pass --env ID, "
                    + "or add auth-environment-id to the config file")
        }
        chosenAccount = choice
        return choice
    }

    /// The choice the settings, this directory and the accounts file make, reading no store: what a
    /// client of the agent asks it for; nil leaves the choice to the agent.
    package func localAccountChoice() throws -> AccountChoice? { try chooseAccount(readingStores: false) }

    /// The choice as far as the settings, this directory and the accounts file make it; without
    /// `readingStores`, nil where only the stored sessions could decide.
    private func chooseAccount(readingStores: Bool) throws -> AccountChoice? {
        let named = settings.value(.authEnvironmentID)?.trimmingWhitespace ?? ""
        let endUser = settings.value(.endUser)?.trimmingWhitespace
        let namedEndUser = endUser?.isEmpty == false ? endUser : nil
        if !named.isEmpty, settings.isGivenOutsideTheConfigFile(.authEnvironmentID) {
            // Named for this run: a damaged accounts file only loses the API host it remembers.
            let file = (try? rememberedAccounts()) ?? RememberedAccounts()
            return try account(named, namedEndUser, reason: settings.origin(of: .authEnvironmentID), in: file)
        }
        let file = try rememberedAccounts()
        if let directory = Self.currentDirectory(), let bound = file.directoryAccount(for: directory) {
            return try account(
                bound.authEnvironmentID, bound.endUserID ?? namedEndUser,
                reason: "the account of \(bound.path), bound in \(accountsPath)", in: file)
        }
        if !named.isEmpty {
            return try account(named, namedEndUser, reason: settings.origin(of: .authEnvironmentID), in: file)
        }
        let choose = """
            choose one with --env ID (and --end-user ID), bind this directory with 'portal-token accounts use \
            ENV [END_USER]', or name a default with auth-environment-id (and end-user) in the config file
            """
        let remembered = file.accounts.filter { namedEndUser == nil || $0.endUserID == namedEndUser }
        if remembered.count == 1 {
            return AccountChoice(
                authEnvironmentID: remembered[0].authEnvironmentID, endUserID: namedEndUser,
                apiHost: remembered[0].apiHost,
                reason: "the one account signed in on this machine, remembered in \(accountsPath)")
        }
        if remembered.count > 1 {
            throw CLIError.usage(
                "\(remembered.count) accounts are signed in on this machine and none is chosen: "
                    + remembered.map(Self.describe).joined(separator: ", "), hint: choose)
        }
        // Nothing remembered (signed in before accounts were, or the file was removed): the one
        // session stored answers.
        guard readingStores else { return nil }
        let stored = try SessionItems.all(in: items(backendChoice().backend)).filter {
            namedEndUser == nil || $0.endUserID == namedEndUser
        }
        if stored.count == 1 {
            return AccountChoice(
                authEnvironmentID: stored[0].authEnvironmentID, endUserID: namedEndUser, apiHost: nil,
                reason: "the one session stored in \(try storeDescription(backendChoice().backend))")
        }
        if stored.count > 1 {
            let names = stored.map { "'\($0.authEnvironmentID)' (end user \($0.endUserID))" }.sorted()
            throw CLIError.usage(
                "\(stored.count) sessions are stored and none is chosen: " + names.joined(separator: ", "), hint: choose
            )
        }
        return nil
    }

    /// The account of `authEnvironmentID`: of `endUserID` when one is named, else the
    /// environment's one remembered end user (none remembered: the environment's one session).
    /// Several remembered, and none named, is a usage error listing them.
    private func account(
        _ authEnvironmentID: String, _ endUserID: String?, reason: String, in file: RememberedAccounts
    ) throws(CLIError) -> AccountChoice {
        let remembered = file.accounts(of: authEnvironmentID)
        if let endUserID {
            let host = (remembered.first { $0.endUserID == endUserID } ?? remembered.first)?.apiHost
            return AccountChoice(
                authEnvironmentID: authEnvironmentID, endUserID: endUserID, apiHost: host, reason: reason)
        }
        guard remembered.count <= 1 else {
            throw .usage(
                "\(remembered.count) end users are signed in to '\(authEnvironmentID)' and none is chosen: "
                    + remembered.map(Self.describe).joined(separator: ", "),
                hint: "choose one with --end-user ID (PORTAL_END_USER_ID), or bind this directory with "
                    + "'portal-token accounts use \(authEnvironmentID) END_USER'")
        }
        // One end user (or none) remembered: the environment's session, whoever it is of.
        return AccountChoice(
            authEnvironmentID: authEnvironmentID, endUserID: nil, apiHost: remembered.first?.apiHost, reason: reason)
    }

    package static func describe(_ account: RememberedAccount) -> String {
        "'\(account.authEnvironmentID)' (end user \(account.endUserID)\(account.apiHost.map { " on \($0)" } ?? ""))"
    }

    /// The Portal API's URL as the settings and the accounts file name it, reading no store:
    /// what a store's own prompt asks git about (`credential.interactive` for this URL), while
    /// that store is being opened.
    package func apiURLReadingNoStore() -> String? {
        let host =
            settings.value(.apiHost) ?? chosenAccount?.apiHost ?? rememberedAPIHost() ?? PortalAPIBase.defaultHost
        return (try? PortalAPIBase(apiHost: host))?.url
    }

    /// The API host of the account the settings, this directory and the accounts file choose.
    private func rememberedAPIHost() -> String? {
        (try? chooseAccount(readingStores: false))??.apiHost
    }

    /// portal-token's record of the accounts signed in here: written by every sign-in, never a
    /// secret, beside the config file (docs/sessions.md, "Remembered accounts").
    package var accountsPath: String {
        xdgDirectory("XDG_CONFIG_HOME", default: ".config") + "/portal-token/accounts.json"
    }

    /// The accounts file; empty when it does not exist. A damaged or foreign file is a usage
    /// error naming it, and is left as it is.
    package func rememberedAccounts() throws(CLIError) -> RememberedAccounts {
        let bytes: [UInt8]
        do {
            bytes = try FileReading.contents(of: accountsPath, limit: 1 << 20, ownOnly: true)
        } catch .missing {
            return RememberedAccounts()
        } catch {
            throw .usage(
                "cannot use the accounts file \(accountsPath): \(error.described())",
                hint: "name the auth environment with --env ID, or remove the file and sign in again")
        }
        do {
            return try RememberedAccounts.decode(bytes)
        } catch {
            throw .usage(
                "cannot use the accounts file \(accountsPath): \(error.reason)",
                hint: "name the auth environment with --env ID, or remove the file and sign in again")
        }
    }

    /// Records the account a sign-in (or an adopted token) just stored, with the API host
    /// configured for it. A record that cannot be written is a warning: the sign-in itself stands.
    package func rememberAccount(_ session: PortalSession) {
        let account = RememberedAccount(
            authEnvironmentID: session.authEnvironmentID, endUserID: session.endUserID,
            apiHost: settings.value(.apiHost) ?? (try? accountChoice())?.apiHost)
        let before = (try? rememberedAccounts()) ?? RememberedAccounts()
        updateAccounts("remember the account") { $0.recording(account) }
        // A second end user of an environment: from now on, commands that name neither ask to choose.
        let known = before.accounts(of: account.authEnvironmentID)
        guard !known.isEmpty, !known.contains(where: { $0.endUserID == account.endUserID }) else { return }
        let names = (known.map(\.endUserID) + [account.endUserID]).joined(separator: ", ")
        streams.printError(
            """
            portal-token: note: \(known.count + 1) end users are signed in to '\(account.authEnvironmentID)' now \
            (\(names)): a command chooses one with --end-user ID, or in a directory bound with 'portal-token accounts \
            use \(account.authEnvironmentID) END_USER'; 'portal-token logout --end-user ID' signs one out
            """)
    }

    /// Forgets the account of `endUserID` in `authEnvironmentID` (after a logout; every one of
    /// the environment with none named).
    package func forgetAccount(_ authEnvironmentID: String, endUserID: String?) {
        updateAccounts("forget the account") { $0.forgetting(authEnvironmentID, endUserID: endUserID) }
    }

    /// Changes the accounts file under its lock, atomically; a failure is a warning.
    private func updateAccounts(_ purpose: String, _ change: (RememberedAccounts) -> RememberedAccounts) {
        if let failure = changeAccounts(change) {
            streams.printError("portal-token: warning: could not \(purpose) in \(accountsPath): \(failure)")
        }
    }

    /// Changes the accounts file under its lock, atomically; returns why it could not, or nil.
    package func changeAccounts(_ change: (RememberedAccounts) -> RememberedAccounts) -> String? {
        let path = accountsPath
        do {
            try Directories.createParent(of: path)
        } catch {
            return error.reason
        }
        let lock: FileLock
        do {
            lock = try FileLock.acquire(path + ".lock", timeoutMilliseconds: max(try keyringTimeout, 1000))
        } catch {
            return "its lock is held or unusable"
        }
        defer { lock.release() }
        let current: RememberedAccounts
        do {
            current = try rememberedAccounts()
        } catch {
            return error.message
        }
        let changed = change(current)
        guard changed != current else { return nil }
        do {
            try AtomicFile.replace(path, with: changed.encode(), temporaryPrefix: ".accounts.json.tmp-")
        } catch {
            return error.reason
        }
        return nil
    }

    /// The working directory, as the kernel names it (canonical: no symbolic link in it); nil
    /// when it cannot be had (removed meanwhile).
    package static func currentDirectory() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether a credential-protocol request is answered from the Portal session
    /// (docs/sessions.md, "Portal origins in the credential protocol") rather than from generic
    /// storage: the core's routing, with this run's API host.
    package func isPortalOrigin(_ request: CredentialRequest) throws(CLIError) -> Bool {
        do {
            // The API host the account signed in on, where the accounts file alone says which
            // account (routing reads no store: most requests are for other hosts).
            let apiHost = settings.value(.apiHost) ?? rememberedAPIHost()
            return try CredentialRouting.route(request, apiHost: apiHost) == .portalSession
        } catch {
            throw .usage("\(settings.origin(of: .apiHost)): \(error.message)", hint: error.hint)
        }
    }

    // MARK: The backend

    private var connectedSessionBus: (any SessionBusConnection)??

    /// The session bus, connected once per run, bounded like the keyring; nil when there is none
    /// (no address, no socket: known at once, docs/storage.md, "Backends and the auto decision").
    package func sessionBus() throws -> (any SessionBusConnection)? {
        if let connectedSessionBus { return connectedSessionBus }
        let bus = try services.connectSessionBus(try keyringTimeout)
        connectedSessionBus = .some(bus)
        return bus
    }

    /// What the session bus shows of the Secret Service: no bus, no provider, or a provider.
    /// The bus daemon answers, never the keyring, so a stalled keyring reads as present.
    package func secretServicePresence() throws -> SecretServicePresence {
        guard let bus = try sessionBus() else { return .noBus }
        return try bus.hasSecretServiceProvider() ? .provider : .noProvider
    }

    private var decidedBackend: BackendChoice?

    /// The backend in use and why (what `status` shows), decided once per run: in `auto`, from
    /// what the session bus shows. Silent: the fallback to the file is announced by the write
    /// that creates the file store.
    /// Which program provides the Secret Service on the session bus, when the bus can say; nil
    /// with no bus or no provider, or when asking fails (only `doctor` and `status` ask, and a
    /// name is all they want).
    package func secretServiceProvider() -> SecretServiceProvider? {
        guard let bus = try? sessionBus() else { return nil }
        return try? bus.secretServiceProvider()
    }

    /// A keyring that is locked or did not answer in time, or whose provider changed what it was
    /// given, names its provider: that program's
    /// dialog may be what is waiting (docs/storage.md, "Providers"). Asked only then, of the bus
    /// daemon, within the bound.
    package func namingTheProvider(_ error: StoreError) -> StoreError {
        guard error.kind == .locked || error.kind == .timedOut || error.namesProvider,
            decidedBackend?.backend == .secretService,
            let provider = secretServiceProvider()
        else { return error }
        var named = error
        named.message += "; provider: \(provider.name)"
        return named
    }

    package func backendChoice() throws -> BackendChoice {
        if let decidedBackend { return decidedBackend }
        let requested = try Self.requestedBackend(settings)
        let presence = requested == .auto ? try secretServicePresence() : nil
        let choice = try BackendChoice.decide(requested, requestedBy: settings.origin(of: .backend)) {
            () throws(StoreError) in presence ?? .noBus
        }
        decidedBackend = choice
        trace("backend: \(choice.backend.rawValue) (\(choice.reason))")
        return choice
    }

    private var keyringStoreLock: SessionFileLock?
    private var fileStoreLock: (any SessionLock)?

    /// The cross-process lock around every change to the store in use (docs/storage.md, "The
    /// store lock"), shared by everything in this run (it is reentrant within the process).
    package func storeLock() throws -> any SessionLock { try storeLock(for: backendChoice().backend) }

    /// The store lock of one backend: the encrypted file's own `<file>.lock`, which its writes
    /// take too, so a write takes one lock; for the keyring and Vault, `sessions.lock`. A
    /// holder's every keyring call is bounded, so waiting for a few of them is bounded too.
    package func storeLock(for backend: BackendChoice.Backend) throws -> any SessionLock {
        let timeout = max(4 * (try keyringTimeout), 1000)
        if backend == .file {
            if let fileStoreLock { return fileStoreLock }
            let lock = services.fileLock(try storeFilePath(), timeout)
            fileStoreLock = lock
            return lock
        }
        if let keyringStoreLock { return keyringStoreLock }
        let lock = SessionFileLock(context: self, timeoutMilliseconds: timeout)
        keyringStoreLock = lock
        return lock
    }

    /// The trace of store calls, nil unless tracing (a nil costs the calls nothing).
    private var storeTrace: ((String) -> Void)? {
        guard isTracing else { return nil }
        let trace = self.trace
        return { trace($0) }
    }

    /// Each backend's store, once opened. (Two properties rather than a dictionary keyed by the
    /// backend: that would cost every run a search of the binary's protocol conformances.)
    private var keyringItemStore, fileItemStore, vaultItemStore: LockedItemStore?

    /// One backend's items, every write under the store lock; one store per backend and run, so
    /// git credentials and the Portal session share one unlock.
    package func items(_ backend: BackendChoice.Backend) throws -> any ItemStore {
        switch backend {
        case .secretService:
            if let keyringItemStore { return keyringItemStore }
            // Reads go over the session bus the run holds for `auto` and the lock check, so a
            // `get` makes one connection; a bus that cannot be had leaves them to libsecret.
            let store = LockedItemStore(
                services.keyringItems(try keyringTimeout, askPromptPermission) { [unowned self] in try? sessionBus() },
                lock: try storeLock(for: .secretService), name: "secret-service store", trace: storeTrace)
            keyringItemStore = store
            return store
        case .file:
            if let fileItemStore { return fileItemStore }
            let store = LockedItemStore(
                services.fileItems(try fileStoreOptions()), lock: try storeLock(for: .file), name: "file store",
                trace: storeTrace)
            fileItemStore = store
            return store
        case .vault:
            if let vaultItemStore { return vaultItemStore }
            // An AppRole login is kept for later runs in the run's secret cache, with the key
            // cache's timeouts; either at 0 keeps nothing and reads nothing kept
            // (docs/storage.md, "Vault / OpenBao").
            let idle = try keyCacheTimeoutSeconds, maximum = try keyCacheMaximumSeconds
            let loginCache =
                idle > 0 && maximum > 0
                ? VaultLoginCache(cache: services.secretCache(), idleSeconds: idle, maximumSeconds: maximum) : nil
            let store = LockedItemStore(
                services.vaultItems(try vaultOptions(), loginCache), lock: try storeLock(for: .vault),
                name: "vault store",
                trace: storeTrace)
            vaultItemStore = store
            return store
        }
    }

    /// The Vault store's server, trust, layout and token source (docs/settings.md, "The Vault store").
    package func vaultOptions() throws(CLIError) -> VaultOptions {
        do {
            return try VaultOptions(settings: settings, home: environment["HOME"])
        } catch {
            throw .usage(error.message, hint: error.hint)
        }
    }

    package func fileStoreOptions() throws -> FileStoreOptions {
        let path = try storeFilePath()
        let source = passphraseSource(storePath: path)
        let streams = self.streams
        return FileStoreOptions(
            path: path, keyCacheTimeoutSeconds: try keyCacheTimeoutSeconds,
            keyCacheMaximumSeconds: try keyCacheMaximumSeconds,
            lock: try storeLock(for: .file), passphrase: source.passphrase(for:),
            warn: { streams.printError("portal-token: warning: \($0)") },
            created: { [weak self] in
                // The one announcement of the fallback (docs/storage.md, "Backends and the auto
                // decision"): by the write that creates the file store, never again.
                if let notice = (try? self?.backendChoice())??.fallbackNotice {
                    streams.printError("portal-token: \(notice)")
                }
            }, keyCache: services.secretCache(), sealTo: try fileSealing(),
            passphraseRecovery: try fileRecovery(), tcti: environment["TPM2TOOLS_TCTI"])
    }

    /// Where the passphrase of the store file at `storePath` comes from.
    package func passphraseSource(storePath: String) -> PassphraseSource {
        PassphraseSource(
            settings: settings, environment: environment, streams: streams, storePath: storePath,
            promptPermission: askPromptPermission)
    }

    /// Whether a sealed file keeps its passphrase as the recovery route (`file-tpm-recovery`).
    package func fileRecovery() throws(SettingError) -> Bool {
        switch settings.value(.fileTPMRecovery)?.trimmingWhitespace.lowercased() {
        case nil, "", "passphrase": return true
        case "none": return false
        default:
            throw SettingError(
                "\(settings.origin(of: .fileTPMRecovery)) must be passphrase or none",
                hint: "none keys the file for this machine's TPM alone: losing the TPM loses the file")
        }
    }

    /// The PCRs each write seals the file's key to: nil when `file-tpm` is off, [] for the TPM
    /// alone (docs/storage.md, "A key sealed by the TPM").
    package func fileSealing() throws(SettingError) -> [Int]? {
        guard try settings.bool(.fileTPM) == true else { return nil }
        guard let text = settings.value(.fileTPMPCRs)?.trimmingWhitespace, !text.isEmpty else { return [] }
        var pcrs: [Int] = []
        for word in text.split(whereSeparator: { $0 == "," || $0 == "+" }) {
            guard let pcr = Int(word.trimmingWhitespace), (0..<24).contains(pcr) else {
                throw SettingError(
                    "\(settings.origin(of: .fileTPMPCRs)) must list PCRs from 0 to 23",
                    hint: "for example 7, or 0,7")
            }
            if !pcrs.contains(pcr) { pcrs.append(pcr) }
        }
        return pcrs.sorted()
    }

    /// git credentials: in the backend in use, and only it.
    package func credentials() throws -> CredentialItems { CredentialItems(try items(backendChoice().backend)) }

    /// Where a waiting two-factor step is kept: beside the session, in the backend in use.
    package func twoFactorSteps() throws -> TwoFactorStepItems {
        TwoFactorStepItems(try items(backendChoice().backend))
    }

    /// Whether a backend may hold anything: the file exists; the keyring is registered on the bus.
    package func storeExists(_ backend: BackendChoice.Backend) throws -> Bool {
        switch backend {
        case .file: return services.fileExists(try storeFilePath())
        case .secretService: return try secretServicePresence() == .provider
        case .vault: return (try? vaultOptions()) != nil
        }
    }

    /// The store in words, for messages.
    package func storeDescription(_ backend: BackendChoice.Backend) throws -> String {
        switch backend {
        case .file: return "the encrypted file store at \(try storeFilePath())"
        case .secretService: return "the Secret Service"
        case .vault: return "the Vault store at \(try vaultOptions().address)"
        }
    }

    // MARK: The session

    /// The bus's ID, or why it could not be had: asked once per run.
    private var knownBusID: Result<String, StoreError>?

    /// What the session cache names a backend's store after: what the store is, never how it was
    /// asked for (docs/storage.md, "The session cache"). The file by its canonical path (resolved
    /// when asked, so a file created meanwhile keeps its name); the keyring by the ID of the bus
    /// it is on, asked of the bus once per run (a bus that cannot say leaves the session uncached).
    package func cacheStoreName(_ backend: BackendChoice.Backend, filePath: String) throws(StoreError) -> String {
        switch backend {
        case .file:
            return "file\u{0}" + CanonicalPath.of(filePath)
        case .secretService:
            let id = knownBusID ?? Result { () throws(StoreError) in try busForKeyringChecks().busID() }
            knownBusID = id
            return "secret-service\u{0}" + (try id.get())
        case .vault:
            // The server, and where on it the items are: two prefixes are two stores.
            let options = try? vaultOptions()
            return [
                "vault", options?.address ?? "", options?.namespace ?? "", options?.mount ?? "",
                options?.pathPrefix ?? "",
            ].joined(separator: "\u{0}")
        }
    }

    /// The session bus, for the checks the session cache makes on the keyring; no bus, or one
    /// that cannot be connected to, is a store error.
    private func busForKeyringChecks() throws(StoreError) -> any SessionBusConnection {
        let connected: (any SessionBusConnection)?
        do {
            connected = try sessionBus()
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.failed, "the session bus could not be asked (\(type(of: error)))")
        }
        guard let bus = connected else {
            throw StoreError(
                .unavailable, "no D-Bus session bus",
                hint: "run inside a desktop session or dbus-run-session, or use --backend file")
        }
        return bus
    }

    /// The backend's sessions behind a short-lived copy in the kernel keyring. Every change to a
    /// session, a sign-in's included, goes through it, so the copy never outlives what is stored.
    /// Other hosts change the Vault store's sessions, so its copy is served only
    /// `vaultCacheSeconds` after the server last confirmed it, then asked of the server again
    /// (docs/storage.md, "Vault / OpenBao").
    package func sessions() throws -> Sessions {
        // A cached session from the keyring is served only once the keyring says it is unlocked:
        // that question goes out now, beside `auto`'s, so both cost one round trip.
        if decidedBackend == nil, [.auto, .secretService].contains(try Self.requestedBackend(settings)) {
            try? sessionBus()?.askWhetherDefaultCollectionIsLocked()
        }
        let choice = try backendChoice()
        let sessions = try sessions(choice)
        sessions.trace = storeTrace
        // Every session read or written is the one the audit line names (docs/audit.md, "Fields").
        if let audit { sessions.observe = { [weak audit] in audit?.session = $0 } }
        return sessions
    }

    private func sessions(_ choice: BackendChoice) throws -> Sessions {
        if choice.backend == .vault {
            return Sessions(
                try items(.vault),
                cache: Sessions.Cache(
                    services.secretCache(), lock: try storeLock(),
                    store: { [unowned self] () throws(StoreError) in try cacheStoreName(.vault, filePath: "") },
                    timeoutSeconds: try keyCacheTimeoutSeconds, maximumSeconds: try keyCacheMaximumSeconds, now: now,
                    recheckSeconds: try vaultCacheSeconds))
        }
        let filePath = choice.backend == .file ? try storeFilePath() : ""
        return Sessions(
            try items(choice.backend),
            cache: Sessions.Cache(
                services.secretCache(), lock: try storeLock(),
                store: { [unowned self] () throws(StoreError) in
                    try cacheStoreName(choice.backend, filePath: filePath)
                },
                timeoutSeconds: try keyCacheTimeoutSeconds, maximumSeconds: try keyCacheMaximumSeconds, now: now,
                confirmUnlocked: choice.backend == .secretService
                    ? { [unowned self] () throws(StoreError) in try confirmKeyringUnlocked() } : nil))
    }

    /// One bounded read of the default collection's `Locked` property on the session bus, without
    /// libsecret: what a cached keyring answer costs before it is served. A locked collection is
    /// asked to unlock with no prompt first, as every read of it is.
    package func confirmKeyringUnlocked() throws(StoreError) {
        let bus = try busForKeyringChecks()
        if try bus.isDefaultCollectionLocked(), try !bus.unlockDefaultCollectionWithoutPrompt() {
            throw StoreError(.locked, "the default keyring is locked", hint: StoreError.keyringLockedHint)
        }
    }

    /// The Portal session of the configured auth environment: the transport, the host gate of
    /// the configured API, the session lock and the user's hook. `ended` is told, before the hook
    /// runs, each time this process is the one that removed the session.
    /// The chosen account's session; `endUserID` names another end user of its environment (a
    /// git request's `username`, as `credential.<url>.username` gives it).
    package func sessionService(endUserID: String? = nil, ended: (() -> Void)? = nil) throws -> SessionService {
        try checkPortalSettings()
        let apiBase = try apiBase()
        try refuseOwnProxy(apiBase)
        let hook = SessionHook(context: self)
        let account = try accountChoice()
        return SessionService(
            authEnvironmentID: account.authEnvironmentID, endUserID: endUserID ?? account.endUserID, apiBase: apiBase,
            store: try sessions(),
            lock: try storeLock(), transport: try transport(),
            requests: PortalRequestBuilder(gate: PortalHostGate(apiBase: apiBase), version: Release.version),
            sessionEnded: { event in
                ended?()
                hook.run(event)
            }, warn: { [streams] in streams.printError("portal-token: warning: \($0)") },
            now: now)
    }

    /// Refuses a run whose API host is the proxy named by PORTAL_TOKEN_PROXY_URL, as `exec --proxy`
    /// gives its command and `proxy --listen` prints: the session token never goes to the proxy's
    /// own address, and commands under the proxy use the proxy, not the session (docs/proxy.md,
    /// "portal-token under the proxy"). The proxy answers to 127.0.0.1 and localhost alike.
    package func refuseOwnProxy(_ apiBase: PortalAPIBase) throws(CLIError) {
        guard isOwnProxy(apiBase) else { return }
        throw CLIError(
            """
            the Portal API host is the proxy that 'exec --proxy' or 'proxy --listen' runs (PORTAL_TOKEN_PROXY_URL); \
            commands under it use the proxy, not the session
            """,
            hint: """
                send requests to $PORTAL_TOKEN_PROXY_URL with the header $PORTAL_TOKEN_PROXY_HEADER, or run \
                portal-token outside the proxy's environment (unset PORTAL_API_HOST and PORTAL_TOKEN_PROXY_URL)
                """,
            exitCode: .usage)
    }

    /// Whether the API host is the proxy PORTAL_TOKEN_PROXY_URL names.
    package func isOwnProxy(_ apiBase: PortalAPIBase) -> Bool {
        guard let proxyURL = environment[ProxyEnvironment.url], let proxy = PortalEndpoint(configured: proxyURL),
            let api = PortalEndpoint(configured: apiBase.url)
        else { return false }
        func address(_ endpoint: PortalEndpoint) -> String {
            let host = endpoint.host == "localhost" ? "127.0.0.1" : endpoint.host
            return "\(host):\(endpoint.port ?? (endpoint.allowsCleartext ? 80 : 443))"
        }
        return address(proxy) == address(api)
    }

    /// The header that admits a request to the proxy the API host is (`exec --proxy` and
    /// `proxy --listen` give its name and value), when both are set: `api` sends through the proxy
    /// with it, and with no bearer of its own.
    package func ownProxyMarker(_ apiBase: PortalAPIBase) -> HTTPHeader? {
        guard isOwnProxy(apiBase), let name = environment[ProxyEnvironment.header], !name.isEmpty,
            let value = environment[ProxyEnvironment.credential], !value.isEmpty
        else { return nil }
        return HTTPHeader(name, value)
    }

    /// The HTTP transport with the configured bounds; every request named in the trace when it is on.
    package func transport() throws -> any HTTPTransport {
        let transport = services.transport(try HTTPTransportOptions(settings: settings))
        return isTracing ? TracingTransport(transport, trace: trace) : transport
    }

    // MARK: Sign-in

    /// The Client Auth client for a sign-in configuration (docs/portal-api.md, "The Client Auth
    /// endpoints").
    package func clientAuthClient(configuration: ClientAuthConfiguration) throws -> ClientAuthClient {
        let apiBase = try apiBase()
        try refuseOwnProxy(apiBase)
        let api = ClientAuthAPI(
            configuration: configuration, apiBase: apiBase,
            builder: PortalRequestBuilder(gate: PortalHostGate(apiBase: apiBase), version: Release.version))
        return ClientAuthClient(api: api, transport: try transport())
    }

    /// Held around a whole grant exchange or code check, the request included: long enough to
    /// wait for another process's exchange to finish, bounded like every other lock.
    package func signInLock() throws -> SessionFileLock {
        let http = try HTTPTransportOptions(settings: settings)
        let wait = http.connectTimeoutMilliseconds + http.totalTimeoutMilliseconds + 4 * (try keyringTimeout)
        return SessionFileLock(context: self, timeoutMilliseconds: wait, name: "sign-in.lock")
    }

    /// Completing a sign-in for the configured environment: its client, the session and step
    /// stores of the backend in use, the locks, and the kernel keyring for results that could
    /// not be written.
    package func signInService(configuration: ClientAuthConfiguration) throws -> SignInService {
        SignInService(
            configuration: configuration, client: try clientAuthClient(configuration: configuration),
            sessions: try sessions(), steps: try twoFactorSteps(), sessionLock: try storeLock(),
            signInLock: try signInLock(), memory: services.secretCache(), now: now, trace: trace)
    }
}

/// The variables `exec --proxy` gives its command (docs/proxy.md, "exec --proxy").
package enum ProxyEnvironment {
    package static let credential = "PORTAL_TOKEN_PROXY_CREDENTIAL"
    package static let header = "PORTAL_TOKEN_PROXY_HEADER"
    package static let url = "PORTAL_TOKEN_PROXY_URL"
}
