import Glibc

/// The systemd journal, through its native protocol (systemd.journal-fields(7), "Native Journal
/// Protocol"): one datagram of `NAME=value` lines to `/run/systemd/journal/socket`, written
/// directly, so no library is loaded. Used only when a caller asks for it (the audit log's copy,
/// off by default), never on the everyday paths.
public enum Journal {
    public static let socketPath = "/run/systemd/journal/socket"

    /// Sends one entry whose fields are `NAME=value` texts; false when no journal listens or it
    /// refused the entry. A value must hold no newline (none of the callers' does).
    @discardableResult
    public static func send(_ fields: [String], to socketPath: String = socketPath) -> Bool {
        guard fields.allSatisfy({ !$0.utf8.contains(UInt8(ascii: "\n")) }) else { return false }
        let entry = Array(fields.map { $0 + "\n" }.joined().utf8)
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        guard socketPath.utf8.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { path in
            for (index, byte) in socketPath.utf8.enumerated() { path[index] = byte }
        }
        let sent = entry.withUnsafeBytes { bytes in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(
                        descriptor, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL), $0,
                        socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
        }
        return sent == entry.count
    }
}
