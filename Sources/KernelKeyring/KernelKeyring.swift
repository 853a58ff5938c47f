import CKeyutils
import Glibc
import PortalTokenCore

/// Secrets kept for a while in the kernel user keyring (keyrings(7)): in kernel memory, never on
/// disk or in swap, readable by processes of the same user until the entry's timeout. The same
/// trade-off as gpg-agent's passphrase cache. Where the kernel refuses keyrings (containers whose
/// seccomp profile answers EPERM or ENOSYS), nothing is kept and every read misses.
public struct KernelKeyring: SecretCache {
    public init() {}

    public func read(_ name: String) -> Secret? {
        let id = keyctl_search(KEY_SPEC_USER_KEYRING, "user", name, 0)
        guard id > 0 else { return nil }
        var buffer: UnsafeMutableRawPointer?
        let length = keyctl_read_alloc(key_serial_t(id), &buffer)
        guard let buffer else { return nil }
        defer {
            explicit_bzero(buffer, max(Int(length), 0))
            free(buffer)
        }
        guard length >= 0 else { return nil }
        return Secret(bytes: Array(UnsafeRawBufferPointer(start: buffer, count: Int(length))))
    }

    public func store(_ secret: Secret, as name: String, forSeconds seconds: Int) {
        guard seconds > 0 else { return }
        // The entry is made in the process keyring, which dies with this process, and reaches
        // the user keyring only once its timeout and permissions are set: a process killed in
        // between leaves nothing behind that would never expire.
        let id = secret.withBytes { bytes in
            add_key("user", name, bytes.baseAddress, bytes.count, KEY_SPEC_PROCESS_KEYRING)
        }
        guard id > 0 else { return }
        defer { _ = keyctl_unlink(id, KEY_SPEC_PROCESS_KEYRING) }
        // Readable by the same user even from a session keyring that does not link the user
        // keyring (a systemd service, `keyctl new_session`): the user could ptrace those
        // processes anyway. Never by anyone else.
        let permissions =
            key_perm_t(KEY_POS_ALL) | key_perm_t(KEY_USR_VIEW) | key_perm_t(KEY_USR_READ)
            | key_perm_t(KEY_USR_SEARCH) | key_perm_t(KEY_USR_SETATTR)
        guard keyctl_set_timeout(id, UInt32(clamping: seconds)) == 0, keyctl_setperm(id, permissions) == 0 else {
            drop(id)
            return
        }
        // Linking replaces an older entry of the same name in the user keyring.
        _ = keyctl_link(id, KEY_SPEC_USER_KEYRING)
    }

    public func drop(_ name: String) {
        let id = keyctl_search(KEY_SPEC_USER_KEYRING, "user", name, 0)
        if id > 0 { drop(key_serial_t(id)) }
    }

    public func dropAll(where isDropped: (String) -> Bool) {
        for (id, name) in userKeys() where isDropped(name) { drop(id) }
    }

    /// The `user` keys linked in the user keyring, with their names.
    func userKeys() -> [(key_serial_t, String)] {
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

    private func drop(_ id: key_serial_t) {
        if keyctl_invalidate(id) != 0 { _ = keyctl_unlink(id, KEY_SPEC_USER_KEYRING) }
    }
}
