import CLibSecret
import PortalTokenCore

/// Portal sessions in the Secret Service (product contract §6): schema
/// `io.portalhq.PortalToken.Session`, attributes `auth-environment-id` and `end-user-id`, the
/// label `Portal session for <endUserId> (<environment>)`, in the default collection. The secret
/// is the JSON payload of `PortalSession`.
public final class SecretServiceSessionStore: SessionStore {
    public static let schemaName = "io.portalhq.PortalToken.Session"

    private let connection: SecretServiceConnection

    public init(timeoutMilliseconds: Int = 3000, allowPrompt: Bool) {
        connection = SecretServiceConnection(timeoutMilliseconds: timeoutMilliseconds, allowPrompt: allowPrompt)
    }

    nonisolated(unsafe) private static let schema = makeSchema(name: schemaName, attributes: [
        ("auth-environment-id", SECRET_SCHEMA_ATTRIBUTE_STRING), ("end-user-id", SECRET_SCHEMA_ATTRIBUTE_STRING),
    ])

    private func items(for authEnvironmentID: String, loadSecrets: Bool, while operation: String) throws(StoreError) -> (ItemList, [FoundItem]) {
        let found = try connection.search([("auth-environment-id", authEnvironmentID)], loadSecrets: loadSecrets, while: operation)
        let sessions = found.items.filter { $0.schemaName == Self.schemaName }
        return (found, sessions.sorted { $0.order > $1.order })
    }

    public func loadSession(authEnvironmentID: String) throws(StoreError) -> StoredSession {
        let (list, sessions) = try items(for: authEnvironmentID, loadSecrets: true, while: "reading the Portal session")
        defer { withExtendedLifetime(list) {} }
        // Items deleted by another process since the search are gone, not locked.
        var newest: FoundItem?, payload: Secret?
        for item in sessions {
            if let secret = item.secret {
                (newest, payload) = (item, secret)
                break
            }
            try connection.ensureItemIsGone(item)
        }
        guard let newest, let payload else {
            try connection.ensureDefaultCollectionIsNotLocked()
            return .absent
        }
        guard let session = PortalSession.decode(payload: payload, authEnvironmentID: authEnvironmentID),
              newest.attributes["end-user-id"] == session.endUserID else { return .unreadable }
        return .present(session)
    }

    public func saveSession(_ session: PortalSession) throws(StoreError) {
        let collection = try connection.unlockedDefaultCollection()
        let (list, previous) = try items(for: session.authEnvironmentID, loadSecrets: false, while: "storing the Portal session")
        defer { withExtendedLifetime(list) {} }
        let created = try connection.create(
            in: collection, schema: Self.schema,
            attributes: [("auth-environment-id", session.authEnvironmentID), ("end-user-id", session.endUserID)],
            label: "Portal session for \(session.endUserID) (\(session.authEnvironmentID))",
            secret: session.payload, while: "storing the Portal session")
        // One session per environment: the previous record goes once the new one is safe.
        for item in previous where item.objectPath != created {
            try connection.delete(item, while: "replacing the previous Portal session")
        }
    }

    /// Every Portal session in the keyring, of every environment (for `migrate` and `status`).
    public func allSessions() throws(StoreError) -> [PortalSession] {
        try connection.newestPerEnvironment(schemaName: Self.schemaName, while: "listing Portal sessions",
                                            decode: PortalSession.decode(payload:authEnvironmentID:))
    }

    @discardableResult
    public func deleteSession(authEnvironmentID: String) throws(StoreError) -> Bool {
        let (list, sessions) = try items(for: authEnvironmentID, loadSecrets: false, while: "removing the Portal session")
        defer { withExtendedLifetime(list) {} }
        if sessions.contains(where: \.isLocked) { throw connection.lockedError() }
        for item in sessions { try connection.delete(item, while: "removing the Portal session") }
        return !sessions.isEmpty
    }
}

/// A waiting two-factor step in the Secret Service: an item of its own schema,
/// `io.portalhq.PortalToken.PendingTwoFactor`, with the attribute `auth-environment-id`, in the
/// default collection. The secret is the step's JSON payload (`PendingTwoFactor`).
public final class SecretServiceTwoFactorStepStore: TwoFactorStepStore {
    public static let schemaName = "io.portalhq.PortalToken.PendingTwoFactor"

    private let connection: SecretServiceConnection

    public init(timeoutMilliseconds: Int = 3000, allowPrompt: Bool) {
        connection = SecretServiceConnection(timeoutMilliseconds: timeoutMilliseconds, allowPrompt: allowPrompt)
    }

    nonisolated(unsafe) private static let schema = makeSchema(name: schemaName, attributes: [
        ("auth-environment-id", SECRET_SCHEMA_ATTRIBUTE_STRING),
    ])

    private func items(for authEnvironmentID: String, loadSecrets: Bool, while operation: String) throws(StoreError) -> (ItemList, [FoundItem]) {
        let found = try connection.search([("auth-environment-id", authEnvironmentID)], loadSecrets: loadSecrets, while: operation)
        let steps = found.items.filter { $0.schemaName == Self.schemaName }
        return (found, steps.sorted { $0.order > $1.order })
    }

    public func loadStep(authEnvironmentID: String) throws(StoreError) -> PendingTwoFactor? {
        let (list, steps) = try items(for: authEnvironmentID, loadSecrets: true, while: "reading the two-factor step")
        defer { withExtendedLifetime(list) {} }
        var payload: Secret?
        for item in steps {
            if let secret = item.secret {
                payload = secret
                break
            }
            try connection.ensureItemIsGone(item)
        }
        guard let payload else {
            try connection.ensureDefaultCollectionIsNotLocked()
            return nil
        }
        return PendingTwoFactor.decode(payload: payload, authEnvironmentID: authEnvironmentID)
    }

    public func saveStep(_ step: PendingTwoFactor) throws(StoreError) {
        let collection = try connection.unlockedDefaultCollection()
        let (list, previous) = try items(for: step.authEnvironmentID, loadSecrets: false, while: "storing the two-factor step")
        defer { withExtendedLifetime(list) {} }
        let created = try connection.create(
            in: collection, schema: Self.schema, attributes: [("auth-environment-id", step.authEnvironmentID)],
            label: "Portal two-factor sign-in step (\(step.authEnvironmentID))",
            secret: step.payload, while: "storing the two-factor step")
        for item in previous where item.objectPath != created {
            try connection.delete(item, while: "replacing the previous two-factor step")
        }
    }

    /// Every waiting two-factor step in the keyring, of every environment (for `migrate`).
    public func allSteps() throws(StoreError) -> [PendingTwoFactor] {
        try connection.newestPerEnvironment(schemaName: Self.schemaName, while: "listing two-factor steps",
                                            decode: PendingTwoFactor.decode(payload:authEnvironmentID:))
    }

    @discardableResult
    public func deleteStep(authEnvironmentID: String) throws(StoreError) -> Bool {
        let (list, steps) = try items(for: authEnvironmentID, loadSecrets: false, while: "removing the two-factor step")
        defer { withExtendedLifetime(list) {} }
        if steps.contains(where: \.isLocked) { throw connection.lockedError() }
        for item in steps { try connection.delete(item, while: "removing the two-factor step") }
        return !steps.isEmpty
    }
}

extension SecretServiceConnection {
    /// The newest readable record of one schema for each auth environment (the
    /// `auth-environment-id` attribute), decoded.
    func newestPerEnvironment<Record>(schemaName: String, while operation: String,
                                      decode: (Secret, String) -> Record?) throws(StoreError) -> [Record] {
        let found = try search([("xdg:schema", schemaName)], loadSecrets: true, while: operation)
        var seen: Set<String> = []
        var records: [Record] = []
        for item in found.items.sorted(by: { $0.order > $1.order }) where item.schemaName == schemaName {
            guard let environment = item.attributes["auth-environment-id"], !seen.contains(environment) else { continue }
            guard let payload = item.secret else {
                try ensureItemIsGone(item)
                continue
            }
            if let record = decode(payload, environment) {
                seen.insert(environment)
                records.append(record)
            }
        }
        return records
    }
}
