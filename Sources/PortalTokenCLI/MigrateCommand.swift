import EncryptedFileStore
import KernelKeyring
import PortalTokenCore
import SecretServiceStore

/// Everything one backend holds for portal-token: git credentials, Portal sessions and waiting
/// two-factor steps.
struct StoreContents {
    var credentials: [Credential] = []
    var sessions: [PortalSession] = []
    var steps: [PendingTwoFactor] = []

    var isEmpty: Bool { credentials.isEmpty && sessions.isEmpty && steps.isEmpty }
    var itemCount: Int { credentials.count + sessions.count + steps.count }
}

struct MigrateCommand: Command {
    static let name = "migrate"
    static let summary = "Move every item from the other store into the named one"
    static let details = """
        One store is in use at a time. When the other one also holds items (a file left from
        a time without a keyring, say), migrate copies each git credential, Portal session and
        waiting two-factor step into the store named by --to; where that store already holds
        the same credential slot, or a session at least as recent, the one already there is
        kept. Only once everything is written is the other store moved aside: the encrypted
        file is renamed to <file>.migrated-<UTC time> (it still opens with its passphrase);
        keyring items are deleted, except a credential whose slot the file kept with another
        secret, which nothing else holds. Prints what it did on stderr.
        """

    let destination: BackendChoice.Backend

    init(arguments: ParsedArguments) throws(CLIError) {
        guard let to = arguments.value(.migrateTo) else {
            throw .usage("'migrate' needs --to secret-service or --to file", hint: "see 'portal-token migrate --help'")
        }
        guard let destination = BackendChoice.Backend(rawValue: to) else {
            throw .usage("--to must be secret-service or file")
        }
        self.destination = destination
    }

    func run(in context: Context) throws {
        let source = destination.other
        let streams = context.streams
        guard try Composition.storeExists(source, for: context) else {
            streams.printError(
                """
                portal-token: nothing to migrate: \(try Composition.storeDescription(source, for: context)) holds \
                nothing
                """
            )
            return
        }
        if destination == .secretService, try context.services.secretServicePresence(context) != .provider {
            throw StoreError(
                .unavailable, "no Secret Service provider is registered on the session bus",
                hint: "start a keyring (gnome-keyring-daemon, KWallet or KeePassXC), or migrate --to file")
        }
        let (moved, kept, aside) = try context.storeLock().withLock { () throws -> (Int, Int, String) in
            var contents = try Composition.contents(of: source, for: context)
            let (moved, kept, differing) = try Self.merge(contents, into: destination, context: context)
            // Everything is in the destination now: only then does the source go. A credential
            // whose slot the destination kept with another secret was never written there, so
            // the keyring keeps it (the file is only moved aside, so it keeps it anyway).
            contents.credentials.removeAll { differing.contains($0) }
            var aside = try Composition.clear(source, holding: contents, for: context)
            if source == .secretService, !differing.isEmpty {
                aside +=
                    "; left \(differing.count) credential\(differing.count == 1 ? "" : "s") there whose secret differs"
                    + " from the one the file keeps (see 'secret-tool search --all')"
            }
            return (moved, kept, aside)
        }
        KernelKeyring().dropAll(withPrefix: CachedSessionStore.namePrefix(family: Composition.cacheFamily(context)))
        streams.printError(
            "portal-token: moved \(moved) item\(moved == 1 ? "" : "s") to the \(destination.rawValue) store"
                + (kept > 0 ? " (kept \(kept) newer one\(kept == 1 ? "" : "s") already there)" : "") + "; \(aside)")
    }

    /// Writes each item where the destination holds nothing newer; returns how many were
    /// written, how many were kept as they were, and the credentials of the source that were
    /// not written because the destination kept a different one in their slot.
    private static func merge(
        _ contents: StoreContents, into destination: BackendChoice.Backend,
        context: Context
    ) throws -> (moved: Int, kept: Int, differing: [Credential]) {
        var moved = 0, kept = 0
        var differing: [Credential] = []
        let credentials = try context.services.credentialStore(context, destination)
        for credential in contents.credentials {
            let slot = CredentialQuery(
                protocolName: credential.protocolName, host: credential.host,
                path: credential.path, username: credential.username)
            if let present = try credentials.lookup(slot).first(where: { $0.occupiesSameSlot(as: credential) }) {
                kept += 1
                if present.password != credential.password || present.credential != credential.credential {
                    differing.append(credential)
                }
            } else {
                try credentials.store(credential)
                moved += 1
            }
        }
        let sessions = try Composition.sessionStore(for: context, backend: destination)
        for session in contents.sessions {
            if case .present(let present) = try sessions.loadSession(authEnvironmentID: session.authEnvironmentID),
                present.isAtLeastAsRecent(as: session)
            {
                kept += 1
            } else {
                try sessions.saveSession(session)
                moved += 1
            }
        }
        let steps = try context.twoFactorStepStore(backend: destination)
        for step in contents.steps {
            if let present = try steps.loadStep(authEnvironmentID: step.authEnvironmentID),
                present.expiresAt >= step.expiresAt
            {
                kept += 1
            } else {
                try steps.saveStep(step)
                moved += 1
            }
        }
        return (moved, kept, differing)
    }
}

extension PortalSession {
    /// Whether this record is as recent as `other`: its last known activity, else its
    /// sign-in, is not older.
    func isAtLeastAsRecent(as other: PortalSession) -> Bool {
        (lastActivityAt ?? issuedAt ?? 0) >= (other.lastActivityAt ?? other.issuedAt ?? 0)
    }
}

extension Composition {
    /// Whether a backend may hold anything: the file exists; the keyring is registered on the bus.
    static func storeExists(_ backend: BackendChoice.Backend, for context: Context) throws -> Bool {
        switch backend {
        case .file: return EncryptedFileStore.exists(at: try storeFilePath(context))
        case .secretService: return try context.services.secretServicePresence(context) == .provider
        }
    }

    /// The store in words, for messages.
    static func storeDescription(_ backend: BackendChoice.Backend, for context: Context) throws -> String {
        switch backend {
        case .file: return "the encrypted file store at \(try storeFilePath(context))"
        case .secretService: return "the Secret Service"
        }
    }

    /// Everything a backend holds.
    static func contents(of backend: BackendChoice.Backend, for context: Context) throws -> StoreContents {
        var contents = StoreContents()
        contents.credentials = try context.services.credentialStore(context, backend).lookup(CredentialQuery())
        let items = try context.itemStore(backend)
        contents.sessions = try ItemSessionStore(items).allSessions()
        contents.steps = try ItemTwoFactorStepStore(items).allSteps()
        return contents
    }

    /// Moves a migrated store aside: the file renamed, the keyring's items deleted. Returns what
    /// was done, in words.
    static func clear(_ backend: BackendChoice.Backend, holding contents: StoreContents, for context: Context) throws
        -> String
    {
        switch backend {
        case .file:
            return "moved the encrypted file aside to \(try context.fileStore().moveAsideAfterMigration())"
        case .secretService:
            let credentials = try context.services.credentialStore(context, .secretService)
            for credential in contents.credentials {
                try credentials.erase(
                    CredentialQuery(
                        protocolName: credential.protocolName, host: credential.host,
                        path: credential.path, username: credential.username,
                        password: credential.password))
            }
            let sessions = try sessionStore(for: context, backend: .secretService)
            for session in contents.sessions {
                try sessions.deleteSession(authEnvironmentID: session.authEnvironmentID)
            }
            let steps = try twoFactorStepStore(for: context, backend: .secretService)
            for step in contents.steps { try steps.deleteStep(authEnvironmentID: step.authEnvironmentID) }
            return
                """
                deleted the \(contents.itemCount) item\(contents.itemCount == 1 ? "" : "s") it moved from the \
                Secret Service
                """
        }
    }

    /// A sentence for `status` when the store not in use also holds items, or nil. The file is
    /// judged by its existence (opening it would need its passphrase); the keyring is asked
    /// only when it is registered and not in use.
    static func otherStoreNotice(for context: Context) throws -> String? {
        let inUse = try context.backendChoice().backend
        let other = inUse.other
        switch other {
        case .file:
            guard EncryptedFileStore.exists(at: try storeFilePath(context)) else { return nil }
        case .secretService:
            guard try context.services.secretServicePresence(context) == .provider,
                let contents = try? contents(of: .secretService, for: context), !contents.isEmpty
            else { return nil }
        }
        return
            """
            \(try storeDescription(other, for: context)) also holds items; 'portal-token migrate --to \
            \(inUse.rawValue)' merges them
            """
    }
}
