import Basics
import Commands
import Glibc
import Operations
import PortalTokenCore
import SessionBus

/// The desktop handler when the session bus starts it (`redirect --dbus-activated`): it owns
/// `io.portalhq.PortalToken` and serves `org.freedesktop.Application` (Desktop Entry
/// specification, "D-Bus Activation"), so a launcher hands it the redirect URL in an `Open` call
/// rather than on a command line (docs/security.md, "Hardening rules"). It leaves once nothing has come for
/// `idleTimeout`, as activated services do.
///
/// `Open` is answered as soon as its URLs are checked, before any grant is exchanged: the
/// launcher waiting for the answer (`gio open`, run by `xdg-open` for a Chromium-based browser)
/// was itself given the URL on its command line, and exits once answered (docs/signing-in.md,
/// "Which browsers put the URL on a command line").
final class DesktopActivation {
    static let interface = "org.freedesktop.Application"
    static let idleMicroseconds: UInt64 = 10_000_000

    /// Checks one URL, sending nothing; what it throws is reported on stderr and answers `Open`.
    /// What it returns exchanges the grant once `Open` is answered; what that throws is reported
    /// on stderr.
    typealias Acceptance = (Secret) throws -> DesktopSignIn

    private let accept: Acceptance
    private let streams: StandardStreams
    /// Sign-ins whose `Open` is answered, waiting for their exchange.
    private var accepted: [DesktopSignIn] = []
    private var lastActivity = DesktopActivation.monotonicMicroseconds()
    /// Whether an `Open` call came: a launcher that ignores `DBusActivatable` starts the
    /// handler directly, from the entry's `Exec=` line, and then none ever comes.
    private(set) var receivedOpen = false

    init(streams: StandardStreams, accept: @escaping Acceptance) {
        self.streams = streams
        self.accept = accept
    }

    /// No bus to serve: a configuration problem of the desktop session, not of a sign-in.
    static func busFailure(_ step: String, _ code: Int32) -> CLIError {
        CLIError(
            "cannot \(step): \(String(cString: strerror(code)))",
            hint:
                """
                --dbus-activated is for the session bus to start; deliver a URL by hand with 'portal-token \
                redirect -'
                """,
            exitCode: .usage)
    }

    /// Serves the bus until it has been idle for `idleMicroseconds`, or the bus goes away.
    func serve() throws {
        // The bus that started this process (DBUS_STARTER_ADDRESS), else the user's session bus.
        let starter = getenv("DBUS_STARTER_ADDRESS").map { String(cString: $0) }
        guard let address = starter ?? DBusConnection.sessionBusAddress() else {
            throw Self.busFailure("connect to the session bus", ENOENT)
        }
        guard let bus = DBusConnection.connect(address: address, deadline: Self.deadline(afterSeconds: 5)) else {
            throw Self.busFailure("connect to the session bus", ECONNREFUSED)
        }
        try requestName(on: bus)

        // What was accepted is exchanged even when the bus goes away or fails afterwards.
        defer { finishAccepted() }
        while true {
            let idleUntil = Int64(lastActivity + Self.idleMicroseconds) * 1000
            let message: DBusMessage?
            do {
                message = try bus.next(deadline: idleUntil)
            } catch {
                // The bus went away: nothing more can arrive.
                return
            }
            guard let message else { break }
            handle(message, on: bus)
            // The answer has left, so the launcher exits; then the exchange.
            finishAccepted()
        }
        // Give the name back, then answer whatever was sent before the bus saw it go.
        guard
            let release = try? bus.send(
                try DBusMessage.methodCall(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                    interface: "org.freedesktop.DBus", member: "ReleaseName", signature: "s"
                ) { $0.string(DesktopRedirectHandler.busName) }, deadline: Self.deadline(afterSeconds: 1))
        else { return }
        _ = try? bus.reply(to: release, deadline: Self.deadline(afterSeconds: 1))
        while let message = try? bus.next(deadline: MonotonicClock.nanoseconds()) { handle(message, on: bus) }
        finishAccepted()
    }

    /// Owns `io.portalhq.PortalToken` (or waits in its queue, as a second start does).
    private func requestName(on bus: DBusConnection) throws {
        let reply: DBusMessage
        do {
            let request = try DBusMessage.methodCall(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                interface: "org.freedesktop.DBus", member: "RequestName", signature: "su"
            ) {
                $0.string(DesktopRedirectHandler.busName)
                $0.uint32(0)
            }
            reply = try bus.call([request], deadline: Self.deadline(afterSeconds: 5))[0]
        } catch {
            throw Self.busFailure("own \(DesktopRedirectHandler.busName)", ECONNRESET)
        }
        var reader = reply.reader()
        // 1: the primary owner; 2: in the queue; 4: the owner already.
        guard reply.kind == .methodReturn, let result = try? reader.uint32(), [1, 2, 4].contains(result) else {
            throw Self.busFailure("own \(DesktopRedirectHandler.busName)", EEXIST)
        }
    }

    static func deadline(afterSeconds seconds: Int64) -> Int64 {
        MonotonicClock.nanoseconds() + seconds * 1_000_000_000
    }

    /// Exchanges the grants of every answered `Open`, in order; each failure goes to stderr.
    private func finishAccepted() {
        while !accepted.isEmpty {
            let signIn = accepted.removeFirst()
            do {
                try signIn()
            } catch {
                PortalTokenCLI.report(error, streams: streams)
            }
            lastActivity = Self.monotonicMicroseconds()
        }
    }

    /// One message from the bus: a call on the handler's object is answered here; any other
    /// call is answered "unknown" (a `Peer.Ping`, as every D-Bus peer answers it, with nothing);
    /// signals are ignored.
    private func handle(_ message: DBusMessage, on bus: DBusConnection) {
        guard message.kind == .methodCall else { return }
        lastActivity = Self.monotonicMicroseconds()
        let call = message
        let answer: DBusMessage?
        if call.path == DesktopRedirectHandler.objectPath, call.isMethodCall(Self.interface, "Open") {
            answer = open(call)
        } else if call.path == DesktopRedirectHandler.objectPath,
            call.isMethodCall(Self.interface, "Activate") || call.isMethodCall(Self.interface, "ActivateAction")
        {
            // Nothing to show: the handler has no window and no actions.
            answer = try? DBusMessage.reply(to: call)
        } else if call.isMethodCall("org.freedesktop.DBus.Peer", "Ping") {
            answer = try? DBusMessage.reply(to: call)
        } else {
            answer = try? DBusMessage.reply(
                to: call, errorName: "org.freedesktop.DBus.Error.UnknownMethod",
                text: "no method \(call.member ?? "") on \(call.path ?? "") is served here")
        }
        guard let answer, call.flags & DBusMessage.noReplyExpected == 0 else { return }
        _ = try? bus.send(answer, deadline: Self.deadline(afterSeconds: 5))
    }

    /// `Open(as uris, a{sv} platform_data)`: each URI is checked, in order, and the reply comes
    /// once they are, with the first refusal as its error; the grants of those accepted are
    /// exchanged after the reply has left (`serve`).
    private func open(_ message: DBusMessage) -> DBusMessage? {
        receivedOpen = true
        var uris: [Secret] = []
        var reader = message.reader()
        let read: Void? =
            message.signature == "asa{sv}"
            ? try? reader.array(alignment: 4) { uri throws(DBusWireError) in
                uris.append(Secret(bytes: Array(try uri.stringBytes())))
            } : nil
        // The URL's grant is single-use: no copy stays behind in the message.
        message.wipeBody()
        guard read != nil else {
            return try? DBusMessage.reply(
                to: message, errorName: "org.freedesktop.DBus.Error.InvalidArgs",
                text: "Open takes (as uris, a{sv} platform_data)")
        }
        var failure: (name: String, message: String)?
        for uri in uris {
            do {
                accepted.append(try accept(uri))
            } catch {
                let reported = PortalTokenCLI.report(error, streams: streams)
                if failure == nil {
                    failure = ("io.portalhq.PortalToken.Error.Exit\(reported.exitCode.rawValue)", reported.message)
                }
            }
        }
        lastActivity = Self.monotonicMicroseconds()
        return try? DBusMessage.reply(to: message, errorName: failure?.name, text: failure?.message ?? "")
    }

    static func monotonicMicroseconds() -> UInt64 { UInt64(MonotonicClock.microseconds()) }
}
