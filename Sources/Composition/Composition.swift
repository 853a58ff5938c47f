import AgentClient
import AuditFileLog
import Basics
import CProcessHardening
import Commands
import EncryptedFileStore
import Glibc
import HookRunner
import KernelKeyring
import LoopbackRedirectListener
import PortalHTTP
import Operations
import PortalTokenCore
import SecretServiceStore
import SessionBus
import TerminalQRCode
import TPMKeySealer
import VaultStore

/// The composition root: the one module that imports the adapter modules. It sets the process
/// up and hands the commands the real adapters, once per invocation (docs/development.md,
/// "Modules and the dependency rule").
public enum Composition {
    /// What `main.swift` runs.
    public static func main(arguments: [String]) -> Int32 {
        // Before anything is read: a core file or a dump by another process of this user would
        // hold the token, a grant or the passphrase (docs/security.md, "Hardening rules"). Failing
        // to forbid it is not a reason to refuse to run; both calls only lower what is allowed.
        // Only the soft core-file limit is lowered: the programs portal-token starts get the
        // caller's limits back.
        _ = portal_token_forbid_dumping()
        CoreFileLimit.forbid()
        return PortalTokenCLI.main(arguments: arguments, services: live)
    }

    /// The audit log's copy of a line in the systemd journal (docs/audit.md, "The journal"): the
    /// line as MESSAGE, under portal-token's identifier; the log's own warning covers the file only.
    static func journalCopy(_ line: [UInt8]) {
        let text = String(decoding: line.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
        Journal.send(["MESSAGE=" + text, "SYSLOG_IDENTIFIER=portal-token", "PRIORITY=6", "PORTAL_TOKEN_AUDIT=1"])
    }

    /// The real adapters.
    public static var live: Services { live(forAgent: false) }

    private static func fileStore(_ options: FileStoreOptions) -> EncryptedFileStore {
        EncryptedFileStore(
            path: options.path, keyCacheTimeoutSeconds: options.keyCacheTimeoutSeconds,
            keyCacheMaximumSeconds: options.keyCacheMaximumSeconds, lock: options.lock,
            passphrase: options.passphrase, warn: options.warn, created: options.created,
            keyCache: options.keyCache, keySealer: TPMKeySealer(tcti: options.tcti), sealTo: options.sealTo,
            passphraseRecovery: options.passphraseRecovery)
    }

    /// The real adapters; for the agent, its own secret cache and no agent to ask.
    private static func live(forAgent: Bool) -> Services {
        Services(
            connectSessionBus: { timeout throws(StoreError) in SessionBus.connect(timeoutMilliseconds: timeout) },
            keyringItems: { SecretServiceItemStore(timeoutMilliseconds: $0, promptPermission: $1, sessionBus: $2) },
            keyringDiagnosis: { SecretServiceDiagnosis(timeoutMilliseconds: $0) },
            fileItems: fileStore,
            rekeyFile: { options, newPassphrase throws(StoreError) in
                try fileStore(options).rekey(newPassphrase: newPassphrase)
            },
            vaultItems: { options, loginCache in
                VaultItemStore(
                    options: options, transport: CurlTransport(options: options.http, reusingConnections: true),
                    environment: { name in getenv(name).map { String(cString: $0) } },
                    monotonicNow: { MonotonicClock.nanoseconds() / 1_000_000_000 }, loginCache: loginCache)
            },
            fileExists: { EncryptedFileStore.exists(at: $0) },
            fileLock: { StoreFileLock(path: $0, timeoutMilliseconds: $1) },
            moveFileAside: { path, lock throws(StoreError) in
                try EncryptedFileStore.moveAsideAfterMigration(path: path, lock: lock)
            },
            transport: { CurlTransport(options: $0) },
            secretCache: forAgent ? { AgentServing.secretCache } : { KernelKeyring() },
            hookLauncher: { HookRunner(parentEnvironment: $0) },
            programs: ProcessLauncher(),
            listen: { redirect, configured, timeout throws(RedirectListenerError) in
                try LoopbackRedirectListener(
                    redirect: redirect, configuredRedirectURL: configured,
                    options: .init(timeoutMilliseconds: timeout))
            },
            renderQRCode: { link throws(CLIError) in
                do throws(QRCodeError) {
                    return try TerminalQRCode.render(link)
                } catch {
                    throw CLIError(error.message, hint: error.hint, exitCode: .usage)
                }
            },
            serveDesktopActivation: { streams, accept in
                let activation = DesktopActivation(streams: streams, accept: accept)
                try activation.serve()
                return activation.receivedOpen
            },
            now: { Int64(time(nil)) },
            procMountInfo: {
                (try? FileReading.contents(of: "/proc/self/mountinfo", limit: 4 << 20)).map {
                    String(decoding: $0, as: UTF8.self)
                }
            },
            fileKeyProtection: { EncryptedFileStore.keyProtection(at: $0) },
            serveAgent: { options, handle in try AgentServing.serve(options, handle) },
            agentExchange: { path, request, timeout throws(HTTPError) in
                // The agent never asks an agent (a lock would wait on itself).
                guard !forAgent else { throw .cannotConnect(host: path) }
                return try AgentClient.exchange(socketPath: path, request: request, timeoutMilliseconds: timeout)
            },
            agentServices: forAgent ? nil : { live(forAgent: true) },
            askOnDesktop: { summary, body, deadline, open in
                DesktopNotification.ask(summary: summary, body: body, deadline: deadline, open: open)
            },
            auditLog: { (options: AuditLogOptions) -> any AuditLog in
                var forward: (([UInt8]) -> Void)?
                if options.journal { forward = journalCopy }
                return AuditFileLog(
                    directory: options.directory, maximumBytes: options.maximumBytes, warn: options.warn,
                    forward: forward)
            },
            describeProcess: { AuditFileLog.caller(ofProcess: $0) },
            streamingTransport: { CurlStreamingTransport(options: $0) },
            bindLocalServer: { address throws(CLIError) in try StreamingLocalServer.bind(address) })
    }
}
