import Basics
import CCurl
import Glibc

/// libcurl, loaded with dlopen the first time a request is made (see CCurl's shim.h for why it
/// is not linked). Every function the transport uses is resolved once; if the library or any
/// function is missing, `loaded` is nil and requests fail with a clear error.
enum LibCurl {
    /// The soname of Debian's libcurl4 (OpenSSL flavour) and of the other flavours alike.
    static let soname = "libcurl.so.4"

    static let loaded: Functions? = Functions.load()

    /// The resolved functions; only used once `send` has checked `loaded`.
    static var functions: Functions { loaded! }

    /// libcurl's global set-up (OpenSSL's with it), done once per process before the first handle.
    static let globalInitialisation: CURLcode = functions.globalInit(Int(CURL_GLOBAL_ALL))

    /// Addresses of functions in a library that is never unloaded: safe to share between threads.
    struct Functions: @unchecked Sendable {
        let globalInitFunction, easyInitFunction, easyCleanupFunction, easyResetFunction: UnsafeMutableRawPointer
        let easyPerformFunction: UnsafeMutableRawPointer
        let easyStrerrorFunction, slistAppendFunction, slistFreeAllFunction: UnsafeMutableRawPointer
        let setoptFunction, getinfoFunction: UnsafeMutableRawPointer

        /// Opens libcurl with lazy binding (binding all of it and its forty-odd libraries at once
        /// cost more than all of curl(1)'s own start); the functions used here are resolved now.
        static func load() -> Functions? {
            guard let library = DynamicLibrary(soname) else { return nil }
            func resolve(_ name: String) -> UnsafeMutableRawPointer? { try? library.function(name) }
            guard let globalInit = resolve("curl_global_init"), let easyInit = resolve("curl_easy_init"),
                let easyCleanup = resolve("curl_easy_cleanup"), let easyReset = resolve("curl_easy_reset"),
                let easyPerform = resolve("curl_easy_perform"),
                let easyStrerror = resolve("curl_easy_strerror"), let slistAppend = resolve("curl_slist_append"),
                let slistFreeAll = resolve("curl_slist_free_all"), let setopt = resolve("curl_easy_setopt"),
                let getinfo = resolve("curl_easy_getinfo")
            else { return nil }
            return Functions(
                globalInitFunction: globalInit, easyInitFunction: easyInit, easyCleanupFunction: easyCleanup,
                easyResetFunction: easyReset, easyPerformFunction: easyPerform, easyStrerrorFunction: easyStrerror,
                slistAppendFunction: slistAppend, slistFreeAllFunction: slistFreeAll,
                setoptFunction: setopt, getinfoFunction: getinfo)
        }

        func globalInit(_ flags: Int) -> CURLcode { portal_curl_global_init(globalInitFunction, flags) }
        func easyInit() -> UnsafeMutableRawPointer? { portal_curl_easy_init(easyInitFunction) }
        func easyCleanup(_ handle: UnsafeMutableRawPointer) { portal_curl_easy_cleanup(easyCleanupFunction, handle) }
        func easyReset(_ handle: UnsafeMutableRawPointer) { portal_curl_easy_reset(easyResetFunction, handle) }
        func easyPerform(_ handle: UnsafeMutableRawPointer) -> CURLcode {
            portal_curl_easy_perform(easyPerformFunction, handle)
        }
        func easyStrerror(_ code: CURLcode) -> UnsafePointer<CChar>? {
            portal_curl_easy_strerror(easyStrerrorFunction, code)
        }

        func slistAppend(_ list: UnsafeMutablePointer<curl_slist>?, _ text: UnsafePointer<CChar>)
            -> UnsafeMutablePointer<curl_slist>?
        {
            portal_curl_slist_append(slistAppendFunction, list, text)
        }

        func slistFreeAll(_ list: UnsafeMutablePointer<curl_slist>?) {
            portal_curl_slist_free_all(slistFreeAllFunction, list)
        }

        func setoptLong(_ handle: UnsafeMutableRawPointer, _ option: CURLoption, _ value: Int) -> CURLcode {
            portal_curl_setopt_long(setoptFunction, handle, option, value)
        }

        func setoptPointer(_ handle: UnsafeMutableRawPointer, _ option: CURLoption, _ value: UnsafeRawPointer?)
            -> CURLcode
        {
            portal_curl_setopt_pointer(setoptFunction, handle, option, value)
        }

        func setoptOffT(_ handle: UnsafeMutableRawPointer, _ option: CURLoption, _ value: curl_off_t) -> CURLcode {
            portal_curl_setopt_off_t(setoptFunction, handle, option, value)
        }

        func setoptWriteCallback(
            _ handle: UnsafeMutableRawPointer, _ option: CURLoption, _ callback: curl_write_callback
        ) -> CURLcode {
            portal_curl_setopt_write_callback(setoptFunction, handle, option, callback)
        }

        func setoptPrereqCallback(_ handle: UnsafeMutableRawPointer, _ callback: curl_prereq_callback) -> CURLcode {
            portal_curl_setopt_prereq_callback(setoptFunction, handle, callback)
        }

        func getinfoLong(_ handle: UnsafeMutableRawPointer, _ info: CURLINFO, _ value: UnsafeMutablePointer<Int>)
            -> CURLcode
        {
            portal_curl_getinfo_long(getinfoFunction, handle, info, value)
        }

        func getinfoOffT(_ handle: UnsafeMutableRawPointer, _ info: CURLINFO, _ value: UnsafeMutablePointer<curl_off_t>)
            -> CURLcode
        {
            portal_curl_getinfo_off_t(getinfoFunction, handle, info, value)
        }

        func setoptSockoptCallback(_ handle: UnsafeMutableRawPointer, _ callback: curl_sockopt_callback) -> CURLcode {
            portal_curl_setopt_sockopt_callback(setoptFunction, handle, callback)
        }

        func getinfoString(
            _ handle: UnsafeMutableRawPointer, _ info: CURLINFO,
            _ value: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>
        ) -> CURLcode {
            portal_curl_getinfo_string(getinfoFunction, handle, info, value)
        }
    }
}
