/// Enumeration for `list` and the Docker helper's `list`, kept apart from the store port so it
/// can move onto a store that enumerates its items directly.
extension CredentialStore {
    /// Every stored credential, most recently stored first: an empty query matches them all.
    public func all() throws(StoreError) -> [Credential] {
        try lookup(CredentialQuery())
    }
}
