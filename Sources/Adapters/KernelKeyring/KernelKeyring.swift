import CKeyutils
import Glibc
import PortalTokenCore

/// Secrets kept for a while in the kernel keyring (keyrings(7)): in kernel memory, never on disk or
/// in swap, until the entry's timeout. The same trade-off as gpg-agent's passphrase cache, with its
/// two knobs: an entry lives `idleSeconds` after its last use (each read starts that again, as
/// gpg-agent's default-cache-ttl), and never past `maximumSeconds` after it was stored, however
/// often it is used (max-cache-ttl).
///
/// Who can read an entry (docs/storage.md, "The kernel keyring"): the kernel grants a key's "user"
/// permissions to every process of the uid, whatever its user namespace, so a sandbox made with
/// `unshare -Ur` or `bwrap` could read an entry that carried them. Entries carry none: only a
/// process that *possesses* an entry may see, read or change it. They are linked in the user's
/// persistent keyring (keyctl_get_persistent(2)), which the kernel keeps per user namespace and
/// links into no session keyring by itself; each portal-token process links it into its own
/// process keyring, which is neither inherited across fork nor kept across exec. So a process of the
/// user in the same user namespace that asks the kernel for that keyring can read the entries
/// (portal-token itself, or anything else running as the user there, which could ptrace it too),
/// and nothing in another user namespace can, nor anything of another uid. Where the kernel has no
/// persistent keyrings, or refuses keyrings altogether (containers whose seccomp profile answers
/// EPERM or ENOSYS), nothing is kept and every read misses.
///
/// The kernel keeps one timeout per key, so the cap travels with the entry: its payload starts
/// with a header (a version byte, the idle seconds, the deadline on CLOCK_BOOTTIME in
/// milliseconds, big-endian) before the secret. CLOCK_BOOTTIME runs on through suspend, as the
/// kernel's own timeouts do, and no one can set it, so moving the wall clock moves no deadline.
/// An entry past its deadline, or without a valid header, is dropped when read.
public struct KernelKeyring: SecretCache {
    public init() {}

    static let headerVersion: UInt8 = 1
    /// The bytes an entry holds before its secret.
    public static let headerLength = 13

    /// The user's persistent keyring, linked into the calling thread's process keyring (so
    /// possessed by this process alone); nil where the kernel has none or refuses keyrings. Asked
    /// by every operation, on the thread that makes it: the kernel keeps a process keyring in each
    /// thread's credentials, so a thread that existed before another linked it does not possess
    /// it. Each ask also starts the keyring's own expiry (three days by default) again.
    static var anchor: key_serial_t? {
        let id = keyctl_get_persistent(uid_t.max, KEY_SPEC_PROCESS_KEYRING)
        return id > 0 ? key_serial_t(id) : nil
    }

    /// The permissions of every entry: all of them to a possessor, none to anyone else, the user
    /// included. SETATTR lets a read start the idle timeout again.
    static let permissions: key_perm_t = key_perm_t(KEY_POS_ALL)

    public func read(_ name: String) -> Secret? {
        guard let anchor = Self.anchor else { return nil }
        let id = keyctl_search(anchor, "user", name, 0)
        guard id > 0 else { return nil }
        let key = key_serial_t(id)
        var buffer: UnsafeMutableRawPointer?
        let length = keyctl_read_alloc(key, &buffer)
        guard let buffer else { return nil }
        defer {
            explicit_bzero(buffer, max(Int(length), 0))
            free(buffer)
        }
        guard length >= 0 else { return nil }
        let bytes = UnsafeRawBufferPointer(start: buffer, count: Int(length))
        guard bytes.count >= Self.headerLength, bytes[0] == Self.headerVersion else {
            drop(key)
            return nil
        }
        let idleSeconds = Int(bytes[1..<5].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        let deadline = bytes[5..<13].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let remaining = Int64(bitPattern: deadline) - Self.bootMilliseconds()
        guard remaining > 0, idleSeconds > 0 else {
            drop(key)
            return nil
        }
        // A use: the idle timeout starts again, never past the deadline.
        _ = keyctl_set_timeout(key, Self.timeout(idleSeconds: idleSeconds, remainingMilliseconds: remaining))
        return Secret(bytes: Array(bytes[Self.headerLength...]))
    }

    public func store(_ secret: Secret, as name: String, idleSeconds: Int, maximumSeconds: Int) {
        guard idleSeconds > 0, maximumSeconds > 0, let anchor = Self.anchor else { return }
        let idle = UInt32(clamping: min(idleSeconds, maximumSeconds))
        let remaining = Int64(min(maximumSeconds, Int(UInt32.max))) * 1000
        let deadline = UInt64(bitPattern: Self.bootMilliseconds() + remaining)
        var header: [UInt8] = [Self.headerVersion]
        header += (0..<4).reversed().map { UInt8(truncatingIfNeeded: idle >> ($0 * 8)) }
        header += (0..<8).reversed().map { UInt8(truncatingIfNeeded: deadline >> ($0 * 8)) }
        // The entry is made in the process keyring, which dies with this process, and reaches
        // the persistent keyring only once its timeout and permissions are set: a process killed
        // in between leaves nothing behind that would never expire, or that others could read.
        let id = secret.withBytes { bytes -> key_serial_t in
            var payload = header
            payload.reserveCapacity(header.count + bytes.count)
            payload.append(contentsOf: bytes)
            defer { payload.withUnsafeMutableBytes { explicit_bzero($0.baseAddress!, $0.count) } }
            return add_key("user", name, payload, payload.count, KEY_SPEC_PROCESS_KEYRING)
        }
        guard id > 0 else { return }
        defer { _ = keyctl_unlink(id, KEY_SPEC_PROCESS_KEYRING) }
        let timeout = Self.timeout(idleSeconds: Int(idle), remainingMilliseconds: remaining)
        guard keyctl_set_timeout(id, timeout) == 0, keyctl_setperm(id, Self.permissions) == 0 else {
            drop(id)
            return
        }
        // Linking replaces an older entry of the same name in the persistent keyring.
        guard keyctl_link(id, anchor) == 0 else {
            drop(id)
            return
        }
        dropFromUserKeyring(name)
    }

    /// The kernel's timeout in whole seconds: the idle time, or what is left before the
    /// deadline when that is sooner (rounded up, and at least 1: 0 would mean "never"; a read
    /// past the deadline drops the entry whatever the kernel says).
    static func timeout(idleSeconds: Int, remainingMilliseconds: Int64) -> UInt32 {
        let remainingSeconds = (remainingMilliseconds + 999) / 1000
        return UInt32(clamping: max(1, min(Int64(idleSeconds), remainingSeconds)))
    }

    /// CLOCK_BOOTTIME in milliseconds: the same for every process of the machine, unmoved by
    /// setting the wall clock, running on through suspend.
    static func bootMilliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_BOOTTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    public func drop(_ name: String) {
        if let anchor = Self.anchor {
            let id = keyctl_search(anchor, "user", name, 0)
            if id > 0 { drop(key_serial_t(id)) }
        }
        dropFromUserKeyring(name)
    }

    public func dropAll(where isDropped: (String) -> Bool) {
        for keyring in [Self.anchor, KEY_SPEC_USER_KEYRING].compactMap({ $0 }) {
            for (id, name) in userKeys(in: keyring) where isDropped(name) { drop(id) }
        }
    }

    /// An entry of the same name that an earlier portal-token left in the user keyring, where
    /// entries carried the user's read permission: gone as soon as its name is used again.
    private func dropFromUserKeyring(_ name: String) {
        let id = keyctl_search(KEY_SPEC_USER_KEYRING, "user", name, 0)
        if id > 0 { drop(key_serial_t(id)) }
    }

    /// The `user` keys linked in `keyring`, with their names.
    func userKeys(in keyring: key_serial_t) -> [(key_serial_t, String)] {
        var buffer: UnsafeMutableRawPointer?
        let length = keyctl_read_alloc(keyring, &buffer)
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
        if keyctl_invalidate(id) != 0 {
            if let anchor = Self.anchor { _ = keyctl_unlink(id, anchor) }
            _ = keyctl_unlink(id, KEY_SPEC_USER_KEYRING)
        }
    }
}
