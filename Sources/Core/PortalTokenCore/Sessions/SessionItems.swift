/// Portal sessions as items (docs/storage.md, "Secret Service: Portal sessions and two-factor
/// steps"): schema `io.portalhq.PortalToken.Session`, attributes `auth-environment-id` and
/// `end-user-id`, label `Portal session for <endUserId> (<environment>)`; the secret is
/// `PortalSession.payload`. One session per environment and end user; `Sessions` keeps them.
public enum SessionItems {
    public static let schema = "io.portalhq.PortalToken.Session"

    /// The items of the environment's sessions, or of one end user's alone.
    static func filter(_ authEnvironmentID: String, endUserID: String? = nil) -> [ItemAttributes] {
        var filter = [StoredItem.schemaAttribute: schema, "auth-environment-id": authEnvironmentID]
        if let endUserID { filter["end-user-id"] = endUserID }
        return [filter]
    }

    /// Every readable session in `items`, the newest of each environment and end user (for `list`).
    public static func all(in items: any ItemStore) throws(StoreError) -> [PortalSession] {
        var seen: Set<[String]> = []
        return try items.search([[StoredItem.schemaAttribute: schema]]).compactMap(session(from:)).filter {
            seen.insert([$0.authEnvironmentID, $0.endUserID]).inserted
        }
    }

    public static func item(for session: PortalSession) -> StoredItem {
        StoredItem(
            attributes: [
                StoredItem.schemaAttribute: schema, "auth-environment-id": session.authEnvironmentID,
                "end-user-id": session.endUserID,
            ],
            label: "Portal session for \(session.endUserID) (\(session.authEnvironmentID))", secret: session.payload)
    }

    /// The session an item keeps; nil when its payload is not a session record or names another
    /// end user than its attribute.
    public static func session(from item: StoredItem) -> PortalSession? {
        guard item.schema == schema, let environment = item.attributes["auth-environment-id"],
            let session = PortalSession.decode(payload: item.secret, authEnvironmentID: environment),
            item.attributes["end-user-id"] == session.endUserID
        else { return nil }
        return session
    }
}

/// A waiting two-factor step as an item: schema `io.portalhq.PortalToken.PendingTwoFactor`,
/// attribute `auth-environment-id`; the secret is `PendingTwoFactor.payload`. It is kept beside
/// the session and as well protected.
public struct TwoFactorStepItems {
    public static let schema = "io.portalhq.PortalToken.PendingTwoFactor"
    public let items: any ItemStore

    public init(_ items: any ItemStore) { self.items = items }

    static func filter(_ authEnvironmentID: String) -> [ItemAttributes] {
        [[StoredItem.schemaAttribute: schema, "auth-environment-id": authEnvironmentID]]
    }

    /// The environment's step; nil when there is none or what is stored is not a step record.
    public func loadStep(authEnvironmentID: String) throws(StoreError) -> PendingTwoFactor? {
        try items.search(Self.filter(authEnvironmentID)).first.flatMap(Self.step(from:))
    }

    public func saveStep(_ step: PendingTwoFactor) throws(StoreError) {
        try items.replace(Self.filter(step.authEnvironmentID), with: Self.item(for: step))
    }

    @discardableResult
    public func deleteStep(authEnvironmentID: String) throws(StoreError) -> Bool {
        try items.delete(Self.filter(authEnvironmentID)) > 0
    }

    public static func item(for step: PendingTwoFactor) -> StoredItem {
        StoredItem(
            attributes: [StoredItem.schemaAttribute: schema, "auth-environment-id": step.authEnvironmentID],
            label: "Portal two-factor sign-in step (\(step.authEnvironmentID))", secret: step.payload)
    }

    public static func step(from item: StoredItem) -> PendingTwoFactor? {
        guard item.schema == schema, let environment = item.attributes["auth-environment-id"] else { return nil }
        return PendingTwoFactor.decode(payload: item.secret, authEnvironmentID: environment)
    }
}
