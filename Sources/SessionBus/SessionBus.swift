import Basics
import CSDBus
import Glibc
import PortalTokenCore

/// The user's D-Bus session bus through libsystemd's sd-bus: the checks that run on every
/// invocation, without loading libsecret or GLib (GLib's start-up alone costs about 6 ms a
/// process; one sd-bus property read, whole process included, about 3 ms).
///
/// - Whether a Secret Service provider is registered (`org.freedesktop.secrets` has an owner or
///   is activatable), which is how `auto` decides ((docs/storage.md, "Backends and the auto decision")): from what
///   exists, never from how fast the keyring answers.
/// - Whether the default collection is locked (the Secret Service API's `ReadAlias` and the
///   collection's `Locked` property), which a cached answer must check before it is served.
/// - The bus's ID (`GetId`), which names the keyring behind a cached answer.
///
/// Every call is bounded by `timeoutMilliseconds`; the bus daemon answers the first check itself,
/// so a stopped keyring daemon cannot stall it.
///
/// libsystemd is loaded with dlopen when a bus is first asked for (see `SDBus`), like libsecret:
/// linking it would map it and its own dependencies (libgcrypt, liblzma, libzstd, liblz4, libcap)
/// at the start of every call, about 0.8 ms, the file backend and `--version` included.
public final class SessionBus: SessionBusConnection {
    public static let secretServiceName = "org.freedesktop.secrets"
    static let secretServicePath = "/org/freedesktop/secrets"

    let bus: OpaquePointer
    let sd: SDBus
    public let timeoutMilliseconds: Int
    /// The Secret Service session secrets are read in, once opened: the provider closes it when
    /// this connection closes.
    var secretTransferSession: String?

    /// Connects to the session bus sd-bus finds (`DBUS_SESSION_BUS_ADDRESS`, else
    /// `$XDG_RUNTIME_DIR/bus`); nil when there is none to connect to. Throws when libsystemd
    /// cannot be loaded: whether there is a bus is then unknown, never taken as "no".
    public static func connect(timeoutMilliseconds: Int) throws(StoreError) -> SessionBus? {
        // Where sd-bus would find no address, there is nothing to connect to: said without loading
        // libsystemd and the libraries it brings, which `auto` on a server would otherwise pay
        // on every call.
        guard addressMayExist() else { return nil }
        guard let sd = SDBus.loaded else {
            throw StoreError(
                .unavailable, "libsystemd (\(SDBus.soname)) could not be loaded to ask the session bus",
                hint: "install Debian's libsystemd0, or choose --backend file or --backend secret-service")
        }
        var bus: OpaquePointer?
        guard sd.openUser(&bus) >= 0, let bus else { return nil }
        return SessionBus(bus: bus, sd: sd, timeoutMilliseconds: timeoutMilliseconds)
    }

    /// Whether sd_bus_open_user could find a bus: an address in `DBUS_SESSION_BUS_ADDRESS`, or
    /// the socket `$XDG_RUNTIME_DIR/bus` (sd-bus, unlike GLib, never autolaunches one).
    static func addressMayExist() -> Bool {
        if let address = getenv("DBUS_SESSION_BUS_ADDRESS"), address.pointee != 0 { return true }
        guard let runtime = getenv("XDG_RUNTIME_DIR"), runtime.pointee != 0 else { return false }
        var status = stat()
        return stat(String(cString: runtime) + "/bus", &status) == 0
    }

    private init(bus: OpaquePointer, sd: SDBus, timeoutMilliseconds: Int) {
        self.bus = bus
        self.sd = sd
        self.timeoutMilliseconds = timeoutMilliseconds
        _ = sd.setMethodCallTimeout(bus, UInt64(max(timeoutMilliseconds, 1)) * 1000)
    }

    deinit { _ = sd.flushCloseUnref(bus) }

    // MARK: The provider

    /// Whether a Secret Service provider owns its name now, or the bus can start one.
    public func hasSecretServiceProvider() throws(StoreError) -> Bool {
        let owned = try call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
            interface: "org.freedesktop.DBus", member: "NameHasOwner",
            argument: Self.secretServiceName, while: "asking the session bus for a Secret Service provider"
        ) { reply throws(StoreError) in
            var value: Int32 = 0
            try check(sd.messageReadBasic(reply, CChar(UInt8(ascii: "b")), &value), "reading the bus's answer")
            return value != 0
        }
        if owned { return true }
        return try call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
            interface: "org.freedesktop.DBus", member: "ListActivatableNames", argument: nil,
            while: "asking the session bus for activatable services"
        ) { reply throws(StoreError) in
            try check(sd.messageEnterContainer(reply, CChar(UInt8(ascii: "a")), "s"), "reading the bus's answer")
            while true {
                var name: UnsafePointer<CChar>?
                let read = sd.messageReadBasic(reply, CChar(UInt8(ascii: "s")), &name)
                try check(read, "reading the bus's answer")
                guard read > 0, let name else { return false }
                if strcmp(name, Self.secretServiceName) == 0 { return true }
            }
        }
    }

    /// Which program owns `org.freedesktop.secrets`: the bus daemon names the owner's process
    /// (`GetConnectionUnixProcessID`), whose executable and command line name the program. nil
    /// when no program owns the name now (an activatable provider not started yet).
    public func secretServiceProvider() throws(StoreError) -> SecretServiceProvider? {
        let pid: UInt32
        do {
            pid = try call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                interface: "org.freedesktop.DBus", member: "GetConnectionUnixProcessID",
                argument: Self.secretServiceName, while: "asking the session bus which program provides the keyring"
            ) { reply throws(StoreError) in
                var value: UInt32 = 0
                try check(sd.messageReadBasic(reply, CChar(UInt8(ascii: "u")), &value), "reading the bus's answer")
                return value
            }
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
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/\(pid)/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return "" }
        return String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A process's arguments, from /proc (at most 4 KiB of them).
    static func commandLine(of pid: pid_t) -> [String] {
        let descriptor = open("/proc/\(pid)/cmdline", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return [] }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let length = read(descriptor, &buffer, buffer.count)
        guard length > 0 else { return [] }
        return buffer[0..<length].split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
    }

    // MARK: The bus

    /// The bus's unique ID, which the bus daemon answers itself (`GetId`): one round trip, never
    /// the keyring, so a stalled keyring cannot stall it.
    public func busID() throws(StoreError) -> String {
        try call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
            interface: "org.freedesktop.DBus", member: "GetId", argument: nil,
            while: "asking the session bus for its ID"
        ) { reply throws(StoreError) -> String in
            var id: UnsafePointer<CChar>?
            try check(sd.messageReadBasic(reply, CChar(UInt8(ascii: "s")), &id), "reading the bus's answer")
            guard let id, id.pointee != 0 else { throw StoreError(.failed, "the session bus answered an empty ID") }
            return String(cString: id)
        }
    }

    // MARK: The default collection

    /// Whether the Secret Service's default collection is locked: one `ReadAlias("default")` and
    /// one read of the collection's `Locked` property. No default collection counts as locked
    /// (nothing can be read from it).
    public func isDefaultCollectionLocked() throws(StoreError) -> Bool {
        try isDefaultCollectionLocked(withinMilliseconds: timeoutMilliseconds)
    }

    /// The same, both of its calls together bounded by `milliseconds` (a part of the bound, after
    /// a search the provider held: docs/storage.md, "A keyring that never hangs and never lies").
    func isDefaultCollectionLocked(withinMilliseconds milliseconds: Int) throws(StoreError) -> Bool {
        let deadline = MonotonicClock.nanoseconds() + Int64(max(milliseconds, 1)) * 1_000_000
        /// Each call waits what is left before the deadline; the bus's own bound comes back after.
        func boundBeforeCall() {
            let left = max(deadline - MonotonicClock.nanoseconds(), 1000)
            _ = sd.setMethodCallTimeout(bus, UInt64(left / 1000))
        }
        defer { _ = sd.setMethodCallTimeout(bus, UInt64(max(timeoutMilliseconds, 1)) * 1000) }
        boundBeforeCall()
        let path = try call(
            destination: Self.secretServiceName, path: Self.secretServicePath,
            interface: "org.freedesktop.Secret.Service", member: "ReadAlias", argument: "default",
            while: "asking the Secret Service for the default keyring"
        ) { reply throws(StoreError) -> String in
            var path: UnsafePointer<CChar>?
            try check(
                sd.messageReadBasic(reply, CChar(UInt8(ascii: "o")), &path), "reading the Secret Service's answer")
            return path.map { String(cString: $0) } ?? "/"
        }
        guard path != "/" else { return true }
        var error = sd_bus_error()
        defer { sd.errorFree(&error) }
        var locked: Int32 = 0
        boundBeforeCall()
        let result = sd.getPropertyTrivial(
            bus, Self.secretServiceName, path, "org.freedesktop.Secret.Collection",
            "Locked", &error, CChar(UInt8(ascii: "b")), &locked)
        try check(result, "reading whether the keyring is locked", error: error)
        return locked != 0
    }

    // MARK: Calls

    /// One bounded method call with at most one string argument; `read` decodes the reply.
    private func call<T>(
        destination: String, path: String, interface: String, member: String, argument: String?,
        while operation: String,
        read: (OpaquePointer) throws(StoreError) -> T
    ) throws(StoreError) -> T {
        var message: OpaquePointer?
        try check(sd.messageNewMethodCall(bus, &message, destination, path, interface, member), operation)
        defer { _ = sd.messageUnref(message) }
        if let argument {
            try check(argument.withCString { sd.messageAppendBasic(message, CChar(UInt8(ascii: "s")), $0) }, operation)
        }
        var error = sd_bus_error()
        defer { sd.errorFree(&error) }
        var reply: OpaquePointer?
        try check(sd.call(bus, message, 0, &error, &reply), operation, error: error)
        defer { _ = sd.messageUnref(reply) }
        guard let reply else { throw StoreError(.failed, "the session bus sent no reply while \(operation)") }
        return try read(reply)
    }

    func check(_ result: Int32, _ operation: String, error: sd_bus_error? = nil) throws(StoreError) {
        guard result < 0 else { return }
        if -result == ETIMEDOUT {
            throw StoreError(
                .timedOut, "the Secret Service did not answer within \(timeoutMilliseconds) ms while \(operation)",
                hint:
                    "check that the keyring daemon is running and responsive, or raise PORTAL_TOKEN_KEYRING_TIMEOUT_MS")
        }
        if let name = error?.name.map({ String(cString: $0) }),
            name == "org.freedesktop.DBus.Error.ServiceUnknown" || name == "org.freedesktop.DBus.Error.NameHasNoOwner"
        {
            throw StoreError(
                .unavailable, "no Secret Service provider is running on the session bus",
                hint:
                    """
                    start a keyring (gnome-keyring-daemon, KWallet or KeePassXC with Secret Service integration), \
                    or use --backend file
                    """
            )
        }
        let reason = error?.message.map { String(cString: $0) } ?? String(cString: strerror(-result))
        throw StoreError(.failed, "the session bus failed while \(operation): \(reason)")
    }
}
