import PortalTokenCore
import Testing

/// The owner of a loopback connection's far end, read from the kernel's socket tables
/// (docs/security.md, "Bearers on loopback"). The tables print addresses as 32-bit words in the
/// machine's byte order; these fixtures are a little-endian machine's, as the suite's are.
@Suite("TCP socket table")
struct TCPSocketTableTests {
    static let header =
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"

    static func line(_ local: String, _ remote: String, state: String, uid: Int) -> String {
        "   0: \(local) \(remote) \(state) 00000000:00000000 00:00000000 00000000 \(uid)        0 1669 1\n"
    }

    let client = TCPSocketTable.Endpoint(address: [127, 0, 0, 1], port: 0xA000)!
    let server = TCPSocketTable.Endpoint(address: [127, 0, 0, 1], port: 0x1F90)!

    @Test("the far end's uid, not the listener that holds the port now")
    func farEnd() {
        let table =
            Self.header
            // Another user's listener on the port, bound after the connection was made…
            + Self.line("0100007F:1F90", "00000000:0000", state: "0A", uid: 65534)
            // …the client's own socket…
            + Self.line("0100007F:A000", "0100007F:1F90", state: "01", uid: 1000)
            // …and the side of it that the first listener accepted.
            + Self.line("0100007F:1F90", "0100007F:A000", state: "01", uid: 1000)
        #expect(TCPSocketTable.farEndOwner(local: client, remote: server, tables: [table]) == 1000)
    }

    @Test("another user's far end, an IPv4-mapped far end in tcp6, and none at all")
    func others() {
        let foreign = Self.header + Self.line("0100007F:1F90", "0100007F:A000", state: "03", uid: 65534)
        #expect(TCPSocketTable.farEndOwner(local: client, remote: server, tables: [foreign]) == 65534)
        // A listener on [::] takes IPv4 connections as ::ffff:127.0.0.1.
        let mapped =
            Self.header
            + Self.line(
                "0000000000000000FFFF00000100007F:1F90", "0000000000000000FFFF00000100007F:A000", state: "01",
                uid: 1000)
        #expect(TCPSocketTable.farEndOwner(local: client, remote: server, tables: ["", mapped]) == 1000)
        let unrelated = Self.header + Self.line("0100007F:1F91", "0100007F:A000", state: "01", uid: 1000)
        #expect(TCPSocketTable.farEndOwner(local: client, remote: server, tables: [unrelated]) == nil)
        #expect(TCPSocketTable.farEndOwner(local: client, remote: server, tables: ["garbage", ""]) == nil)
    }

    @Test("loopback is 127.0.0.0/8 and ::1, nothing else")
    func loopback() {
        #expect(TCPSocketTable.Endpoint(address: [127, 9, 8, 7], port: 1)!.isLoopback)
        #expect(TCPSocketTable.Endpoint(address: Array(repeating: 0, count: 15) + [1], port: 1)!.isLoopback)
        #expect(!TCPSocketTable.Endpoint(address: [10, 0, 0, 1], port: 1)!.isLoopback)
        #expect(!TCPSocketTable.Endpoint(address: Array(repeating: 0, count: 16), port: 1)!.isLoopback)
        #expect(TCPSocketTable.Endpoint(address: [127, 0, 0], port: 1) == nil)
    }
}
