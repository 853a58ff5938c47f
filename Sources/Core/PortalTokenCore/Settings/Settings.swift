/// One configurable value and the names it goes by (docs/settings.md, "Every setting"): the one
/// declaration of each setting, its flag included, from which the parser, `--help`, the man
/// page and the shell completions take it.
/// Precedence: command-line flag, then environment variable, then config file, then default.
public struct Setting: Sendable, Hashable {
    /// How a setting is given on the command line.
    public struct Flag: Sendable, Hashable {
        /// Without its dashes.
        public let name: String
        /// The value's name in usage text; nil for a switch, which also takes `--name=VALUE`.
        public let value: String?
        /// The values the shells offer; empty for any text.
        public let words: [String]
        /// Whether the value names a file.
        public let isFile: Bool
        public let help: String
        /// The value when none is set, where help should show it.
        public let defaultValue: String?

        public init(
            _ name: String, value: String? = nil, words: [String] = [], isFile: Bool = false, help: String,
            default defaultValue: String? = nil
        ) {
            self.name = name
            self.value = value
            self.words = words
            self.isFile = isFile
            self.help = help
            self.defaultValue = defaultValue
        }
    }

    /// The key in the config file.
    public let key: String
    /// The command-line flag, when the setting has one.
    public let option: Flag?
    public let environment: String?

    /// The long flag, without its dashes, when the setting has one.
    public var flag: String? { option?.name }

    public init(key: String, flag: Flag? = nil, environment: String? = nil) {
        self.key = key
        self.option = flag
        self.environment = environment
    }

    public static let authEnvironmentID = Setting(
        key: "auth-environment-id", flag: Flag("env", value: "ID", help: "auth environment ID"),
        environment: "PORTAL_AUTH_ENVIRONMENT_ID")
    /// Which of an environment's sessions, when several end users are signed in to it.
    public static let endUser = Setting(
        key: "end-user", flag: Flag("end-user", value: "ID", help: "end user ID, where an environment has several"),
        environment: "PORTAL_END_USER_ID")
    public static let apiHost = Setting(
        key: "api-host",
        flag: Flag(
            "api-host", value: "HOST", words: ["api.portalhq.io", "localhost", "127.0.0.1"],
            help: "Portal API host", default: "api.portalhq.io"),
        environment: "PORTAL_API_HOST")
    public static let redirectURL = Setting(
        key: "redirect-url", flag: Flag("redirect-url", value: "URL", help: "sign-in redirect URL"),
        environment: "PORTAL_REDIRECT_URL")
    public static let magicLinkFromEmail = Setting(
        key: "magic-link-from-email", environment: "PORTAL_MAGIC_LINK_FROM_EMAIL")
    public static let magicLinkTemplateID = Setting(
        key: "magic-link-template-id", environment: "PORTAL_MAGIC_LINK_TEMPLATE_ID")
    public static let accountAbstracted = Setting(
        key: "account-abstracted",
        flag: Flag(
            "account-abstracted", value: "BOOL", words: ["true", "false"], help: "ask Portal for account abstraction"),
        environment: "PORTAL_ACCOUNT_ABSTRACTED")
    /// Whether `login` and `redirect` take a custom-scheme redirect URL where other local users
    /// can read command lines (docs/security.md, "The sign-in grant").
    public static let acceptCustomSchemeRisk = Setting(
        key: "accept-custom-scheme-risk", environment: "PORTAL_TOKEN_ACCEPT_CUSTOM_SCHEME_RISK")
    public static let backend = Setting(
        key: "backend",
        flag: Flag(
            "backend", value: "BACKEND", words: ["auto", "secret-service", "file", "vault"], help: "storage backend",
            default: "auto"),
        environment: "PORTAL_TOKEN_BACKEND")
    public static let storeFile = Setting(key: "file", environment: "PORTAL_TOKEN_FILE")
    public static let passphraseFile = Setting(key: "passphrase-file", environment: "PORTAL_TOKEN_PASSPHRASE_FILE")
    /// `on` seals the encrypted file's key to this machine's TPM on each write, the passphrase
    /// kept as the recovery route (docs/storage.md, "A key sealed by the TPM"); `off` (the default).
    public static let fileTPM = Setting(key: "file-tpm", environment: "PORTAL_TOKEN_FILE_TPM")
    /// The PCRs (SHA-256 bank) the sealed key is bound to, such as `7` or `0,7`; none by default.
    public static let fileTPMPCRs = Setting(key: "file-tpm-pcrs", environment: "PORTAL_TOKEN_FILE_TPM_PCRS")
    /// `passphrase` (the default) keeps the passphrase as the sealed file's recovery route; `none`
    /// keys it for the TPM alone, so that no passphrase opens it, and losing the TPM loses it.
    public static let fileTPMRecovery = Setting(
        key: "file-tpm-recovery", environment: "PORTAL_TOKEN_FILE_TPM_RECOVERY")
    public static let onSessionInvalidated = Setting(
        key: "on-session-invalidated", environment: "PORTAL_TOKEN_ON_SESSION_INVALIDATED")
    public static let keyringTimeout = Setting(
        key: "keyring-timeout-ms", environment: "PORTAL_TOKEN_KEYRING_TIMEOUT_MS")
    /// How long the encrypted file store's derived key and the session's copy stay in the kernel
    /// keyring unused, in seconds (each use starts it again); 0 turns the cache off.
    public static let keyCacheTimeout = Setting(key: "key-cache-timeout", environment: "PORTAL_TOKEN_KEY_CACHE_TIMEOUT")
    /// The longest they stay there, however often they are used, in seconds; 0 turns the cache off.
    public static let keyCacheMax = Setting(key: "key-cache-max", environment: "PORTAL_TOKEN_KEY_CACHE_MAX")
    public static let trace = Setting(
        key: "trace", flag: Flag("verbose", help: "trace to stderr, every secret redacted"),
        environment: "PORTAL_TOKEN_TRACE")
    /// Bound on the TCP and TLS handshake of each HTTP request; default 3000 ms.
    public static let httpConnectTimeout = Setting(
        key: "http-connect-timeout-ms", environment: "PORTAL_TOKEN_HTTP_CONNECT_TIMEOUT_MS")
    /// Bound on each whole HTTP exchange, connection included; default 10000 ms.
    public static let httpTimeout = Setting(key: "http-timeout-ms", environment: "PORTAL_TOKEN_HTTP_TIMEOUT_MS")
    /// Bound on each exchange of client mode with the agent, connection included; default 10000 ms.
    public static let agentTimeout = Setting(key: "agent-timeout-ms", environment: "PORTAL_TOKEN_AGENT_TIMEOUT_MS")
    /// How long the agent holds a request while it asks the user (an `ask` rule, docs/agent.md,
    /// "Asking the user"); default 30000 ms. Unanswered by then, the request is refused.
    public static let askTimeout = Setting(key: "ask-timeout-ms", environment: "PORTAL_TOKEN_ASK_TIMEOUT_MS")
    /// A PEM file of CA certificates trusted in addition to the system's (a test CA, a
    /// corporate TLS-intercepting proxy). Verification itself can never be turned off.
    public static let caBundle = Setting(key: "ca-bundle", environment: "PORTAL_TOKEN_CA_BUNDLE")

    // The Vault store (docs/settings.md, "The Vault store"): the server, its trust and namespace
    // by the variables every Vault client reads; the rest by names of portal-token's own.
    public static let vaultAddress = Setting(key: "vault-address", environment: "VAULT_ADDR")
    /// The token itself: from the environment only, so no config file ever holds it (it is not
    /// in `all`, so the config file cannot name it).
    public static let vaultToken = Setting(key: "vault-token", environment: "VAULT_TOKEN")
    /// A file holding the token (an OpenBao or Vault Agent's sink), re-read when it changes.
    public static let vaultTokenFile = Setting(key: "vault-token-file", environment: "PORTAL_TOKEN_VAULT_TOKEN_FILE")
    public static let vaultCACert = Setting(key: "vault-ca-cert", environment: "VAULT_CACERT")
    public static let vaultNamespace = Setting(key: "vault-namespace", environment: "VAULT_NAMESPACE")
    public static let vaultMount = Setting(key: "vault-mount", environment: "PORTAL_TOKEN_VAULT_MOUNT")
    public static let vaultPathPrefix = Setting(key: "vault-path-prefix", environment: "PORTAL_TOKEN_VAULT_PATH_PREFIX")
    public static let vaultRoleID = Setting(key: "vault-role-id", environment: "PORTAL_TOKEN_VAULT_ROLE_ID")
    /// The file holding the AppRole secret ID; the secret ID itself is never a setting.
    public static let vaultSecretIDFile = Setting(
        key: "vault-secret-id-file", environment: "PORTAL_TOKEN_VAULT_SECRET_ID_FILE")
    public static let vaultAppRoleMount = Setting(
        key: "vault-approle-mount", environment: "PORTAL_TOKEN_VAULT_APPROLE_MOUNT")
    /// `true` lets `vault-address` be a cleartext `http://` URL of a server that is not on this
    /// host (loopback needs no setting); off by default, since the Vault token and every secret
    /// would cross the network readable.
    public static let vaultAllowHTTP = Setting(key: "vault-allow-http", environment: "PORTAL_TOKEN_VAULT_ALLOW_HTTP")
    /// How long a host serves its copy of a Vault session before it asks the server again, in
    /// seconds; 0 keeps no copy (docs/storage.md, "Vault / OpenBao").
    public static let vaultCacheSeconds = Setting(
        key: "vault-cache-seconds", environment: "PORTAL_TOKEN_VAULT_CACHE_SECONDS")

    // The audit log (docs/audit.md, "Turning it off"): read from the user's own config file only
    // (`Settings.userConfigFile`), never from a flag, a variable or a file named by --config or
    // PORTAL_TOKEN_CONFIG, so nothing a repository or a caller's environment sets can turn it off.
    /// `on` (the default) or `off`.
    public static let auditLog = Setting(key: "audit-log")
    /// The size in bytes at which the log is rotated; default 10 MiB.
    public static let auditLogMaxBytes = Setting(key: "audit-log-max-bytes")
    /// `on` to send each line to the systemd journal as well; `off` (the default).
    public static let auditJournal = Setting(key: "audit-journal")

    /// Where the config file is; given by flag or environment only, never by the file itself.
    public static let configFile = Setting(
        key: "config", flag: Flag("config", value: "PATH", isFile: true, help: "config file"),
        environment: "PORTAL_TOKEN_CONFIG")

    /// Client mode (docs/agent.md, "Client mode"): the agent's socket, for the commands that
    /// read or write storage. By flag or environment only: a config file naming it would send the
    /// agent's own commands back to the agent.
    public static let agentSocket = Setting(
        key: "agent-socket",
        flag: Flag("agent-socket", value: "PATH", isFile: true, help: "use the agent listening on this socket"),
        environment: "PORTAL_TOKEN_AGENT_SOCK")

    /// Every setting the config file may hold; an unknown key there is a configuration error.
    public static let all: [Setting] = [
        authEnvironmentID, endUser, apiHost, redirectURL, magicLinkFromEmail, magicLinkTemplateID,
        accountAbstracted, acceptCustomSchemeRisk, backend, storeFile, passphraseFile, fileTPM, fileTPMPCRs,
        fileTPMRecovery,
        onSessionInvalidated,
        keyringTimeout, keyCacheTimeout, keyCacheMax, trace, httpConnectTimeout, httpTimeout, agentTimeout,
        askTimeout, caBundle, vaultAddress, vaultTokenFile, vaultCACert, vaultNamespace, vaultMount, vaultPathPrefix,
        vaultRoleID,
        vaultSecretIDFile, vaultAppRoleMount, vaultCacheSeconds, vaultAllowHTTP, auditLog, auditLogMaxBytes,
        auditJournal,
    ]

    /// The settings with a flag, in the order `--help` lists them: the settings flags, accepted
    /// before the command name, and after it except for a command that runs another program.
    public static let flagged: [Setting] =
        all.filter { $0.option != nil && $0.key != trace.key } + [configFile, agentSocket, trace]
}

/// A setting that was given a value it cannot take.
public struct SettingError: Error, Sendable, Equatable {
    public var message: String
    public var hint: String?

    public init(_ message: String, hint: String? = nil) {
        self.message = message
        self.hint = hint
    }
}

/// Resolves settings from the flags, the environment and the config file.
public struct Settings: Sendable {
    public var flags: [String: String]
    public var environment: [String: String]
    public var configFile: [String: String]
    /// Where the config file was read from, for messages.
    public var configPath: String?
    /// The config file at its default place, `$XDG_CONFIG_HOME/portal-token/config`: the same as
    /// `configFile` unless --config or PORTAL_TOKEN_CONFIG names another. The only source of the
    /// audit log's settings.
    public var userConfigFile: [String: String]

    public init(
        flags: [String: String] = [:], environment: [String: String] = [:],
        configFile: [String: String] = [:], configPath: String? = nil, userConfigFile: [String: String]? = nil
    ) {
        self.flags = flags
        self.environment = environment
        self.configFile = configFile
        self.configPath = configPath
        self.userConfigFile = userConfigFile ?? configFile
    }

    /// The smallest rotation size: a few lines.
    public static let minimumAuditLogBytes = 4096
    public static let defaultAuditLogBytes = 10 << 20

    /// Whether the audit log is written: only `audit-log = off` in the user's own config file
    /// turns it off.
    public func auditLogEnabled() throws(SettingError) -> Bool {
        guard let text = userConfigFile[Setting.auditLog.key] else { return true }
        switch text.trimmingWhitespace.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default:
            throw SettingError(
                "audit-log in the config file must be on or off", hint: "set it to on or off, or remove it")
        }
    }

    /// Whether each audit line also goes to the systemd journal: `audit-journal = on` in the
    /// user's own config file.
    public func auditJournalEnabled() throws(SettingError) -> Bool {
        guard let text = userConfigFile[Setting.auditJournal.key] else { return false }
        switch text.trimmingWhitespace.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default:
            throw SettingError(
                "audit-journal in the config file must be on or off", hint: "set it to on or off, or remove it")
        }
    }

    /// The size at which the audit log is rotated, from the user's own config file.
    public func auditLogMaxBytes() throws(SettingError) -> Int {
        guard let text = userConfigFile[Setting.auditLogMaxBytes.key] else { return Self.defaultAuditLogBytes }
        guard let bytes = Int(text.trimmingWhitespace), bytes >= Self.minimumAuditLogBytes, bytes <= 1 << 30 else {
            throw SettingError(
                "audit-log-max-bytes in the config file must be a whole number of bytes between "
                    + "\(Self.minimumAuditLogBytes) and \(1 << 30)")
        }
        return bytes
    }

    /// The value by precedence; an empty environment variable counts as unset, as in most tools.
    public func value(_ setting: Setting) -> String? {
        if let flag = setting.flag, let value = flags[flag] { return value }
        if let name = setting.environment, let value = environment[name], !value.isEmpty { return value }
        return configFile[setting.key]
    }

    /// Whether the value in force comes from a flag or the environment, which no change to the
    /// config file can override.
    public func isGivenOutsideTheConfigFile(_ setting: Setting) -> Bool {
        if let flag = setting.flag, flags[flag] != nil { return true }
        if let name = setting.environment, let value = environment[name], !value.isEmpty { return true }
        return false
    }

    /// Where a value came from, in the words a message should use.
    public func origin(of setting: Setting) -> String {
        if let flag = setting.flag, flags[flag] != nil { return "--\(flag)" }
        if let name = setting.environment, let value = environment[name], !value.isEmpty { return name }
        return "\(setting.key) in \(configPath ?? "the config file")"
    }

    public func milliseconds(_ setting: Setting, default defaultValue: Int) throws(SettingError) -> Int {
        guard let text = value(setting) else { return defaultValue }
        guard let number = Int(text.trimmingWhitespace), number > 0, number <= 3_600_000 else {
            throw SettingError("\(origin(of: setting)) must be a whole number of milliseconds between 1 and 3600000")
        }
        return number
    }

    /// A duration in whole seconds where 0 means "off".
    public func seconds(_ setting: Setting, default defaultValue: Int, maximum: Int) throws(SettingError) -> Int {
        guard let text = value(setting) else { return defaultValue }
        guard let number = Int(text.trimmingWhitespace), number >= 0, number <= maximum else {
            throw SettingError(
                "\(origin(of: setting)) must be a whole number of seconds between 0 and \(maximum)",
                hint: "0 turns it off")
        }
        return number
    }

    public func bool(_ setting: Setting) throws(SettingError) -> Bool? {
        guard let text = value(setting) else { return nil }
        switch text.trimmingWhitespace.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default:
            throw SettingError(
                "\(origin(of: setting)) must be true or false",
                hint: "set it to true or false (1, yes and on mean true; 0, no and off false), or unset it")
        }
    }

    /// The config file's text with `key` set to `value`: its line replaced where the file has
    /// one (the last one counts, as parsing reads them; earlier ones go), else added at the end.
    /// Every other line, comments included, is kept as it was.
    public static func settingValue(in text: String, key: String, to value: String) -> String {
        var lines = text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            .map { String(decoding: $0, as: UTF8.self) }
        if lines.last == "" { lines.removeLast() }
        let isTheKey = { (line: String) -> Bool in
            let trimmed = line.trimmingWhitespace
            guard !trimmed.hasPrefix("#"), let equals = trimmed.firstIndex(of: "=") else { return false }
            return trimmed[..<equals].trimmingWhitespace == key
        }
        let setting = "\(key) = \(value)"
        if let last = lines.lastIndex(where: isTheKey) {
            lines[last] = setting
            lines = lines.enumerated().filter { $0.offset == last || !isTheKey($0.element) }.map(\.element)
        } else {
            lines.append(setting)
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Parses the config file: `key = value` lines; blank lines and lines starting with `#` are
    /// skipped. Errors name the line number only, since a value may be private.
    public static func parseConfigFile(_ text: String, path: String) throws(SettingError) -> [String: String] {
        var values: [String: String] = [:]
        let known = Set(Setting.all.map(\.key))
        // Split on LF bytes: Swift reads CR LF as one Character, so a file with Windows line
        // endings would otherwise be one line.
        let lines = text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        for (index, rawLine) in lines.enumerated() {
            let line = String(decoding: rawLine, as: UTF8.self).trimmingWhitespace
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let equals = line.firstIndex(of: "=") else {
                throw SettingError("\(path):\(index + 1): expected key = value")
            }
            let key = line[..<equals].trimmingWhitespace
            guard known.contains(key) else {
                throw SettingError(
                    "\(path):\(index + 1): unknown setting '\(key)'",
                    hint: "see 'portal-token --help' for the settings the config file takes")
            }
            values[key] = line[line.index(after: equals)...].trimmingWhitespace
        }
        return values
    }
}

extension StringProtocol {
    /// The range of the first occurrence of `needle`, compared byte for byte. The standard
    /// library's `firstRange(of:)` and `contains(_:)` for strings live in _StringProcessing, which
    /// would add a regex engine (about a megabyte) to every invocation.
    public func firstByteRange(of needle: String) -> Range<Index>? {
        let haystack = Array(utf8)
        let pattern = Array(needle.utf8)
        guard !pattern.isEmpty, haystack.count >= pattern.count else { return nil }
        for start in 0...(haystack.count - pattern.count)
        where haystack[start..<(start + pattern.count)].elementsEqual(pattern) {
            let lower = utf8.index(utf8.startIndex, offsetBy: start)
            let upper = utf8.index(lower, offsetBy: pattern.count)
            return lower..<upper
        }
        return nil
    }
}
