import Basics
import Commands
import CSDBus
import Glibc
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
        guard let sd = SDBus.loaded else {
            throw CLIError(
                "cannot load \(SDBus.soname) to serve the session bus",
                hint: "install Debian's libsystemd0; deliver a URL by hand with 'portal-token redirect -'",
                exitCode: .usage)
        }
        var bus: OpaquePointer?
        // The bus that started this process (DBUS_STARTER_ADDRESS), else the user's session bus.
        let opened = getenv("DBUS_STARTER_ADDRESS") != nil ? sd.open(&bus) : sd.openUser(&bus)
        guard opened >= 0, let bus else { throw Self.busFailure("connect to the session bus", -opened) }
        defer { _ = sd.flushCloseUnref(bus) }
        let context = Unmanaged.passUnretained(self).toOpaque()
        let added = sd.addObject(
            bus, nil, DesktopRedirectHandler.objectPath,
            { message, userData, _ in
                guard let message, let userData else { return 0 }
                return Unmanaged<DesktopActivation>.fromOpaque(userData).takeUnretainedValue().handle(message)
            }, context)
        guard added >= 0 else { throw Self.busFailure("serve \(DesktopRedirectHandler.objectPath)", -added) }
        let requested = sd.requestName(bus, DesktopRedirectHandler.busName, 0)
        guard requested >= 0 else { throw Self.busFailure("own \(DesktopRedirectHandler.busName)", -requested) }

        // What was accepted is exchanged even when the bus goes away or fails afterwards.
        defer { finishAccepted() }
        while true {
            let processed = sd.process(bus, nil)
            if processed < 0 {
                // The bus went away: nothing more can arrive.
                if processed == -ECONNRESET || processed == -ENOTCONN { return }
                throw Self.busFailure("read from the session bus", -processed)
            }
            if !accepted.isEmpty {
                // The answer leaves first, so the launcher exits; then the exchange.
                _ = sd.flush(bus)
                finishAccepted()
                continue
            }
            if processed > 0 { continue }
            let idle = Self.monotonicMicroseconds() - lastActivity
            if idle >= Self.idleMicroseconds { break }
            let waited = sd.wait(bus, Self.idleMicroseconds - idle)
            if waited < 0 && waited != -EINTR { return }
        }
        // Give the name back, then answer whatever was sent before the bus saw it go.
        _ = sd.releaseName(bus, DesktopRedirectHandler.busName)
        while sd.process(bus, nil) > 0 {}
        _ = sd.flush(bus)
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

    /// One call on the object path: 1 when answered here, 0 to let sd-bus answer "unknown".
    private func handle(_ message: OpaquePointer) -> Int32 {
        lastActivity = Self.monotonicMicroseconds()
        let sd = SDBus.served
        if sd.isMethodCall(message, Self.interface, "Open") > 0 {
            return open(message)
        }
        if sd.isMethodCall(message, Self.interface, "Activate") > 0
            || sd.isMethodCall(message, Self.interface, "ActivateAction") > 0
        {
            // Nothing to show: the handler has no window and no actions.
            return reply(to: message, error: nil)
        }
        return 0
    }

    /// `Open(as uris, a{sv} platform_data)`: each URI is checked, in order, and the reply comes
    /// once they are, with the first refusal as its error; the grants of those accepted are
    /// exchanged after the reply has left (`serve`).
    private func open(_ message: OpaquePointer) -> Int32 {
        receivedOpen = true
        var strings: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        guard SDBus.served.readStrv(message, &strings) >= 0, let strings else {
            return reply(
                to: message,
                error: ("org.freedesktop.DBus.Error.InvalidArgs", "Open takes (as uris, a{sv} platform_data)"))
        }
        var uris: [Secret] = []
        var index = 0
        while let entry = strings[index] {
            uris.append(
                Secret(
                    bytes: Array(
                        UnsafeBufferPointer(
                            start: UnsafeRawPointer(entry).assumingMemoryBound(to: UInt8.self),
                            count: strlen(entry)))))
            // The URL's grant is single-use: no copy stays behind in freed memory.
            explicit_bzero(entry, strlen(entry))
            free(entry)
            index += 1
        }
        free(strings)
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
        return reply(to: message, error: failure)
    }

    private func reply(to message: OpaquePointer, error: (name: String, message: String)?) -> Int32 {
        let sd = SDBus.served
        if let error {
            var busError = sd_bus_error()
            return error.name.withCString { name in
                error.message.withCString { text in
                    busError.name = name
                    busError.message = text
                    busError._need_free = 0
                    return sd.replyMethodError(message, &busError)
                }
            }
        }
        var reply: OpaquePointer?
        guard sd.newMethodReturn(message, &reply) >= 0, let reply else { return -ENOMEM }
        defer { _ = sd.messageUnref(reply) }
        let sent = sd.send(nil, reply, nil)
        return sent < 0 ? sent : 1
    }

    static func monotonicMicroseconds() -> UInt64 { UInt64(MonotonicClock.microseconds()) }
}

private extension SDBus {
    /// Only used once `serve` has checked `loaded`.
    static var served: SDBus { loaded! }
}
