import Basics
import Glibc
import PortalTokenCore

/// What `doctor` found: each check's name, whether it is ok, what it found and what to do.
package struct DoctorReport {
    package struct Check {
        package var name: String
        package var ok: Bool
        package var detail: String
        package var hint: String?
    }

    package var checks: [Check]
}

/// The checks themselves. Each returns what it found; none throws, so one failure never hides
/// the others.
package struct Doctor {
    package typealias Check = DoctorReport.Check
    let context: Context

    /// Every check, in the order `doctor` shows them; `network` adds the Portal API's.
    package static func run(_ context: Context, network: Bool) -> DoctorReport {
        DoctorReport(checks: Doctor(context: context).checks(network: network))
    }

    func checks(network: Bool) -> [Check] {
        var checks: [Check] = []
        if let error = context.settingsError {
            let failure = CLIError(error)
            checks.append(Check(name: "config file", ok: false, detail: failure.message, hint: failure.hint))
        } else {
            checks.append(configFile())
        }
        let bus = sessionBus()
        checks.append(bus)
        let timeout =
            (try? context.keyringTimeout) ?? Context.defaultKeyringTimeoutMilliseconds
        let keyring = context.services.keyringDiagnosis(timeout)
        var provider: StoreError.Kind?
        if bus.ok {
            do {
                try keyring.ping()
                if let owner = context.secretServiceProvider() {
                    checks.append(
                        Check(
                            name: "secret service provider", ok: true,
                            detail: "\(owner.name) answers on org.freedesktop.secrets"))
                    checks.append(Check(name: "provider quirks", ok: true, detail: owner.quirks))
                } else {
                    checks.append(
                        Check(name: "secret service provider", ok: true, detail: "org.freedesktop.secrets answers"))
                }
            } catch {
                provider = error.kind
                let ok = error.kind == .unavailable && requested != .secretService
                checks.append(
                    Check(
                        name: "secret service provider", ok: ok, detail: error.message,
                        hint: ok
                            ? nil
                            : error.kind == .timedOut
                                ? "the keyring daemon does not answer: restart it (or log out and in)"
                                : """
                                install and start gnome-keyring (or KeePassXC's Secret Service), or use --backend \
                                file
                                """
                    ))
            }
        } else {
            provider = .unavailable
            checks.append(
                Check(
                    name: "secret service provider", ok: requested != .secretService,
                    detail: "not checked: no session bus", hint: nil))
        }
        if provider == nil {
            do {
                let collection = try keyring.defaultCollection()
                checks.append(
                    Check(
                        name: "default keyring", ok: !collection.isLocked,
                        detail: "'\(collection.label)' is \(collection.isLocked ? "locked" : "unlocked")",
                        hint: collection.isLocked
                            ? StoreError.keyringLockedHint : nil))
            } catch {
                checks.append(Check(name: "default keyring", ok: false, detail: error.message, hint: error.hint))
            }
        }
        let (backendCheck, choice) = backend()
        checks.append(backendCheck)
        checks += encryptedFile(choice: choice)
        if let second = secondStore(choice: choice) { checks.append(second) }
        checks.append(hook())
        if let helpers = gitHelpers() { checks.append(helpers) }
        checks.append(prompts())
        checks.append(kernelKeyring())
        if network { checks.append(portalAPI()) }
        return checks
    }

    /// The credential helpers git's configuration names, in every scope: a plaintext `store`
    /// among them is a problem (its file holds what portal-token keeps safe). nil without git.
    private func gitHelpers() -> Check? {
        let result = context.services.programs.run(
            "git", ["config", "--get-all", "credential.helper"],
            timeoutMilliseconds: Context.gitConfigTimeoutMilliseconds)
        guard let status = result.status, status == 0 || status == 1 else { return nil }
        let helpers = result.output.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
        if let plaintext = GitHelpers.plaintext(among: helpers) {
            return Check(
                name: "git credential helpers", ok: false, detail: GitHelpers.plaintextWarning(plaintext),
                hint: GitHelpers.plaintextHint)
        }
        let uses = helpers.contains(GitHelpers.portalToken) || helpers.contains { $0.hasPrefix("portal-token ") }
        return Check(
            name: "git credential helpers", ok: true,
            detail: uses
                ? "git uses portal-token"
                    + (helpers.count > 1 ? " (and \(helpers.count - 1) other helper entries)" : "")
                : "git does not use portal-token (portal-token setup-git adds it)")
    }

    private var requested: RequestedBackend { (try? Context.requestedBackend(context.settings)) ?? .auto }

    private func configFile() -> Check {
        let path = context.settings.configPath ?? "the config file"
        do {
            try context.settings.checkValues()
            _ = try context.settings.bool(.accountAbstracted)
        } catch {
            let failure = CLIError(error)
            return Check(name: "settings", ok: false, detail: failure.message, hint: failure.hint)
        }
        guard access(path, F_OK) == 0 else {
            return Check(
                name: "config file", ok: true, detail: "\(path) does not exist; defaults and the environment apply")
        }
        return Check(name: "config file", ok: true, detail: "\(path) (\(context.settings.configFile.count) settings)")
    }

    /// The bus address from the environment, else `$XDG_RUNTIME_DIR/bus` where every D-Bus client
    /// looks next, and a connection to its socket.
    private func sessionBus() -> Check {
        let runtimeBus = context.environment["XDG_RUNTIME_DIR"].map { $0 + "/bus" }
            .flatMap { access($0, F_OK) == 0 ? "unix:path=" + $0 : nil }
        guard
            let address = context.environment["DBUS_SESSION_BUS_ADDRESS"].flatMap({ $0.isEmpty ? nil : $0 })
                ?? runtimeBus
        else {
            return Check(
                name: "session bus", ok: requested != .secretService,
                detail: "DBUS_SESSION_BUS_ADDRESS is not set and there is no $XDG_RUNTIME_DIR/bus",
                hint: requested == .secretService ? "run inside a desktop session, or under dbus-run-session" : nil)
        }
        let first = address.split(separator: ";").first.map(String.init) ?? address
        var path: String?
        var abstract = false
        for part in first.drop(while: { $0 != ":" }).dropFirst().split(separator: ",") {
            if part.hasPrefix("path=") { path = String(part.dropFirst(5)) }
            if part.hasPrefix("abstract=") { path = String(part.dropFirst(9)); abstract = true }
        }
        guard first.hasPrefix("unix:"), let path else {
            return Check(name: "session bus", ok: true, detail: "\(first.prefix(120)) (not a unix socket; not probed)")
        }
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { if descriptor >= 0 { close(descriptor) } }
        var socketAddress = sockaddr_un()
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: socketAddress.sun_path) - 1
        guard descriptor >= 0, bytes.count < capacity else {
            return Check(name: "session bus", ok: false, detail: "cannot open a socket for \(first.prefix(120))")
        }
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { raw in
            let offset = abstract ? 1 : 0
            for (index, byte) in bytes.enumerated() { raw[index + offset] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (abstract ? 1 : 0))
        let connected = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, length) == 0 }
        }
        guard connected else {
            return Check(
                name: "session bus", ok: false,
                detail: "cannot connect to \(first.prefix(120)): \(String(cString: strerror(errno)))",
                hint: "DBUS_SESSION_BUS_ADDRESS names a bus that is gone; open a new session")
        }
        return Check(name: "session bus", ok: true, detail: first.prefix(120) + "")
    }

    /// The backend in use and why: the very decision every other command, `status` included,
    /// makes (from the session bus, never from how fast the keyring answers).
    private func backend() -> (Check, BackendChoice?) {
        do {
            let choice = try context.backendChoice()
            return (Check(name: "backend", ok: true, detail: "\(choice.backend.rawValue) (\(choice.reason))"), choice)
        } catch {
            let failure = CLIError(error)
            return (Check(name: "backend", ok: false, detail: failure.message, hint: failure.hint), nil)
        }
    }

    /// Whether the store not in use also holds items: the note `status` prints, from the same
    /// code. A keyring that cannot be read here is reported by the checks above.
    private func secondStore(choice: BackendChoice?) -> Check? {
        guard let choice, let notice = try? context.otherStoreNotice() else { return nil }
        return Check(
            name: "second store", ok: false, detail: notice,
            hint: "merge it into the store in use with 'portal-token migrate --to \(choice.backend.rawValue)'")
    }

    /// The encrypted file: where, whose, which mode, and where its passphrase would come from.
    /// When the file is the backend in use (asked for, or `auto`'s choice), a passphrase that only
    /// a prompt can give is a problem: a caller with no terminal (scheduled git maintenance, cron,
    /// a systemd unit) or one that rules prompts out cannot open the store.
    private func encryptedFile(choice: BackendChoice?) -> [Check] {
        let needed = requested == .file || choice?.backend == .file
        guard let path = try? context.storeFilePath() else {
            return [
                Check(
                    name: "encrypted file", ok: !needed,
                    detail: "no path: neither XDG_DATA_HOME nor HOME is set",
                    hint: "set PORTAL_TOKEN_FILE")
            ]
        }
        let passphrase = context.passphraseSource(storePath: path)
        let unattended = passphrase.unattendedOrigin
        let permission = unattended == nil ? passphrase.promptPermission() : .noTerminal
        let source = unattended ?? (permission.isAllowed ? "a prompt on the terminal only" : nil)
        // A key the TPM unseals needs no passphrase source (docs/storage.md, "A key sealed by the TPM").
        let protection = context.services.fileKeyProtection(path)
        let sealed = if case .tpm? = protection { true } else { false }
        // What the settings ask for, when the file is not kept so yet (`file-key` applies it now).
        let wanted: FileKeyProtection? =
            try? context.fileSealing().map { .tpm(pcrs: $0, recovery: try context.fileRecovery()) } ?? .passphrase
        let key =
            "; key: " + (protection?.description ?? "unknown")
            + (protection != nil && wanted != nil && wanted != protection
                ? "; the settings ask for: \(wanted!.description) (portal-token file-key re-keys it now, else the "
                    + "next write does)" : "")
        let passphraseProblem = needed && unattended == nil && !sealed
        let passphraseHint =
            switch permission {
            case .allowed:
                "callers with no terminal (git maintenance, cron, systemd units) cannot be asked: "
                    + PassphraseSource.unattendedSourcesHint
            case .ruledOut: PassphraseSource.unattendedSourcesHint
            case .noTerminal: PassphraseSource.unattendedSourcesHint + ", or run portal-token in a terminal to be asked"
            }
        var status = stat()
        guard lstat(path, &status) == 0 else {
            return [
                Check(
                    name: "encrypted file", ok: !passphraseProblem,
                    detail: "\(path) does not exist yet; passphrase source: \(source ?? "none")",
                    hint: passphraseProblem ? passphraseHint : nil)
            ]
        }
        var problems: [String] = []
        if status.st_mode & S_IFMT != S_IFREG { problems.append("not a regular file") }
        if status.st_uid != getuid() { problems.append("owned by uid \(status.st_uid), not you") }
        if status.st_mode & 0o077 != 0 { problems.append("readable or writable by others") }
        var directoryStatus = stat()
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        if stat(directory.isEmpty ? "/" : directory, &directoryStatus) == 0, directoryStatus.st_mode & 0o022 != 0 {
            problems.append("its directory is writable by others")
        }
        let mode = String(status.st_mode & 0o777, radix: 8)
        return [
            Check(
                name: "encrypted file", ok: problems.isEmpty && !passphraseProblem,
                detail: "\(path), owner uid \(status.st_uid), mode \(mode); passphrase source: \(source ?? "none")"
                    + key + (problems.isEmpty ? "" : "; " + problems.joined(separator: ", ")),
                hint: !problems.isEmpty
                    ? "chmod 600 the file and 700 its directory, owned by you"
                    : passphraseProblem ? passphraseHint : nil)
        ]
    }

    /// Whether this run could ask anything (docs/settings.md, "Non-interactive callers"), and
    /// what rules prompts out when something does. Informational: never a problem.
    private func prompts() -> Check {
        switch context.promptPermission() {
        case .allowed:
            return Check(name: "prompts", ok: true, detail: "allowed: a terminal is here and no setting rules them out")
        case .noTerminal:
            if let setting = context.promptsRuledOutBy() {
                return Check(name: "prompts", ok: true, detail: "none: no terminal, and \(setting) rules them out")
            }
            return Check(name: "prompts", ok: true, detail: "none: neither stdin nor stderr is a terminal")
        case .ruledOut(let setting):
            return Check(
                name: "prompts", ok: true,
                detail:
                    """
                    none: \(setting) rules them out (keyring unlock, passphrase, browser, two-factor code); only \
                    what is stored answers
                    """
            )
        }
    }

    private func hook() -> Check {
        do {
            _ = try SessionHook.configuredPath(context.settings, environment: context.environment)
        } catch {
            return Check(name: "hook", ok: false, detail: error.message, hint: error.hint)
        }
        guard let path = SessionHook(context: context).executable else {
            return Check(name: "hook", ok: true, detail: "none configured")
        }
        guard access(path, F_OK) == 0 else {
            return Check(
                name: "hook", ok: false, detail: "\(path) does not exist",
                hint: "create it, or unset PORTAL_TOKEN_ON_SESSION_INVALIDATED")
        }
        guard access(path, X_OK) == 0 else {
            return Check(name: "hook", ok: false, detail: "\(path) is not executable", hint: "chmod +x \(path)")
        }
        var status = stat()
        if stat(path, &status) == 0,
            let refusal = HookOutcome.untrusted(owner: status.st_uid, mode: status.st_mode, user: geteuid())
        {
            switch refusal {
            case .writableByOthers(let mode):
                return Check(
                    name: "hook", ok: false,
                    detail: "\(path) is writable by other users (mode \(String(mode, radix: 8))), so it is not run",
                    hint: "chmod go-w \(path)")
            default:
                return Check(
                    name: "hook", ok: false,
                    detail: "\(path) belongs to another user (uid \(status.st_uid)), so it is not run",
                    hint: "use a hook of your own")
            }
        }
        return Check(name: "hook", ok: true, detail: "\(path) (executable)")
    }

    /// A short-lived value written to and read back from the kernel keyring, which caches the
    /// session and the file key.
    private func kernelKeyring() -> Check {
        let keyring = context.services.secretCache()
        let name = "portal-token:doctor:\(getpid())"
        keyring.store(Secret("ok"), as: name, forSeconds: 5)
        let works = keyring.read(name)?.text == "ok"
        keyring.drop(name)
        return works
            ? Check(
                name: "kernel keyring", ok: true,
                detail: "the persistent keyring caches values, readable by their possessor alone")
            : Check(
                name: "kernel keyring", ok: true,
                detail: "not usable here (keyctl refused, or no persistent keyring); every call reads the store instead"
            )
    }

    /// One unauthenticated request to the API host: any HTTP answer means Portal is reachable.
    private func portalAPI() -> Check {
        do {
            let base = try context.apiBase()
            let transport = try context.transport()
            let request = PortalRequestBuilder(gate: PortalHostGate(apiBase: base), version: Release.version)
                .request("GET", base.url(path: SessionService.validationPath))
            let response = try transport.send(request)
            return Check(name: "portal api", ok: true, detail: "\(base.url) answered HTTP \(response.status)")
        } catch {
            let failure = CLIError(error)
            return Check(
                name: "portal api", ok: false, detail: failure.message,
                hint: failure.hint ?? "check the network and PORTAL_API_HOST")
        }
    }
}

extension PassphraseSource {
    /// Where the passphrase would come from with nobody at a terminal, without reading it: the
    /// file, the variable or the systemd credential; nil when only a prompt could give it.
    var unattendedOrigin: String? {
        if let path = settings.value(.passphraseFile) { return "\(settings.origin(of: .passphraseFile)) (\(path))" }
        if let value = environment[Self.environmentVariable], !value.isEmpty { return Self.environmentVariable }
        if let directory = environment["CREDENTIALS_DIRECTORY"], !directory.isEmpty,
            access(directory + "/" + Self.systemdCredentialName, F_OK) == 0
        {
            return "the systemd credential \(Self.systemdCredentialName)"
        }
        return nil
    }
}

/// git's `credential.helper` entries as `setup-git` writes them and `doctor` judges them.
package enum GitHelpers {
    /// The entry `setup-git` adds.
    package static let portalToken = "portal-token"

    /// The first helper in effect that keeps passwords in a plaintext file: git's `store`
    /// (git-credential-store, ~/.git-credentials unless --file names another), given by name or
    /// path. An empty value resets the list, so only the helpers after the last one count, as
    /// git reads them (gitcredentials(7)).
    package static func plaintext(among helpers: [String]) -> String? {
        let inEffect = helpers.lastIndex(of: "").map { helpers[helpers.index(after: $0)...] } ?? helpers[...]
        return inEffect.first { helper in
            let program = helper.split(separator: " ", maxSplits: 1).first.map(String.init) ?? ""
            return program == "store" || program.hasSuffix("/git-credential-store")
                || program == "git-credential-store"
        }
    }

    package static func plaintextWarning(_ helper: String) -> String {
        """
        credential.helper '\(helper.prefix(80))' keeps every password git approves in a plaintext file \
        (~/.git-credentials), beside portal-token's copy, and git asks it first when it is listed first
        """
    }

    package static let plaintextHint = """
        remove it with: git config --global --unset-all credential.helper '^store'; then delete \
        ~/.git-credentials once what it holds is stored again (git asks, and portal-token keeps it)
        """
}
