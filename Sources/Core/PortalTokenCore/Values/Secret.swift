#if canImport(Glibc)
    import Glibc
#endif

/// A value that must never reach output, logs or error messages by accident.
///
/// Every textual rendering (`description`, `debugDescription`, reflection) prints `<redacted>`.
/// The bytes leave only through `withBytes`/`text`, at the few places that must hand them on:
/// the credential-protocol writer, an HTTP header, a store. The buffer is zeroed when the last
/// copy goes away.
public struct Secret: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private final class Storage: @unchecked Sendable {
        var bytes: [UInt8]
        init(_ bytes: [UInt8]) { self.bytes = bytes }
        deinit {
            bytes.withUnsafeMutableBytes { raw in
                guard let base = raw.baseAddress else { return }
                // explicit_bzero cannot be optimised away, unlike a plain loop before free.
                explicit_bzero(base, raw.count)
            }
        }
    }

    private let storage: Storage

    public init(_ text: String) { storage = Storage(Array(text.utf8)) }
    public init(bytes: [UInt8]) { storage = Storage(bytes) }

    public var isEmpty: Bool { storage.bytes.isEmpty }
    public var byteCount: Int { storage.bytes.count }

    /// The secret as text, for the places that must hand it on.
    public var text: String { String(decoding: storage.bytes, as: UTF8.self) }

    public func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try storage.bytes.withUnsafeBytes(body)
    }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }

    /// Compares in time that depends on the length only, not on where the bytes differ.
    public static func == (lhs: Secret, rhs: Secret) -> Bool {
        let a = lhs.storage.bytes, b = rhs.storage.bytes
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}

/// Overwrites a buffer that held secret bytes before it is released.
public func zeroize(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { raw in
        guard let base = raw.baseAddress else { return }
        explicit_bzero(base, raw.count)
    }
}
