import Glibc

/// A system call that failed on a path: what was attempted, where, and errno.
public struct SystemCallError: Error, Equatable, CustomStringConvertible {
    public let path: String
    public let number: Int32

    public init(path: String, errno number: Int32) {
        self.path = path
        self.number = number
    }

    /// The C library's words for errno (strerror).
    public var reason: String { String(cString: strerror(number)) }

    public var description: String { "\(path): \(reason)" }
}
