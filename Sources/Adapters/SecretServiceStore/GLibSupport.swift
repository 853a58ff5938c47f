import CLibSecret
import PortalTokenCore

/// Builds a `GHashTable` of string attributes owned by the table itself.
func makeAttributeTable(_ attributes: [(String, String)]) -> OpaquePointer {
    let lib = LibSecret.functions
    let table = lib.hashTableNewWithStringKeys(freeingValues: true)!
    for (name, value) in attributes {
        lib.hashTableInsert(
            table, UnsafeMutableRawPointer(lib.strdup(name)), UnsafeMutableRawPointer(lib.strdup(value)))
    }
    return table
}

/// The GLib log writer that keeps libsecret's and GLib's own warnings off stderr: portal-token
/// reports every failure itself, in git's grammar, and stderr must stay silent on success.
/// Installed as soon as libsecret is loaded.
let silentLogWriter: GLogWriterFunc = { level, fields, count, _ in
    G_LOG_WRITER_HANDLED
}

/// Turns a GError into the store's error, naming what was being done. GError texts come from
/// GLib and D-Bus and carry no stored values.
func storeError(from error: UnsafeMutablePointer<GError>, while operation: String, timeoutMilliseconds: Int)
    -> StoreError
{
    let lib = LibSecret.functions
    defer { lib.errorFree(error) }
    if lib.isCancellation(error) {
        return StoreError(
            .timedOut, "the Secret Service did not answer within \(timeoutMilliseconds) ms while \(operation)",
            hint: "check that the keyring daemon is running and responsive, or raise PORTAL_TOKEN_KEYRING_TIMEOUT_MS")
    }
    var remoteName: String?
    if let remote = lib.dbusErrorGetRemoteError(error) {
        remoteName = String(cString: remote)
        lib.free(remote)
    }
    switch remoteName {
    case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner":
        return StoreError(
            .unavailable, "no Secret Service provider is running on the session bus",
            hint:
                """
                start a keyring (gnome-keyring-daemon, KWallet or KeePassXC with Secret Service integration), or \
                use --backend file
                """
        )
    case "org.freedesktop.Secret.Error.IsLocked":
        return StoreError(.locked, "the keyring is locked", hint: lockedHint)
    default:
        let message = String(cString: error.pointee.message)
        return StoreError(.failed, "the Secret Service failed while \(operation): \(message)")
    }
}

let lockedHint = StoreError.keyringLockedHint
