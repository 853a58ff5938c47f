import Basics
import CSodium

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
        hex(grant.withBytes { HMACSHA256.authenticate(Array($0), key: key(authEnvironmentID)) })
    }

    /// A short, stable tag for the environment, for names that must not show the environment
    /// verbatim or grow with it (kernel keyring descriptions).
    public static func environmentTag(_ authEnvironmentID: String) -> String {
        String(
            hex(HMACSHA256.authenticate(Array(authEnvironmentID.utf8), key: Array((label + " environment").utf8)))
                .prefix(16))
    }

    static func key(_ authEnvironmentID: String) -> [UInt8] {
        Array(label.utf8) + [0] + Array(authEnvironmentID.utf8)
    }

    public static func hex(_ bytes: [UInt8]) -> String { Hex.encode(bytes) }
}

/// HMAC (RFC 2104) over SHA-256, from libsodium (`crypto_auth_hmacsha256`, the streaming form,
/// which takes a key of any length as RFC 2104 does).
enum HMACSHA256 {
    static func authenticate(_ message: [UInt8], key: [UInt8]) -> [UInt8] {
        precondition(Sodium.ready, "libsodium could not be initialised")
        var state = crypto_auth_hmacsha256_state()
        defer { withUnsafeMutableBytes(of: &state) { sodium_memzero($0.baseAddress, $0.count) } }
        var digest = [UInt8](repeating: 0, count: Int(crypto_auth_hmacsha256_BYTES))
        _ = crypto_auth_hmacsha256_init(&state, key, key.count)
        _ = crypto_auth_hmacsha256_update(&state, message, UInt64(message.count))
        _ = crypto_auth_hmacsha256_final(&state, &digest)
        return digest
    }
}

/// SHA-256 (FIPS 180-4), from libsodium (`crypto_hash_sha256`).
enum SHA256 {
    static func hash(_ message: [UInt8]) -> [UInt8] {
        precondition(Sodium.ready, "libsodium could not be initialised")
        var digest = [UInt8](repeating: 0, count: Int(crypto_hash_sha256_BYTES))
        _ = crypto_hash_sha256(&digest, message, UInt64(message.count))
        return digest
    }
}

private enum Sodium {
    /// sodium_init is idempotent and thread-safe; libsodium asks for it before any other call.
    static let ready: Bool = sodium_init() >= 0
}
