import Basics

/// What portal-token remembers of a sign-in grant it exchanged: a digest, never the grant.
///
/// The digest is HMAC-SHA-256 of the grant, keyed by a fixed label and the auth environment ID
/// (`"portal-token grant digest v1" NUL <environment>`), written as 64 lowercase hex digits. A
/// grant is a long random single-use value, so nobody can get it back from its digest or confirm
/// a guess; the key is not secret, and serves to keep the digests of one environment apart from
/// another's and from any other use of SHA-256. The same grant always gives the same digest, so
/// a new process can tell that a redirect delivered again is one it already exchanged
/// (docs/portal-api.md, "A redirect delivered twice", across processes).
public enum GrantDigest {
    static let label = "portal-token grant digest v1"

    /// The digest of `grant` in `authEnvironmentID`.
    public static func of(_ grant: Secret, authEnvironmentID: String) -> String {
        hex(grant.withBytes { Sodium.hmacSHA256(Array($0), key: key(authEnvironmentID)) })
    }

    /// A short, stable tag for the environment, for names that must not show the environment
    /// verbatim or grow with it (kernel keyring descriptions).
    public static func environmentTag(_ authEnvironmentID: String) -> String {
        String(
            hex(Sodium.hmacSHA256(Array(authEnvironmentID.utf8), key: Array((label + " environment").utf8)))
                .prefix(16))
    }

    static func key(_ authEnvironmentID: String) -> [UInt8] {
        Array(label.utf8) + [0] + Array(authEnvironmentID.utf8)
    }

    public static func hex(_ bytes: [UInt8]) -> String { Hex.encode(bytes) }
}
