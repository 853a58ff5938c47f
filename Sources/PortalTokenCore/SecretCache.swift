/// A short-lived cache of secrets outside any store (the port; the kernel user keyring is the
/// adapter). Entries expire by themselves; a missing or expired entry reads as nil.
public protocol SecretCache {
    func read(_ name: String) -> Secret?
    /// Keeps `secret` under `name` for `seconds`, replacing an entry of the same name.
    func store(_ secret: Secret, as name: String, forSeconds seconds: Int)
    func drop(_ name: String)
    /// Drops every entry whose name passes `isDropped`.
    func dropAll(where isDropped: (String) -> Bool)
}

extension SecretCache {
    /// Drops every entry whose name starts with `prefix` (what a sign-out forgets).
    public func dropAll(withPrefix prefix: String) {
        dropAll { $0.hasPrefix(prefix) }
    }
}
