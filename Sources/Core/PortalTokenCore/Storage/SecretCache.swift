/// A short-lived cache of secrets outside any store (the port; the kernel keyring is the
/// adapter). Entries expire by themselves; a missing or expired entry reads as nil.
public protocol SecretCache {
    /// The entry under `name`, or nil. A read is a use: the entry's idle time starts again.
    func read(_ name: String) -> Secret?
    /// Keeps `secret` under `name`, replacing an entry of the same name: for `idleSeconds`
    /// after it was last read, and never longer than `maximumSeconds` from now, however often
    /// it is read (gpg-agent's default-cache-ttl and max-cache-ttl).
    func store(_ secret: Secret, as name: String, idleSeconds: Int, maximumSeconds: Int)
    func drop(_ name: String)
    /// Drops every entry whose name passes `isDropped`.
    func dropAll(where isDropped: (String) -> Bool)
}

extension SecretCache {
    /// Keeps `secret` under `name` for `seconds`, however often it is read.
    public func store(_ secret: Secret, as name: String, forSeconds seconds: Int) {
        store(secret, as: name, idleSeconds: seconds, maximumSeconds: seconds)
    }

    /// Drops every entry whose name starts with `prefix` (what a sign-out forgets).
    public func dropAll(withPrefix prefix: String) {
        dropAll { $0.hasPrefix(prefix) }
    }
}

/// What every entry portal-token keeps in a secret cache is named with: the file store's keys
/// (`portal-token:file-key:`), the session copies (`portal-token:session:`), the sign-in results
/// kept in memory (`portal-token:sign-in:`), `doctor`'s probe. `portal-token lock` drops them all.
public enum SecretCacheNames {
    public static let prefix = "portal-token:"
}
