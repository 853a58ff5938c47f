import Basics
import CSDBus
import Glibc
import PortalTokenCore

/// The desktop handler when the session bus starts it (`redirect --dbus-activated`): it owns
/// `io.portalhq.PortalToken` and serves `org.freedesktop.Application` (Desktop Entry
/// specification, "D-Bus Activation"), so a launcher hands it the redirect URL in an `Open` call
/// rather than on a command line (product contract §7). It leaves once nothing has come for
/// `idleTimeout`, as activated services do.
final class DesktopActivation {
    static let interface = "org.freedesktop.Application"
    static let idleMicroseconds: UInt64 = 10_000_000

    /// Completes one sign-in from a URL; what it throws is reported on stderr and to the caller.
    typealias Completion = (Secret) throws -> Void

    private let complete: Completion
    private let streams: StandardStreams
    private var lastActivity = DesktopActivation.monotonicMicroseconds()

    init(streams: StandardStreams, complete: @escaping Completion) {
        self.streams = streams
        self.complete = complete
    }

    /// No bus to serve: a configuration problem of the desktop session, not of a sign-in.
    static func busFailure(_ step: String, _ code: Int32) -> CLIError {
        CLIError("cannot \(step): \(String(cString: strerror(code)))",
                 hint: "--dbus-activated is for the session bus to start; deliver a URL by hand with 'portal-token redirect -'",
                 exitCode: .usage)
    }

    /// Serves the bus until it has been idle for `idleMicroseconds`, or the bus goes away.
    func serve() throws {
        guard let sd = SessionBusLibrary.loaded else {
            throw CLIError("cannot load \(SessionBusLibrary.soname) to serve the session bus",
                           hint: "install Debian's libsystemd0; deliver a URL by hand with 'portal-token redirect -'",
                           exitCode: .usage)
        }
        var bus: OpaquePointer?
        // The bus that started this process (DBUS_STARTER_ADDRESS), else the user's session bus.
        let opened = getenv("DBUS_STARTER_ADDRESS") != nil ? sd.open(&bus) : sd.openUser(&bus)
        guard opened >= 0, let bus else { throw Self.busFailure("connect to the session bus", -opened) }
        defer { _ = sd.flushCloseUnref(bus) }
        let context = Unmanaged.passUnretained(self).toOpaque()
        let added = sd.addObject(bus, nil, DesktopRedirectHandler.objectPath, { message, userData, _ in
            guard let message, let userData else { return 0 }
            return Unmanaged<DesktopActivation>.fromOpaque(userData).takeUnretainedValue().handle(message)
        }, context)
        guard added >= 0 else { throw Self.busFailure("serve \(DesktopRedirectHandler.objectPath)", -added) }
        let requested = sd.requestName(bus, DesktopRedirectHandler.busName, 0)
        guard requested >= 0 else { throw Self.busFailure("own \(DesktopRedirectHandler.busName)", -requested) }

        while true {
            let processed = sd.process(bus, nil)
            if processed < 0 {
                // The bus went away: nothing more can arrive.
                if processed == -ECONNRESET || processed == -ENOTCONN { return }
                throw Self.busFailure("read from the session bus", -processed)
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
    }

    /// One call on the object path: 1 when answered here, 0 to let sd-bus answer "unknown".
    private func handle(_ message: OpaquePointer) -> Int32 {
        lastActivity = Self.monotonicMicroseconds()
        let sd = SessionBusLibrary.functions
        if sd.isMethodCall(message, Self.interface, "Open") > 0 {
            return open(message)
        }
        if sd.isMethodCall(message, Self.interface, "Activate") > 0
            || sd.isMethodCall(message, Self.interface, "ActivateAction") > 0 {
            // Nothing to show: the handler has no window and no actions.
            return reply(to: message, error: nil)
        }
        return 0
    }

    /// `Open(as uris, a{sv} platform_data)`: each URI completes a sign-in, in order. The reply
    /// comes once they are done; the first failure is its error.
    private func open(_ message: OpaquePointer) -> Int32 {
        var strings: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        guard SessionBusLibrary.functions.readStrv(message, &strings) >= 0, let strings else {
            return reply(to: message, error: ("org.freedesktop.DBus.Error.InvalidArgs", "Open takes (as uris, a{sv} platform_data)"))
        }
        var uris: [Secret] = []
        var index = 0
        while let entry = strings[index] {
            uris.append(Secret(bytes: Array(UnsafeBufferPointer(start: UnsafeRawPointer(entry).assumingMemoryBound(to: UInt8.self),
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
                try complete(uri)
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
        let sd = SessionBusLibrary.functions
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

/// libsystemd's sd-bus, loaded with dlopen when the desktop handler runs, not linked: linking it
/// maps libsystemd and the compression and crypto libraries it needs (liblzma, libzstd, liblz4,
/// libgcrypt, libcap) into every invocation, about 0.6 ms here, for the one command that serves
/// the bus. None of these functions is variadic, so each is called through its C type.
struct SessionBusLibrary: @unchecked Sendable {
    static let soname = "libsystemd.so.0"
    static let loaded: SessionBusLibrary? = load()
    /// Only used once `serve` has checked `loaded`.
    static var functions: SessionBusLibrary { loaded! }

    typealias Bus = OpaquePointer
    typealias Message = OpaquePointer
    let open: @convention(c) (UnsafeMutablePointer<Bus?>?) -> Int32
    let openUser: @convention(c) (UnsafeMutablePointer<Bus?>?) -> Int32
    let flushCloseUnref: @convention(c) (Bus?) -> Bus?
    let addObject: @convention(c) (Bus?, UnsafeMutablePointer<OpaquePointer?>?, UnsafePointer<CChar>?,
                                   sd_bus_message_handler_t?, UnsafeMutableRawPointer?) -> Int32
    let requestName: @convention(c) (Bus?, UnsafePointer<CChar>?, UInt64) -> Int32
    let releaseName: @convention(c) (Bus?, UnsafePointer<CChar>?) -> Int32
    let process: @convention(c) (Bus?, UnsafeMutablePointer<Message?>?) -> Int32
    let wait: @convention(c) (Bus?, UInt64) -> Int32
    let isMethodCall: @convention(c) (Message?, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> Int32
    let readStrv: @convention(c) (Message?, UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32
    let replyMethodError: @convention(c) (Message?, UnsafePointer<sd_bus_error>?) -> Int32
    let newMethodReturn: @convention(c) (Message?, UnsafeMutablePointer<Message?>?) -> Int32
    let messageUnref: @convention(c) (Message?) -> Message?
    let send: @convention(c) (Bus?, Message?, UnsafeMutablePointer<UInt64>?) -> Int32

    private static func load() -> SessionBusLibrary? {
        guard let library = dlopen(soname, RTLD_NOW | RTLD_LOCAL) else { return nil }
        func resolve<Function>(_ name: String, as type: Function.Type) -> Function? {
            dlsym(library, name).map { unsafeBitCast($0, to: type) }
        }
        guard let open = resolve("sd_bus_open", as: (@convention(c) (UnsafeMutablePointer<Bus?>?) -> Int32).self),
              let openUser = resolve("sd_bus_open_user", as: (@convention(c) (UnsafeMutablePointer<Bus?>?) -> Int32).self),
              let flushCloseUnref = resolve("sd_bus_flush_close_unref", as: (@convention(c) (Bus?) -> Bus?).self),
              let addObject = resolve("sd_bus_add_object", as: (@convention(c) (Bus?, UnsafeMutablePointer<OpaquePointer?>?, UnsafePointer<CChar>?,
                                                                                 sd_bus_message_handler_t?, UnsafeMutableRawPointer?) -> Int32).self),
              let requestName = resolve("sd_bus_request_name", as: (@convention(c) (Bus?, UnsafePointer<CChar>?, UInt64) -> Int32).self),
              let releaseName = resolve("sd_bus_release_name", as: (@convention(c) (Bus?, UnsafePointer<CChar>?) -> Int32).self),
              let process = resolve("sd_bus_process", as: (@convention(c) (Bus?, UnsafeMutablePointer<Message?>?) -> Int32).self),
              let wait = resolve("sd_bus_wait", as: (@convention(c) (Bus?, UInt64) -> Int32).self),
              let isMethodCall = resolve("sd_bus_message_is_method_call",
                                         as: (@convention(c) (Message?, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> Int32).self),
              let readStrv = resolve("sd_bus_message_read_strv",
                                     as: (@convention(c) (Message?, UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32).self),
              let replyMethodError = resolve("sd_bus_reply_method_error", as: (@convention(c) (Message?, UnsafePointer<sd_bus_error>?) -> Int32).self),
              let newMethodReturn = resolve("sd_bus_message_new_method_return",
                                            as: (@convention(c) (Message?, UnsafeMutablePointer<Message?>?) -> Int32).self),
              let messageUnref = resolve("sd_bus_message_unref", as: (@convention(c) (Message?) -> Message?).self),
              let send = resolve("sd_bus_send", as: (@convention(c) (Bus?, Message?, UnsafeMutablePointer<UInt64>?) -> Int32).self)
        else { return nil }
        return SessionBusLibrary(open: open, openUser: openUser, flushCloseUnref: flushCloseUnref, addObject: addObject,
                                 requestName: requestName, releaseName: releaseName, process: process, wait: wait,
                                 isMethodCall: isMethodCall, readStrv: readStrv, replyMethodError: replyMethodError,
                                 newMethodReturn: newMethodReturn, messageUnref: messageUnref, send: send)
    }
}
