import PortalTokenCore

/// Portal sessions in the encrypted file, as records beside the git credentials: one record
/// per auth environment, named `portal-session:<environment>`, holding the same JSON payload the
/// Secret Service item holds (product contract §6).
public struct EncryptedFileSessionStore: SessionStore {
    public let file: EncryptedFileStore

    public init(_ file: EncryptedFileStore) {
        self.file = file
    }

    static func recordName(_ authEnvironmentID: String) -> String { "portal-session:\(authEnvironmentID)" }

    public func loadSession(authEnvironmentID: String) throws(StoreError) -> StoredSession {
        guard let payload = try file.record(named: Self.recordName(authEnvironmentID)) else { return .absent }
        guard let session = PortalSession.decode(payload: payload, authEnvironmentID: authEnvironmentID) else {
            return .unreadable
        }
        return .present(session)
    }

    public func saveSession(_ session: PortalSession) throws(StoreError) {
        let payload = session.payload
        try file.withRecords { records throws(StoreError) in
            records[Self.recordName(session.authEnvironmentID)] = payload
        }
    }

    /// Every Portal session in the file, of every environment (for `migrate`).
    public func allSessions() throws(StoreError) -> [PortalSession] {
        try file.records(withPrefix: Self.recordName("")).compactMap { name, payload in
            PortalSession.decode(payload: payload, authEnvironmentID: String(name.dropFirst(Self.recordName("").count)))
        }
    }

    @discardableResult
    public func deleteSession(authEnvironmentID: String) throws(StoreError) -> Bool {
        try file.withRecords { records throws(StoreError) in
            records.removeValue(forKey: Self.recordName(authEnvironmentID)) != nil
        }
    }
}

/// A waiting two-factor step in the encrypted file: one record per auth environment, named
/// `portal-two-factor:<environment>`, beside the session record.
public struct EncryptedFileTwoFactorStepStore: TwoFactorStepStore {
    public let file: EncryptedFileStore

    public init(_ file: EncryptedFileStore) {
        self.file = file
    }

    static func recordName(_ authEnvironmentID: String) -> String { "portal-two-factor:\(authEnvironmentID)" }

    public func loadStep(authEnvironmentID: String) throws(StoreError) -> PendingTwoFactor? {
        guard let payload = try file.record(named: Self.recordName(authEnvironmentID)) else { return nil }
        return PendingTwoFactor.decode(payload: payload, authEnvironmentID: authEnvironmentID)
    }

    public func saveStep(_ step: PendingTwoFactor) throws(StoreError) {
        let payload = step.payload
        try file.withRecords { records throws(StoreError) in
            records[Self.recordName(step.authEnvironmentID)] = payload
        }
    }

    /// Every waiting two-factor step in the file, of every environment (for `migrate`).
    public func allSteps() throws(StoreError) -> [PendingTwoFactor] {
        try file.records(withPrefix: Self.recordName("")).compactMap { name, payload in
            PendingTwoFactor.decode(payload: payload, authEnvironmentID: String(name.dropFirst(Self.recordName("").count)))
        }
    }

    @discardableResult
    public func deleteStep(authEnvironmentID: String) throws(StoreError) -> Bool {
        // Reading first spares a rewrite (and a passphrase) when there is nothing to delete.
        guard try file.record(named: Self.recordName(authEnvironmentID)) != nil else { return false }
        return try file.withRecords { records throws(StoreError) in
            records.removeValue(forKey: Self.recordName(authEnvironmentID)) != nil
        }
    }
}
