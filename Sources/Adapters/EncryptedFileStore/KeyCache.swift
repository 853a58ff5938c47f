import Basics
import KernelKeyring
import PortalTokenCore

/// Keeps derived keys in a secret cache, so that a run of `get`s pays for Argon2id once: the
/// kernel keyring (see KernelKeyring for the trade-off), or, inside an agent the kernel
/// refuses keyrings to, the agent's memory (docs/agent.md, "Where the keys are kept").
///
/// Each key is named after the store file's path, salt, KDF parameters and format version, so
/// a cached key never meets another file or a rewritten header.
struct KeyCache {
    static let descriptionPrefix = "portal-token:file-key:"

    /// Seconds a cached key lives unused (each use starts them again); 0 turns the cache off.
    let timeoutSeconds: Int
    /// The most seconds a cached key lives, however often it is used; 0 turns the cache off.
    let maximumSeconds: Int

    init(timeoutSeconds: Int, maximumSeconds: Int? = nil, cache: any SecretCache = KernelKeyring()) {
        self.timeoutSeconds = timeoutSeconds
        self.maximumSeconds = maximumSeconds ?? timeoutSeconds
        self.keyring = cache
    }

    var isEnabled: Bool { timeoutSeconds > 0 && maximumSeconds > 0 }

    /// The key's description: a prefix users can recognise in a `keyctl` listing, and a digest of
    /// everything the key is tied to (the path itself stays out of the kernel's key list).
    static func description(path: String, identity: KeyIdentity) -> String {
        var material = Array(path.utf8) + [0]
        material.append(contentsOf: [UInt8(identity.formatVersion >> 8), UInt8(identity.formatVersion & 0xFF)])
        material.appendBigEndian(identity.kdf.opsLimit)
        material.appendBigEndian(identity.kdf.memLimit)
        material.append(contentsOf: identity.salt)
        let digest = Sodium.hash(material, length: 16)
        // Into one buffer: every cached `get` names its key this way.
        var hex: [UInt8] = []
        hex.reserveCapacity(digest.count * 2)
        for byte in digest { Hex.appendDigits(of: byte, to: &hex) }
        return descriptionPrefix + String(decoding: hex, as: UTF8.self)
    }

    private let keyring: any SecretCache

    func read(_ description: String) -> Secret? {
        guard isEnabled, let key = keyring.read(description) else { return nil }
        return key.byteCount == Sodium.keyLength ? key : nil
    }

    func store(_ key: Secret, as description: String) {
        guard isEnabled else { return }
        keyring.store(
            key, as: description, idleSeconds: min(timeoutSeconds, maximumSeconds), maximumSeconds: maximumSeconds)
    }

    /// Forgets a key that no longer opens its file (a wrong passphrase, a rewritten file).
    func drop(_ description: String) {
        keyring.drop(description)
    }
}
