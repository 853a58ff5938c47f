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
        let server: String?
        do {
            let match = "type='signal',interface='\(name)',path='\(path)'"
            let replies = try bus.call(
                [
                    try DBusMessage.methodCall(
                        destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                        interface: "org.freedesktop.DBus", member: "AddMatch", signature: "s"
                    ) { $0.string(match) },
                    try notify(summary: summary, body: body, milliseconds: deadline - MonotonicClock.milliseconds()),
                ], deadline: setUp)
            guard replies[1].kind == .methodReturn else {
                return .unavailable(
                    "no notification server answers on the session bus (\(replies[1].errorName ?? "no reply"))")
            }
            var reader = replies[1].reader()
            id = try reader.uint32()
            server = replies[1].sender
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
            guard message.kind == .signal, message.interface == name, message.sender == server, server != nil else {
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
        _ = try? bus.send(message, deadline: MonotonicClock.nanoseconds() + 500_000_000)
    }
}
