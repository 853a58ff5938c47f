import Glibc

/// A shared library loaded with dlopen the first time it is needed and never unloaded: the one
/// loader of the libraries portal-token does not link (libcurl, libsecret, libqrencode), so a run
/// that needs none of them maps none of them. Lazy binding, as for a program linked to it: the
/// functions used are resolved by name, and RTLD_NOW would bind every function of the library and
/// of its dependencies (OpenSSL, GLib, …) before the first call, most never called.
public struct DynamicLibrary: @unchecked Sendable {
    private let handle: UnsafeMutableRawPointer

    /// A function the library lacks.
    public struct Missing: Error {
        public let name: String
    }

    /// Opens `soname` (its symbols kept out of the global namespace); nil when it is not there.
    public init?(_ soname: String) {
        guard let handle = dlopen(soname, RTLD_LAZY | RTLD_LOCAL) else { return nil }
        self.handle = handle
    }

    private init(handle: UnsafeMutableRawPointer) { self.handle = handle }

    /// The running program and the libraries it was linked with (glibc).
    public static let process: DynamicLibrary? = dlopen(nil, RTLD_LAZY).map { DynamicLibrary(handle: $0) }

    /// The address of `name`, searched in the library and its dependencies.
    public func function(_ name: String) throws(Missing) -> UnsafeMutableRawPointer {
        guard let address = dlsym(handle, name) else { throw Missing(name: name) }
        return address
    }
}
