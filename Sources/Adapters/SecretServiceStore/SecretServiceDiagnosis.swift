import PortalTokenCore

/// What `doctor` asks the Secret Service, each question within the bound and never with a prompt.
public struct SecretServiceDiagnosis: KeyringDiagnosis {
    private let connection: SecretServiceConnection

    public init(timeoutMilliseconds: Int) {
        connection = SecretServiceConnection(timeoutMilliseconds: timeoutMilliseconds) { .noTerminal }
    }

    /// Whether a provider answers: `.unavailable` when there is none, `.timedOut` when it stalls.
    public func ping() throws(StoreError) {
        try connection.ping()
    }

    /// The default collection's label and whether it is locked.
    public func defaultCollection() throws(StoreError) -> (label: String, isLocked: Bool) {
        let collection = try connection.defaultCollection()
        return (collection.label, collection.isLocked)
    }
}
