import PortalTokenCore

// What `status` and `list` report, for the commands and the agent's `GET /v1/status` and
// `GET /v1/list`: the JSON value `--format json` prints, which the commands render as text and
// the agent sends as it is. Neither reads Portal or a secret.

/// The session of the account in use, the backend and what waits: never the token.
package enum Status {
    /// What `status --format json` prints (the command's details name every member).
    package static func run(_ context: Context) throws -> [String: JSONValue] {
        let account = try context.accountChoice()
        let environmentID = account.authEnvironmentID
        let choice = try context.backendChoice()
        // The keyring names the program behind it (docs/storage.md, "Providers").
        let provider = choice.backend == .secretService ? context.secretServiceProvider() : nil
        let session = try context.sessionService().restore()
        let now = context.now()
        let decision = session?.decision(at: now)
        let step = try context.twoFactorSteps().loadStep(authEnvironmentID: environmentID)
            .flatMap { $0.isExpired(at: now) ? nil : $0 }
        let otherStore = try context.otherStoreNotice()
        var members: [String: JSONValue] = [
            "signedIn": .bool(session != nil && decision != .expired),
            "authEnvironmentId": .string(environmentID),
            "authEnvironmentChosenBy": .string(account.reason),
            "backend": .string(choice.backend.rawValue),
            "provider": provider.map { .string($0.name) } ?? .null,
            "backendReason": .string(choice.reason),
            "twoFactorStepWaiting": .bool(step != nil),
            // What a prompt-free caller should know: only what is stored answers (Prompting.swift).
            "promptsRuledOutBy": context.promptsRuledOutBy().map { .string($0) } ?? .null,
        ]
        if let step {
            members["twoFactorStep"] = .object([
                "endUserId": .string(step.endUserID), "expiresAt": .string(RFC3339.format(step.expiresAt)),
            ])
        }
        if let session {
            members["endUserId"] = .string(session.endUserID)
            members["issuedAt"] = session.issuedAt.map { .string(RFC3339.format($0)) } ?? .null
            members["expiresAt"] = session.expiresAt.map { .string(RFC3339.format($0)) } ?? .null
            members["capAt"] = session.capAt.map { .string(RFC3339.format($0)) } ?? .null
            members["ended"] = .bool(decision == .expired)
            members["nextUseAsksPortal"] = .bool(decision == .checkWithPortal)
        }
        if let otherStore { members["otherStore"] = .string(otherStore) }
        // What opens the encrypted file in use (docs/storage.md, "A key sealed by the TPM").
        if choice.backend == .file, let protection = context.services.fileKeyProtection(try context.storeFilePath()) {
            members["fileKey"] = .string(protection.description)
        }
        return members
    }
}

/// What the backend in use holds, as stored: never a password or token.
package enum List {
    /// What `list --format json` prints.
    package static func run(_ context: Context) throws -> JSONValue {
        let credentials: [JSONValue] = try context.credentials().all().map { credential in
            .object([
                "protocol": .string(credential.protocolName), "username": .string(credential.username),
                "host": credential.host.map { .string($0.gitHost) } ?? .null,
                "path": credential.path.map { .string($0) } ?? .null,
            ])
        }
        // Every stored Portal session, one per auth environment and end user, as stored: no
        // network call and no expiry judgement (that is `status`'s).
        let sessions: [JSONValue] = try SessionItems.all(in: context.items(context.backendChoice().backend))
            .sorted { $0.authEnvironmentID < $1.authEnvironmentID }
            .map { session in
                .object([
                    "authEnvironmentId": .string(session.authEnvironmentID),
                    "endUserId": .string(session.endUserID),
                    "expiresAt": session.expiresAt.map { .string(RFC3339.format($0)) } ?? .null,
                ])
            }
        return .object(["credentials": .array(credentials), "sessions": .array(sessions)])
    }
}

extension Context {
    /// A sentence for `status` when the store not in use also holds items, or nil. The file is
    /// judged by its existence (opening it would need its passphrase); the keyring is asked
    /// only when it is registered and not in use.
    package func otherStoreNotice() throws -> String? {
        let inUse = try backendChoice().backend
        let other = inUse.other
        switch other {
        case .file:
            guard services.fileExists(try storeFilePath()) else { return nil }
        case .secretService:
            guard try secretServicePresence() == .provider,
                let items = try? self.items(.secretService).search(ItemMigration.everything), !items.isEmpty
            else { return nil }
        case .vault:
            // No store's other is the Vault store: its items are never left behind by a switch.
            return nil
        }
        return
            """
            \(try storeDescription(other)) also holds items; 'portal-token migrate --to \
            \(inUse.rawValue)' merges them
            """
    }
}
