import CKeyutils
import Glibc
import PortalTokenCore

/// The kernel user keyring (keyrings(7)): small secrets kept in kernel memory for a while,
/// readable by the same user's processes, never written to disk or swap, gone at their timeout.
///
/// The encrypted file store caches derived keys here; a sign-in keeps here a result it could
/// not write yet. Where the kernel refuses keyrings (containers whose seccomp profile answers
/// EPERM or ENOSYS), nothing is kept and every read misses.
public enum KernelKeyring {
    /// The secret kept under `description`, when it is there and at most `maximumLength` bytes.
    public static func read(_ description: String, maximumLength: Int = 32 * 1024) -> Secret? {
        let id = keyctl_search(KEY_SPEC_USER_KEYRING, "user", description, 0)
        guard id > 0 else { return nil }
        var buffer: UnsafeMutableRawPointer?
        let length = keyctl_read_alloc(key_serial_t(id), &buffer)
        guard let buffer else { return nil }
        defer {
            explicit_bzero(buffer, max(Int(length), 0))
            free(buffer)
        }
        guard length >= 0, length <= maximumLength else { return nil }
        return Secret(bytes: Array(UnsafeRawBufferPointer(start: buffer, count: Int(length))))
    }

    /// Keeps `secret` under `description` for `timeoutSeconds`, replacing an older key of the
    /// same description. False when the kernel would not keep it.
    @discardableResult
    public static func store(_ secret: Secret, as description: String, timeoutSeconds: Int) -> Bool {
        guard timeoutSeconds > 0 else { return false }
        // The key is made in the process keyring, which dies with this process, and reaches
        // the user keyring only once its timeout and permissions are set: a process killed in
        // between leaves no key behind that would never expire.
        let id = secret.withBytes { bytes in
            add_key("user", description, bytes.baseAddress, bytes.count, KEY_SPEC_PROCESS_KEYRING)
        }
        guard id > 0 else { return false }
        defer { _ = keyctl_unlink(id, KEY_SPEC_PROCESS_KEYRING) }
        // Readable by the same user even from a session keyring that does not link the user
        // keyring (a systemd service, `keyctl new_session`): the user could ptrace those
        // processes anyway. Never by anyone else.
        let permissions = key_perm_t(KEY_POS_ALL) | key_perm_t(KEY_USR_VIEW) | key_perm_t(KEY_USR_READ)
            | key_perm_t(KEY_USR_SEARCH) | key_perm_t(KEY_USR_SETATTR)
        guard keyctl_set_timeout(id, UInt32(timeoutSeconds)) == 0, keyctl_setperm(id, permissions) == 0 else {
            drop(id)
            return false
        }
        // Linking replaces an older key of the same description in the user keyring.
        return keyctl_link(id, KEY_SPEC_USER_KEYRING) == 0
    }

    /// Forgets the key of that description, if there is one.
    public static func drop(_ description: String) {
        let id = keyctl_search(KEY_SPEC_USER_KEYRING, "user", description, 0)
        if id > 0 { drop(key_serial_t(id)) }
    }

    /// Forgets every user key in the user keyring whose description starts with `prefix`.
    public static func dropAll(withPrefix prefix: String) {
        for (id, description) in userKeys() where description.hasPrefix(prefix) { drop(id) }
    }

    /// The `user` keys linked in the user keyring, with their descriptions.
    static func userKeys() -> [(key_serial_t, String)] {
        var buffer: UnsafeMutableRawPointer?
        let length = keyctl_read_alloc(KEY_SPEC_USER_KEYRING, &buffer)
        guard let buffer else { return [] }
        defer { free(buffer) }
        guard length > 0 else { return [] }
        let ids = UnsafeRawBufferPointer(start: buffer, count: Int(length)).bindMemory(to: key_serial_t.self)
        var keys: [(key_serial_t, String)] = []
        for id in ids {
            var text: UnsafeMutablePointer<CChar>?
            guard keyctl_describe_alloc(id, &text) >= 0, let text else { continue }
            defer { free(text) }
            // "type;uid;gid;perm;description": the description may itself hold ';'.
            let fields = String(cString: text).split(separator: ";", maxSplits: 4, omittingEmptySubsequences: false)
            guard fields.count == 5, fields[0] == "user" else { continue }
            keys.append((id, String(fields[4])))
        }
        return keys
    }

    private static func drop(_ id: key_serial_t) {
        if keyctl_invalidate(id) != 0 { _ = keyctl_unlink(id, KEY_SPEC_USER_KEYRING) }
    }
}

/// A sign-in's results that could not be written yet, in the kernel user keyring under the
/// names `SignInService` gives them (digests only), each for its own lifetime.
public struct KernelSignInMemory: SignInMemory {
    public init() {}

    public func remember(_ payload: Secret, as name: String, lifetimeSeconds: Int) -> Bool {
        KernelKeyring.store(payload, as: name, timeoutSeconds: lifetimeSeconds)
    }

    public func recall(_ name: String) -> Secret? { KernelKeyring.read(name) }

    public func forget(_ name: String) { KernelKeyring.drop(name) }

    public func forgetAll(withPrefix prefix: String) { KernelKeyring.dropAll(withPrefix: prefix) }
}
