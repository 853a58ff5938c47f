import CKeyutils
import Glibc
import PortalTokenCore

/// Keeps derived keys in the kernel user keyring (keyrings(7)), so that a run of `get`s pays
/// for Argon2id once: the same trade-off as gpg-agent's passphrase cache. The key lives in
/// kernel memory, readable by processes of the same user, until its timeout; it never touches
/// the disk or swap.
///
/// Each key is named after the store file's path, salt, KDF parameters and format version, so
/// a cached key never meets another file or a rewritten header. Where the kernel refuses
/// keyrings (containers whose seccomp profile answers EPERM or ENOSYS), nothing is cached and
/// every unlock derives the key again.
struct KeyCache {
    static let descriptionPrefix = "portal-token:file-key:"

    /// Seconds a cached key lives; 0 turns the cache off.
    let timeoutSeconds: Int

    var isEnabled: Bool { timeoutSeconds > 0 }

    /// The key's description: a prefix `keyctl show @u` users can recognise, and a digest of
    /// everything the key is tied to (the path itself stays out of the kernel's key list).
    static func description(path: String, identity: KeyIdentity) -> String {
        var material = Array(path.utf8) + [0]
        material.append(contentsOf: [UInt8(identity.formatVersion >> 8), UInt8(identity.formatVersion & 0xFF)])
        material.appendBigEndian(identity.kdf.opsLimit)
        material.appendBigEndian(identity.kdf.memLimit)
        material.append(contentsOf: identity.salt)
        let digest = Sodium.hash(material, length: 16)
        return descriptionPrefix + digest.map { byte in
            let digits = Array("0123456789abcdef".utf8)
            return String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 0xF)]], as: UTF8.self)
        }.joined()
    }

    func read(_ description: String) -> Secret? {
        guard isEnabled else { return nil }
        let id = keyctl_search(KEY_SPEC_USER_KEYRING, "user", description, 0)
        guard id > 0 else { return nil }
        var buffer: UnsafeMutableRawPointer?
        let length = keyctl_read_alloc(key_serial_t(id), &buffer)
        guard let buffer else { return nil }
        defer {
            explicit_bzero(buffer, max(Int(length), 0))
            free(buffer)
        }
        guard length == Sodium.keyLength else { return nil }
        return Secret(bytes: Array(UnsafeRawBufferPointer(start: buffer, count: Int(length))))
    }

    func store(_ key: Secret, as description: String) {
        guard isEnabled else { return }
        // The key is made in the process keyring, which dies with this process, and reaches
        // the user keyring only once its timeout and permissions are set: a process killed in
        // between leaves no key behind that would never expire.
        let id = key.withBytes { bytes in
            add_key("user", description, bytes.baseAddress, bytes.count, KEY_SPEC_PROCESS_KEYRING)
        }
        guard id > 0 else { return }
        defer { _ = keyctl_unlink(id, KEY_SPEC_PROCESS_KEYRING) }
        // Readable by the same user even from a session keyring that does not link the user
        // keyring (a systemd service, `keyctl new_session`): the user could ptrace those
        // processes anyway. Never by anyone else.
        let permissions = key_perm_t(KEY_POS_ALL) | key_perm_t(KEY_USR_VIEW) | key_perm_t(KEY_USR_READ)
            | key_perm_t(KEY_USR_SEARCH) | key_perm_t(KEY_USR_SETATTR)
        guard keyctl_set_timeout(id, UInt32(timeoutSeconds)) == 0, keyctl_setperm(id, permissions) == 0 else {
            drop(id)
            return
        }
        // Linking replaces an older key of the same description in the user keyring.
        _ = keyctl_link(id, KEY_SPEC_USER_KEYRING)
    }

    /// Forgets a key that no longer opens its file (a wrong passphrase, a rewritten file).
    func drop(_ description: String) {
        let id = keyctl_search(KEY_SPEC_USER_KEYRING, "user", description, 0)
        if id > 0 { drop(key_serial_t(id)) }
    }

    private func drop(_ id: key_serial_t) {
        if keyctl_invalidate(id) != 0 { _ = keyctl_unlink(id, KEY_SPEC_USER_KEYRING) }
    }
}
