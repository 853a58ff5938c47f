/// An item a store holds: a schema name, string attributes, a label and a secret, as the
/// freedesktop Secret Service keeps them.
public struct StoredItem: Sendable {
    public var schema: String
    public var attributes: [String: String]
    public var label: String
    public var secret: Secret

    public init(schema: String, attributes: [String: String], label: String, secret: Secret) {
        self.schema = schema
        self.attributes = attributes
        self.label = label
        self.secret = secret
    }
}

/// One port over a store of attributed items, on the model of oo7's `Keyring` and keyring-rs's
/// credential trait: records (Portal sessions, two-factor steps) are codecs on top of it, in
/// the core, and know nothing of D-Bus or files.
///
/// Every method fails with a `StoreError`: a locked store is `.locked`, never "nothing found";
/// an item that vanishes between a search and its read is simply not found.
public protocol ItemStore {
    /// Items of `schema` whose attributes include all of `attributes`, newest first. With no
    /// attributes, every item of the schema.
    func search(schema: String, attributes: [String: String]) throws(StoreError) -> [StoredItem]
    /// Stores `item`, then removes every other item of its schema whose attributes include all
    /// of `key`: the new item is safe before the old ones go.
    func replace(matching key: [String: String], with item: StoredItem) throws(StoreError)
    /// Removes every item of `schema` whose attributes include all of `attributes`; returns how
    /// many were removed.
    @discardableResult
    func delete(schema: String, attributes: [String: String]) throws(StoreError) -> Int
}

/// Portal sessions as items (product contract §6): schema `io.portalhq.PortalToken.Session`,
/// attributes `auth-environment-id` and `end-user-id`, label `Portal session for <endUserId>
/// (<environment>)`; the secret is `PortalSession.payload`. One session per environment.
public struct ItemSessionStore: SessionStore {
    public static let schema = "io.portalhq.PortalToken.Session"
    public let items: any ItemStore

    public init(_ items: any ItemStore) { self.items = items }

    public func loadSession(authEnvironmentID: String) throws(StoreError) -> StoredSession {
        guard
            let newest = try items.search(schema: Self.schema, attributes: ["auth-environment-id": authEnvironmentID])
                .first
        else {
            return .absent
        }
        guard let session = PortalSession.decode(payload: newest.secret, authEnvironmentID: authEnvironmentID),
            newest.attributes["end-user-id"] == session.endUserID
        else { return .unreadable }
        return .present(session)
    }

    public func saveSession(_ session: PortalSession) throws(StoreError) {
        try items.replace(
            matching: ["auth-environment-id": session.authEnvironmentID],
            with: StoredItem(
                schema: Self.schema,
                attributes: ["auth-environment-id": session.authEnvironmentID, "end-user-id": session.endUserID],
                label: "Portal session for \(session.endUserID) (\(session.authEnvironmentID))",
                secret: session.payload))
    }

    @discardableResult
    public func deleteSession(authEnvironmentID: String) throws(StoreError) -> Bool {
        try items.delete(schema: Self.schema, attributes: ["auth-environment-id": authEnvironmentID]) > 0
    }

    /// Every readable session, the newest of each environment (for `migrate` and `status`).
    public func allSessions() throws(StoreError) -> [PortalSession] {
        newestPerEnvironment(
            try items.search(schema: Self.schema, attributes: [:]),
            decode: PortalSession.decode(payload:authEnvironmentID:))
    }
}

/// A waiting two-factor step as an item: schema `io.portalhq.PortalToken.PendingTwoFactor`,
/// attribute `auth-environment-id`; the secret is `PendingTwoFactor.payload`.
public struct ItemTwoFactorStepStore: TwoFactorStepStore {
    public static let schema = "io.portalhq.PortalToken.PendingTwoFactor"
    public let items: any ItemStore

    public init(_ items: any ItemStore) { self.items = items }

    public func loadStep(authEnvironmentID: String) throws(StoreError) -> PendingTwoFactor? {
        try items.search(schema: Self.schema, attributes: ["auth-environment-id": authEnvironmentID]).first
            .flatMap { PendingTwoFactor.decode(payload: $0.secret, authEnvironmentID: authEnvironmentID) }
    }

    public func saveStep(_ step: PendingTwoFactor) throws(StoreError) {
        try items.replace(
            matching: ["auth-environment-id": step.authEnvironmentID],
            with: StoredItem(
                schema: Self.schema, attributes: ["auth-environment-id": step.authEnvironmentID],
                label: "Portal two-factor sign-in step (\(step.authEnvironmentID))", secret: step.payload))
    }

    @discardableResult
    public func deleteStep(authEnvironmentID: String) throws(StoreError) -> Bool {
        try items.delete(schema: Self.schema, attributes: ["auth-environment-id": authEnvironmentID]) > 0
    }

    /// Every readable step, the newest of each environment (for `migrate`).
    public func allSteps() throws(StoreError) -> [PendingTwoFactor] {
        newestPerEnvironment(
            try items.search(schema: Self.schema, attributes: [:]),
            decode: PendingTwoFactor.decode(payload:authEnvironmentID:))
    }
}

/// The first readable record of each `auth-environment-id` in `items` (newest first).
private func newestPerEnvironment<Record>(_ items: [StoredItem], decode: (Secret, String) -> Record?) -> [Record] {
    var seen: Set<String> = []
    var records: [Record] = []
    for item in items {
        guard let environment = item.attributes["auth-environment-id"], !seen.contains(environment),
            let record = decode(item.secret, environment)
        else { continue }
        seen.insert(environment)
        records.append(record)
    }
    return records
}
