/// The kernel's TCP socket tables (`/proc/net/tcp` and `/proc/net/tcp6`, proc(5)), read for one
/// question: which uid owns the socket at the far end of a loopback connection this process has
/// just made (docs/security.md, "Bearers on loopback").
///
/// On loopback both ends of a connection are in the tables. The far end is the listener's side:
/// a socket waiting in its queue, half open, or accepted; each carries the uid of the listening
/// socket it came from, so the answer is the owner of the listener the connection reached, not of
/// whatever holds the port by the time the table is read.
public enum TCPSocketTable {
    /// An address (16 bytes, IPv4 as `::ffff:a.b.c.d`) and a port.
    public struct Endpoint: Equatable, Sendable {
        public let address: [UInt8]
        public let port: UInt16

        /// `address` is 4 bytes (IPv4) or 16 (IPv6), in network order; nil for any other length.
        public init?(address: [UInt8], port: UInt16) {
            switch address.count {
            case 4: self.address = Self.ipv4MappedPrefix + address
            case 16: self.address = address
            default: return nil
            }
            self.port = port
        }

        static let ipv4MappedPrefix: [UInt8] = Array(repeating: 0, count: 10) + [0xff, 0xff]

        /// 127.0.0.0/8 (plain or IPv4-mapped) or `::1`.
        public var isLoopback: Bool {
            if address.starts(with: Self.ipv4MappedPrefix) { return address[12] == 127 }
            return address == Array(repeating: 0, count: 15) + [1]
        }
    }

    /// The uid of the socket whose local end is `remote` and whose remote end is `local`, from the
    /// text of the tables (IPv4 and IPv6 alike); nil when no line names that pair.
    public static func farEndOwner(local: Endpoint, remote: Endpoint, tables: [String]) -> UInt32? {
        for table in tables {
            for line in table.split(separator: "\n").dropFirst() {
                // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid ...
                let fields = line.split(separator: " ")
                guard fields.count >= 8, let ownEnd = endpoint(fields[1]), let otherEnd = endpoint(fields[2]),
                    ownEnd == remote, otherEnd == local
                else { continue }
                return UInt32(fields[7])
            }
        }
        return nil
    }

    /// `HEX:PORT` as the tables print it: the address as 32-bit words in the machine's byte
    /// order (one word for IPv4, four for IPv6), the port in hex.
    static func endpoint(_ field: Substring) -> Endpoint? {
        let parts = field.split(separator: ":")
        guard parts.count == 2, let port = UInt16(parts[1], radix: 16),
            parts[0].utf8.count == 8 || parts[0].utf8.count == 32
        else { return nil }
        var bytes: [UInt8] = []
        var start = parts[0].startIndex
        while start != parts[0].endIndex {
            let end = parts[0].index(start, offsetBy: 8)
            guard let word = UInt32(parts[0][start..<end], radix: 16) else { return nil }
            withUnsafeBytes(of: word) { bytes += $0 }
            start = end
        }
        return Endpoint(address: bytes, port: port)
    }
}
