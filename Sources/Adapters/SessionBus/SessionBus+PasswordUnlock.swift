import PortalTokenCore

/// Unlocking the default collection with its password, typed at a terminal (`portal-token
/// unlock`, docs/storage.md, "Unlocking from a terminal"). The Secret Service API has no call for
/// it: a client asks `Unlock` and the provider runs its own prompt, a desktop dialog. gnome-keyring
/// also takes the password from a client on its own interface
/// (`org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface.UnlockWithMasterPassword`, the
/// call its own tools make), which is used here; a provider without it answers `UnknownMethod`,
/// which is `.unsupported`.
///
/// The password travels as a secret of a `plain` transfer session, as every secret this
/// connection reads does (docs/storage.md, "The transfer session: `plain`"); the call's bytes are
/// wiped once sent.
extension SessionBus {
    static let gnomeKeyringInterface = "org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface"

    public func unlockDefaultCollection(password: Secret) throws(StoreError) -> PasswordUnlock {
        let operation = "unlocking the keyring with its password"
        let first = try aliasAndSessionCalls()
        let collection = try readAliasAndSession(
            try exchange(first, while: operation), opened: first.count > 1, while: operation)
        guard collection != "/", let session = secretTransferSession else { return .noDefaultCollection }
        guard try readLocked(try exchange([try lockedQuery(collection)], while: operation)[0], while: operation)
        else { return .alreadyUnlocked }

        let built: DBusMessage? = password.withBytes { bytes in
            try? DBusMessage.methodCall(
                destination: Self.secretServiceName, path: Self.secretServicePath,
                interface: Self.gnomeKeyringInterface, member: "UnlockWithMasterPassword", signature: "o(oayays)"
            ) { call in
                call.string(collection)
                call.structure {
                    $0.string(session)
                    $0.array(alignment: 1) { _ in }
                    $0.array(alignment: 1) { value in for byte in bytes { value.byte(byte) } }
                    $0.string("text/plain")
                }
            }
        }
        guard let unlock = built else { throw StoreError(.failed, "the unlock call could not be built") }
        defer { unlock.wipeBody() }
        let reply = try exchange([unlock], while: operation)[0]
        switch reply.errorName {
        case nil:
            let locked = try readLocked(
                try exchange([try lockedQuery(collection)], while: operation)[0], while: operation)
            return locked ? .wrongPassword : .unlocked
        case "org.freedesktop.DBus.Error.UnknownMethod", "org.freedesktop.DBus.Error.UnknownInterface",
            "org.freedesktop.DBus.Error.UnknownObject":
            return .unsupported
        default:
            try throwIfUnavailable(reply, while: operation)
            // gnome-keyring refuses a wrong password with an error of its own naming.
            return .wrongPassword
        }
    }
}
