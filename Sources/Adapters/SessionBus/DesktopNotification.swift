import Basics
import Glibc
import PortalTokenCore

/// A question on the desktop (Desktop Notifications Specification 1.2): a notification with
/// "Allow" and "Deny" actions through `org.freedesktop.Notifications` on the session bus, and
/// the action the user chose, read from the server's `ActionInvoked` signal. Only signals from
/// the connection that answered `Notify` count: another client of the bus cannot answer for
/// the user by sending one.
public enum DesktopNotification {
    static let name = "org.freedesktop.Notifications"
    static let path = "/org/freedesktop/Notifications"

    /// Shows the question until `deadline` (milliseconds of `MonotonicClock`), and while `open`
    /// says it still waits; what became of it.
    public static func ask(summary: String, body: String, deadline: Int64, open: () -> Bool)
        -> DesktopQuestionOutcome
    {
        let nanoseconds = deadline * 1_000_000
        guard let address = DBusConnection.sessionBusAddress() else {
            return .unavailable("no session bus: DBUS_SESSION_BUS_ADDRESS is not set")
        }
        let setUp = min(nanoseconds, MonotonicClock.nanoseconds() + 3_000_000_000)
        guard let bus = DBusConnection.connect(address: address, deadline: setUp) else {
            return .unavailable("the session bus at \(address.prefix(120)) does not answer")
        }
        let id: UInt32
        let server: String
        do {
            // The server is the user's own, outside any sandbox: a container or toolbox that shares
            // the session bus and took the name could otherwise answer for the user.
            let owner = try bus.call([busCall("GetNameOwner", name)], deadline: setUp)[0]
            guard owner.kind == .methodReturn else {
                return .unavailable("no notification server on the session bus (\(owner.errorName ?? "no owner"))")
            }
            var ownerReader = owner.reader()
            let ownerName = try ownerReader.string()
            let facts = try bus.call(
                [busCall("GetConnectionUnixUser", ownerName), busCall("GetConnectionUnixProcessID", ownerName)],
                deadline: setUp)
            guard facts.allSatisfy({ $0.kind == .methodReturn }) else {
                return .unavailable("the bus does not name the notification server's process")
            }
            var uidReader = facts[0].reader()
            var pidReader = facts[1].reader()
            let (uid, pid) = (try uidReader.uint32(), try pidReader.uint32())
            guard uid == getuid(), let theirs = FileReading.link("/proc/\(pid)/ns/user"),
                theirs == FileReading.link("/proc/self/ns/user")
            else {
                return .unavailable(
                    "the notification server (pid \(pid), uid \(uid)) is not this user's own in this user namespace, "
                        + "so its answers are not taken")
            }
            let match = "type='signal',sender='\(ownerName)',interface='\(name)',path='\(path)'"
            let replies = try bus.call(
                [
                    busCall("AddMatch", match),
                    try notify(summary: summary, body: body, milliseconds: deadline - MonotonicClock.milliseconds()),
                ], deadline: setUp)
            guard replies[1].kind == .methodReturn, replies[1].sender == ownerName else {
                return .unavailable(
                    "no notification server answers on the session bus (\(replies[1].errorName ?? "no reply"))")
            }
            var reader = replies[1].reader()
            id = try reader.uint32()
            server = ownerName
        } catch {
            return .unavailable("the notification could not be shown")
        }
        defer { close(id, on: bus) }
        while open() {
            let now = MonotonicClock.nanoseconds()
            guard now < nanoseconds else { return .ended }
            let next: DBusMessage?
            do {
                next = try bus.next(deadline: min(nanoseconds, now + 100_000_000))
            } catch {
                // The bus is gone: no answer can come this way.
                return .ended
            }
            guard let message = next else { continue }
            guard message.kind == .signal, message.interface == name, message.sender == server else {
                continue
            }
            var reader = message.reader()
            switch message.member {
            case "ActionInvoked" where message.signature == "us":
                guard (try? reader.uint32()) == id, let action = try? reader.string() else { continue }
                if action == "allow" { return .answered(.allow) }
                if action == "deny" { return .answered(.deny) }
            case "NotificationClosed" where message.signature == "uu":
                if (try? reader.uint32()) == id { return .dismissed }
            default:
                continue
            }
        }
        return .ended
    }

    /// A call to the bus daemon with one string.
    private static func busCall(_ member: String, _ argument: String) throws(DBusWireError) -> DBusMessage {
        try DBusMessage.methodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: member, signature: "s", arguments: { $0.string(argument) })
    }

    /// `Notify(app_name, replaces_id, app_icon, summary, body, actions, hints, expire_timeout)`.
    private static func notify(summary: String, body: String, milliseconds: Int64) throws(DBusWireError)
        -> DBusMessage
    {
        try DBusMessage.methodCall(
            destination: name, path: path, interface: name, member: "Notify", signature: "susssasa{sv}i"
        ) { writer in
            writer.string("portal-token")
            writer.uint32(0)
            writer.string("dialog-password")
            writer.string(summary)
            writer.string(body)
            writer.array(alignment: 4) { actions in
                for word in ["allow", "Allow", "deny", "Deny"] { actions.string(word) }
            }
            writer.array(alignment: 8) { hints in
                hints.structure { entry in
                    entry.string("urgency")
                    entry.variant("y") { $0.byte(2) }
                }
            }
            writer.uint32(UInt32(bitPattern: Int32(clamping: max(1, milliseconds))))
        }
    }

    /// Takes the notification away (it was answered, here or elsewhere, or its time passed).
    private static func close(_ id: UInt32, on bus: DBusConnection) {
        let built = try? DBusMessage.methodCall(
            destination: name, path: path, interface: name, member: "CloseNotification", signature: "u",
            arguments: { $0.uint32(id) })
        guard var message = built else { return }
        message.flags |= DBusMessage.noReplyExpected
        _ = try? bus.send(message, deadline: MonotonicClock.nanoseconds() + 50_000_000)
    }
}
