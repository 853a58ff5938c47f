import Basics
import Glibc
import PortalTokenCore

/// The user's D-Bus session bus, spoken directly (`DBusConnection`): the checks that run on
/// every invocation, without loading libsecret, GLib or any other library (GLib's start-up alone
/// costs about 6 ms a process; loading libsystemd for its sd-bus, with the libraries it brings,
/// about 0.9 ms).
///
/// - Whether a Secret Service provider is registered (`org.freedesktop.secrets` has an owner or
///   is activatable), which is how `auto` decides (docs/storage.md, "Backends and the auto
///   decision"): from what exists, never from how fast the keyring answers.
/// - Whether the default collection is locked (its `Locked` property, on the path of the alias
///   `default`), which a cached answer must check before it is served.
/// - The bus's ID (`GetId`), which names the keyring behind a cached answer: asked with the first
///   check, in the same round trip.
///
/// Every call is bounded by `timeoutMilliseconds`; the bus daemon answers the first check itself,
/// so a stopped keyring daemon cannot stall it.
public final class SessionBus: SessionBusConnection {
    public static let secretServiceName = "org.freedesktop.secrets"
    static let secretServicePath = "/org/freedesktop/secrets"
    /// The default collection's own path under its alias (Secret Service API, "Aliases").
    static let defaultAliasPath = "/org/freedesktop/secrets/aliases/default"
    static let busName = "org.freedesktop.DBus"
    static let busPath = "/org/freedesktop/DBus"

    let connection: DBusConnection
    public let timeoutMilliseconds: Int
    /// The Secret Service session secrets are read in, once opened: the provider closes it when
    /// this connection closes.
    var secretTransferSession: String?
    /// The bus's ID, once the bus has said it.
    private var knownID: String?
    /// The lock check sent ahead (`askWhetherDefaultCollectionIsLocked`), awaiting its reply.
    private var lockCheckSent: UInt32?

    /// Connects to the session bus (`DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus`);
    /// nil when there is none to connect to.
    public static func connect(timeoutMilliseconds: Int) -> SessionBus? {
        guard let address = DBusConnection.sessionBusAddress(),
            let connection = DBusConnection.connect(
                address: address, deadline: deadline(afterMilliseconds: timeoutMilliseconds))
        else { return nil }
        return SessionBus(connection: connection, timeoutMilliseconds: timeoutMilliseconds)
    }

    private init(connection: DBusConnection, timeoutMilliseconds: Int) {
        self.connection = connection
        self.timeoutMilliseconds = timeoutMilliseconds
    }

    static func deadline(afterMilliseconds milliseconds: Int) -> Int64 {
        MonotonicClock.nanoseconds() + Int64(max(milliseconds, 1)) * 1_000_000
    }

    // MARK: The provider

    /// Whether a Secret Service provider owns its name now, or the bus can start one. The bus's
    /// ID is asked in the same round trip: every run that asks this names its cache by it.
    public func hasSecretServiceProvider() throws(StoreError) -> Bool {
        let operation = "asking the session bus for a Secret Service provider"
        let replies = try exchange(
            [
                try busCall("NameHasOwner", Self.secretServiceName, while: operation),
                try busCall("GetId", while: operation),
            ],
            while: operation)
        if replies[1].kind == .methodReturn, knownID == nil { knownID = try? readID(replies[1], while: operation) }
        if try read(replies[0], while: operation, { reader throws(DBusWireError) in try reader.bool() }) { return true }
        // A lock check sent ahead went to no provider (it starts none: `noAutoStart`).
        if let lockCheckSent { connection.abandon(lockCheckSent) }
        lockCheckSent = nil
        let activatable = try exchange([try busCall("ListActivatableNames", while: operation)], while: operation)[0]
        return try read(activatable, while: operation) { reader throws(DBusWireError) in
            var found = false
            try reader.array(alignment: 4) { name throws(DBusWireError) in
                if try name.string() == Self.secretServiceName { found = true }
            }
            return found
        }
    }

    /// Which program owns `org.freedesktop.secrets`: the bus daemon names the owner's process
    /// (`GetConnectionUnixProcessID`), whose executable and command line name the program. nil
    /// when no program owns the name now (an activatable provider not started yet).
    public func secretServiceProvider() throws(StoreError) -> SecretServiceProvider? {
        let operation = "asking the session bus which program provides the keyring"
        let pid: UInt32
        do {
            let call = try busCall("GetConnectionUnixProcessID", Self.secretServiceName, while: operation)
            let reply = try exchange([call], while: operation)[0]
            pid = try read(reply, while: operation) { reader throws(DBusWireError) in try reader.uint32() }
        } catch  where error.kind == .unavailable {
            return nil
        }
        return SecretServiceProvider(
            executable: Self.executable(of: pid_t(bitPattern: pid)),
            commandLine: Self.commandLine(of: pid_t(bitPattern: pid)))
    }

    /// The path /proc gives for a process's executable ("" where it cannot be read: another
    /// user's process, or a sandbox).
    static func executable(of pid: pid_t) -> String {
        FileReading.link("/proc/\(pid)/exe") ?? ""
    }

    /// A process's arguments, from /proc (at most 4 KiB of them).
    static func commandLine(of pid: pid_t) -> [String] {
        let descriptor = open("/proc/\(pid)/cmdline", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return [] }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let length = Glibc.read(descriptor, &buffer, buffer.count)
        guard length > 0 else { return [] }
        return buffer[0..<length].split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
    }

    // MARK: The bus

    /// The bus's unique ID, which the bus daemon answers itself (`GetId`): one round trip, never
    /// the keyring, so a stalled keyring cannot stall it; none when `hasSecretServiceProvider`
    /// asked it already.
    public func busID() throws(StoreError) -> String {
        if let knownID { return knownID }
        let operation = "asking the session bus for its ID"
        let id = try readID(
            try exchange([try busCall("GetId", while: operation)], while: operation)[0], while: operation)
        knownID = id
        return id
    }

    private func readID(_ reply: DBusMessage, while operation: String) throws(StoreError) -> String {
        let id = try read(reply, while: operation) { reader throws(DBusWireError) in try reader.string() }
        guard !id.isEmpty else { throw StoreError(.failed, "the session bus answered an empty ID") }
        return id
    }

    // MARK: The default collection

    /// Whether the Secret Service's default collection is locked: its `Locked` property, read on
    /// the alias's path in one call; a provider that serves no such path is asked `ReadAlias`
    /// and then the collection's property. No default collection counts as locked (nothing can
    /// be read from it).
    public func isDefaultCollectionLocked() throws(StoreError) -> Bool {
        if let serial = lockCheckSent {
            lockCheckSent = nil
            let operation = "reading whether the keyring is locked"
            let reply: DBusMessage
            do {
                reply = try connection.reply(
                    to: serial, deadline: Self.deadline(afterMilliseconds: timeoutMilliseconds))
            } catch {
                throw failure(error, while: operation)
            }
            if reply.kind == .methodReturn { return try readLocked(reply, while: operation) }
            // An error (the provider was not running yet, or serves no alias path) is asked again below.
        }
        return try isDefaultCollectionLocked(withinMilliseconds: timeoutMilliseconds)
    }

    /// Sends the lock check's call now, without waiting, and without starting a provider that
    /// is not running; `isDefaultCollectionLocked` then waits for its reply. Once per run.
    public func askWhetherDefaultCollectionIsLocked() {
        guard lockCheckSent == nil, var query = try? lockedQuery(Self.defaultAliasPath) else { return }
        query.flags |= DBusMessage.noAutoStart
        lockCheckSent = try? connection.send(query, deadline: Self.deadline(afterMilliseconds: timeoutMilliseconds))
    }

    /// The same, all of its calls together bounded by `milliseconds` (a part of the bound, after
    /// a search the provider held: docs/storage.md, "A keyring that never hangs and never lies").
    func isDefaultCollectionLocked(withinMilliseconds milliseconds: Int) throws(StoreError) -> Bool {
        let deadline = Self.deadline(afterMilliseconds: milliseconds)
        let operation = "reading whether the keyring is locked"
        let direct = try exchange([try lockedQuery(Self.defaultAliasPath)], deadline: deadline, while: operation)[0]
        if direct.kind == .methodReturn { return try readLocked(direct, while: operation) }
        // No provider, or none in time, is an answer; any other error is a provider that does
        // not serve the alias's path.
        try throwIfUnavailable(direct, while: operation)
        let aliased = try exchange(
            [
                try secretServiceCall(Self.secretServicePath, Self.serviceInterface, "ReadAlias", "s") {
                    $0.string("default")
                }
            ],
            deadline: deadline, while: "asking the Secret Service for the default keyring")[0]
        let path = try read(aliased, while: operation) { reader throws(DBusWireError) in try reader.string() }
        guard path != "/" else { return true }
        return try readLocked(
            try exchange([try lockedQuery(path)], deadline: deadline, while: operation)[0], while: operation)
    }

    /// `Properties.Get(Collection, Locked)` of the collection at `path`.
    func lockedQuery(_ path: String) throws(StoreError) -> DBusMessage {
        try secretServiceCall(path, Self.propertiesInterface, "Get", "ss") {
            $0.string("org.freedesktop.Secret.Collection")
            $0.string("Locked")
        }
    }

    /// A `Properties.Get` answer holding a boolean.
    func readLocked(_ reply: DBusMessage, while operation: String) throws(StoreError) -> Bool {
        try read(reply, while: operation) { reader throws(DBusWireError) in
            try reader.variant("b")
            return try reader.bool()
        }
    }

    // MARK: Calls

    /// A call to the bus daemon, with at most one string argument.
    private func busCall(_ member: String, _ argument: String? = nil, while operation: String) throws(StoreError)
        -> DBusMessage
    {
        try built(
            try? DBusMessage.methodCall(
                destination: Self.busName, path: Self.busPath, interface: Self.busName, member: member,
                signature: argument == nil ? "" : "s"
            ) { if let argument { $0.string(argument) } }, member)
    }

    /// A call to the Secret Service provider, its arguments (of `signature`) written by `arguments`.
    func secretServiceCall(
        _ path: String, _ interface: String, _ member: String, _ signature: String = "",
        arguments: (inout DBusWriter) -> Void = { _ in }
    ) throws(StoreError) -> DBusMessage {
        try built(
            try? DBusMessage.methodCall(
                destination: Self.secretServiceName, path: path, interface: interface, member: member,
                signature: signature, arguments: arguments), member)
    }

    private func built(_ message: DBusMessage?, _ member: String) throws(StoreError) -> DBusMessage {
        guard let message else {
            throw StoreError(.failed, "a call to \(member) could not be built: an argument holds a NUL byte")
        }
        return message
    }

    /// Sends the calls at once and waits, until `deadline` (else the whole bound), for all their
    /// replies: method returns or errors, for the caller to read.
    func exchange(_ calls: [DBusMessage], deadline: Int64? = nil, while operation: String) throws(StoreError)
        -> [DBusMessage]
    {
        do {
            return try connection.call(
                calls, deadline: deadline ?? Self.deadline(afterMilliseconds: timeoutMilliseconds))
        } catch {
            throw failure(error, while: operation)
        }
    }

    private func failure(_ error: DBusConnection.Failure, while operation: String) -> StoreError {
        switch error {
        case .timedOut: return timedOut(while: operation)
        case .disconnected(let reason), .malformed(let reason):
            return StoreError(.failed, "the session bus failed while \(operation): \(reason)")
        }
    }

    /// Reads a method return with `body`; an error reply is thrown as what it says.
    func read<T>(
        _ reply: DBusMessage, while operation: String, _ body: (inout DBusReader) throws(DBusWireError) -> T
    ) throws(StoreError) -> T {
        guard reply.kind == .methodReturn else {
            try throwIfUnavailable(reply, while: operation)
            throw StoreError(.failed, "the session bus failed while \(operation): \(Self.errorText(reply))")
        }
        var reader = reply.reader()
        do {
            return try body(&reader)
        } catch {
            throw StoreError(.failed, "the session bus sent an answer that could not be read while \(operation)")
        }
    }

    /// Throws for an error reply that means no provider is there, or that none answered in time.
    func throwIfUnavailable(_ reply: DBusMessage, while operation: String) throws(StoreError) {
        switch reply.errorName {
        case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner":
            throw StoreError(
                .unavailable, "no Secret Service provider is running on the session bus",
                hint:
                    """
                    start a keyring (gnome-keyring-daemon, KWallet or KeePassXC with Secret Service integration), \
                    or use --backend file
                    """
            )
        case "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Timeout":
            throw timedOut(while: operation)
        default: return
        }
    }

    func timedOut(while operation: String) -> StoreError {
        StoreError(
            .timedOut, "the Secret Service did not answer within \(timeoutMilliseconds) ms while \(operation)",
            hint: "check that the keyring daemon is running and responsive, or raise PORTAL_TOKEN_KEYRING_TIMEOUT_MS")
    }

    /// An error reply's name and text.
    static func errorText(_ reply: DBusMessage) -> String {
        var reader = reply.reader()
        let text = reply.signature.hasPrefix("s") ? (try? reader.string()) ?? "" : ""
        let name = reply.errorName ?? "an error"
        return text.isEmpty ? name : "\(text) (\(name))"
    }
}
