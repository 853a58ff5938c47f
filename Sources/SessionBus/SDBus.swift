import CSDBus
import Glibc

/// libsystemd's sd-bus, loaded with dlopen the first time a bus is needed, not linked: linking
/// it maps libsystemd and the libraries it needs (libgcrypt, liblzma, libzstd, liblz4, libcap)
/// at the start of every invocation, about 0.8 ms, the file backend and `--version` included.
///
/// The one loader for both users of the bus: `SessionBus` (the client calls every invocation
/// may make) and the desktop handler that serves `io.portalhq.PortalToken` when the bus starts
/// it. The functions are resolved once; nil when the library or any function is missing.
/// Addresses in a library never unloaded: safe to share. None of these functions is variadic,
/// so each is called through its C type.
public struct SDBus: @unchecked Sendable {
    public static let soname = "libsystemd.so.0"
    public static let loaded: SDBus? = load()

    public typealias Bus = OpaquePointer
    public typealias Message = OpaquePointer
    public typealias Text = UnsafePointer<CChar>?

    // Connections
    public let open: @convention(c) (UnsafeMutablePointer<Bus?>?) -> Int32
    public let openUser: @convention(c) (UnsafeMutablePointer<Bus?>?) -> Int32
    public let setMethodCallTimeout: @convention(c) (Bus?, UInt64) -> Int32
    public let flushCloseUnref: @convention(c) (Bus?) -> Bus?
    public let flush: @convention(c) (Bus?) -> Int32

    // Calling a method
    public let messageNewMethodCall:
        @convention(c) (Bus?, UnsafeMutablePointer<Message?>?, Text, Text, Text, Text) -> Int32
    public let messageUnref: @convention(c) (Message?) -> Message?
    public let messageAppendBasic: @convention(c) (Message?, CChar, UnsafeRawPointer?) -> Int32
    public let messageReadBasic: @convention(c) (Message?, CChar, UnsafeMutableRawPointer?) -> Int32
    public let messageEnterContainer: @convention(c) (Message?, CChar, Text) -> Int32
    public let call:
        @convention(c) (Bus?, Message?, UInt64, UnsafeMutablePointer<sd_bus_error>?, UnsafeMutablePointer<Message?>?) ->
            Int32
    public let getPropertyTrivial:
        @convention(c) (
            Bus?, Text, Text, Text, Text, UnsafeMutablePointer<sd_bus_error>?, CChar,
            UnsafeMutableRawPointer?
        ) -> Int32
    public let errorFree: @convention(c) (UnsafeMutablePointer<sd_bus_error>?) -> Void

    // Several calls in flight at once, and their arguments and replies
    public let callAsync:
        @convention(c) (
            Bus?, UnsafeMutablePointer<OpaquePointer?>?, Message?, sd_bus_message_handler_t?,
            UnsafeMutableRawPointer?, UInt64
        ) -> Int32
    public let slotUnref: @convention(c) (OpaquePointer?) -> OpaquePointer?
    public let messageRef: @convention(c) (Message?) -> Message?
    public let messageGetError: @convention(c) (Message?) -> UnsafePointer<sd_bus_error>?
    public let messageOpenContainer: @convention(c) (Message?, CChar, Text) -> Int32
    public let messageCloseContainer: @convention(c) (Message?) -> Int32
    public let messageExitContainer: @convention(c) (Message?) -> Int32
    public let messageReadArray:
        @convention(c) (Message?, CChar, UnsafeMutablePointer<UnsafeRawPointer?>?, UnsafeMutablePointer<Int>?) -> Int32
    public let messageSkip: @convention(c) (Message?, Text) -> Int32

    // Serving an object
    public let addObject:
        @convention(c) (
            Bus?, UnsafeMutablePointer<OpaquePointer?>?, Text,
            sd_bus_message_handler_t?, UnsafeMutableRawPointer?
        ) -> Int32
    public let requestName: @convention(c) (Bus?, Text, UInt64) -> Int32
    public let releaseName: @convention(c) (Bus?, Text) -> Int32
    public let process: @convention(c) (Bus?, UnsafeMutablePointer<Message?>?) -> Int32
    public let wait: @convention(c) (Bus?, UInt64) -> Int32
    public let isMethodCall: @convention(c) (Message?, Text, Text) -> Int32
    public let readStrv:
        @convention(c) (Message?, UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Int32
    public let replyMethodError: @convention(c) (Message?, UnsafePointer<sd_bus_error>?) -> Int32
    public let newMethodReturn: @convention(c) (Message?, UnsafeMutablePointer<Message?>?) -> Int32
    public let send: @convention(c) (Bus?, Message?, UnsafeMutablePointer<UInt64>?) -> Int32

    /// Lazy binding, as for a program linked to it: RTLD_NOW would bind every function of
    /// libsystemd and of libgcrypt, liblzma, libzstd, liblz4 and libcap on every call that asks the
    /// bus, most never called; those used here are resolved now, by dlsym.
    private static func load() -> SDBus? {
        guard let library = dlopen(soname, RTLD_LAZY | RTLD_LOCAL) else { return nil }
        func resolve<Function>(_ name: String, as _: Function.Type) -> Function? {
            dlsym(library, name).map { unsafeBitCast($0, to: Function.self) }
        }
        guard let open = resolve("sd_bus_open", as: (@convention(c) (UnsafeMutablePointer<Bus?>?) -> Int32).self),
            let openUser = resolve(
                "sd_bus_open_user", as: (@convention(c) (UnsafeMutablePointer<Bus?>?) -> Int32).self),
            let setMethodCallTimeout = resolve(
                "sd_bus_set_method_call_timeout", as: (@convention(c) (Bus?, UInt64) -> Int32).self),
            let flushCloseUnref = resolve("sd_bus_flush_close_unref", as: (@convention(c) (Bus?) -> Bus?).self),
            let flush = resolve("sd_bus_flush", as: (@convention(c) (Bus?) -> Int32).self),
            let messageNewMethodCall = resolve(
                "sd_bus_message_new_method_call",
                as: (@convention(c) (Bus?, UnsafeMutablePointer<Message?>?, Text, Text, Text, Text) -> Int32).self),
            let messageUnref = resolve("sd_bus_message_unref", as: (@convention(c) (Message?) -> Message?).self),
            let messageAppendBasic = resolve(
                "sd_bus_message_append_basic",
                as: (@convention(c) (Message?, CChar, UnsafeRawPointer?) -> Int32).self),
            let messageReadBasic = resolve(
                "sd_bus_message_read_basic",
                as: (@convention(c) (Message?, CChar, UnsafeMutableRawPointer?) -> Int32).self),
            let messageEnterContainer = resolve(
                "sd_bus_message_enter_container", as: (@convention(c) (Message?, CChar, Text) -> Int32).self),
            let call = resolve(
                "sd_bus_call",
                as: (@convention(c) (
                    Bus?, Message?, UInt64, UnsafeMutablePointer<sd_bus_error>?,
                    UnsafeMutablePointer<Message?>?
                ) -> Int32).self),
            let getPropertyTrivial = resolve(
                "sd_bus_get_property_trivial",
                as: (@convention(c) (
                    Bus?, Text, Text, Text, Text, UnsafeMutablePointer<sd_bus_error>?, CChar,
                    UnsafeMutableRawPointer?
                ) -> Int32).self),
            let errorFree = resolve(
                "sd_bus_error_free", as: (@convention(c) (UnsafeMutablePointer<sd_bus_error>?) -> Void).self),
            let callAsync = resolve(
                "sd_bus_call_async",
                as: (@convention(c) (
                    Bus?, UnsafeMutablePointer<OpaquePointer?>?, Message?, sd_bus_message_handler_t?,
                    UnsafeMutableRawPointer?, UInt64
                ) -> Int32).self),
            let slotUnref = resolve("sd_bus_slot_unref", as: (@convention(c) (OpaquePointer?) -> OpaquePointer?).self),
            let messageRef = resolve("sd_bus_message_ref", as: (@convention(c) (Message?) -> Message?).self),
            let messageGetError = resolve(
                "sd_bus_message_get_error", as: (@convention(c) (Message?) -> UnsafePointer<sd_bus_error>?).self),
            let messageOpenContainer = resolve(
                "sd_bus_message_open_container", as: (@convention(c) (Message?, CChar, Text) -> Int32).self),
            let messageCloseContainer = resolve(
                "sd_bus_message_close_container", as: (@convention(c) (Message?) -> Int32).self),
            let messageExitContainer = resolve(
                "sd_bus_message_exit_container", as: (@convention(c) (Message?) -> Int32).self),
            let messageReadArray = resolve(
                "sd_bus_message_read_array",
                as: (@convention(c) (
                    Message?, CChar, UnsafeMutablePointer<UnsafeRawPointer?>?, UnsafeMutablePointer<Int>?
                ) -> Int32).self),
            let messageSkip = resolve("sd_bus_message_skip", as: (@convention(c) (Message?, Text) -> Int32).self),
            let addObject = resolve(
                "sd_bus_add_object",
                as: (@convention(c) (
                    Bus?, UnsafeMutablePointer<OpaquePointer?>?, Text,
                    sd_bus_message_handler_t?, UnsafeMutableRawPointer?
                ) -> Int32).self),
            let requestName = resolve("sd_bus_request_name", as: (@convention(c) (Bus?, Text, UInt64) -> Int32).self),
            let releaseName = resolve("sd_bus_release_name", as: (@convention(c) (Bus?, Text) -> Int32).self),
            let process = resolve(
                "sd_bus_process", as: (@convention(c) (Bus?, UnsafeMutablePointer<Message?>?) -> Int32).self),
            let wait = resolve("sd_bus_wait", as: (@convention(c) (Bus?, UInt64) -> Int32).self),
            let isMethodCall = resolve(
                "sd_bus_message_is_method_call", as: (@convention(c) (Message?, Text, Text) -> Int32).self),
            let readStrv = resolve(
                "sd_bus_message_read_strv",
                as: (@convention(c) (
                    Message?, UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?
                ) -> Int32).self),
            let replyMethodError = resolve(
                "sd_bus_reply_method_error", as: (@convention(c) (Message?, UnsafePointer<sd_bus_error>?) -> Int32).self
            ),
            let newMethodReturn = resolve(
                "sd_bus_message_new_method_return",
                as: (@convention(c) (Message?, UnsafeMutablePointer<Message?>?) -> Int32).self),
            let send = resolve(
                "sd_bus_send", as: (@convention(c) (Bus?, Message?, UnsafeMutablePointer<UInt64>?) -> Int32).self)
        else { return nil }
        return SDBus(
            open: open, openUser: openUser, setMethodCallTimeout: setMethodCallTimeout,
            flushCloseUnref: flushCloseUnref, flush: flush,
            messageNewMethodCall: messageNewMethodCall, messageUnref: messageUnref,
            messageAppendBasic: messageAppendBasic, messageReadBasic: messageReadBasic,
            messageEnterContainer: messageEnterContainer, call: call, getPropertyTrivial: getPropertyTrivial,
            errorFree: errorFree, callAsync: callAsync, slotUnref: slotUnref, messageRef: messageRef,
            messageGetError: messageGetError, messageOpenContainer: messageOpenContainer,
            messageCloseContainer: messageCloseContainer, messageExitContainer: messageExitContainer,
            messageReadArray: messageReadArray, messageSkip: messageSkip, addObject: addObject,
            requestName: requestName, releaseName: releaseName,
            process: process, wait: wait, isMethodCall: isMethodCall, readStrv: readStrv,
            replyMethodError: replyMethodError, newMethodReturn: newMethodReturn, send: send)
    }
}
