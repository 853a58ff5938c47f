import Glibc
import PortalTokenCore

/// Byte-exact access to the three standard streams, without Foundation's buffering.
public struct StandardStreams: Sendable {
    public var input: Int32 = 0
    public var output: Int32 = 1
    public var error: Int32 = 2

    public init() {}

    public var inputIsTerminal: Bool { isatty(input) == 1 }
    public var errorIsTerminal: Bool { isatty(error) == 1 }

    /// The most a credential-protocol request may hold, in all. git's own reader has no bound;
    /// this one is sixteen times git's packet-line size (64 KiB), room for any credential a
    /// tool stores (long OAuth refresh tokens, certificates in a password), yet a stream that
    /// never ends is refused instead of read for ever.
    public static let requestLimit = 1 << 20

    /// What `readRequest` makes room for before it reads: more than any request git sends.
    package static let usualRequestBytes = 16 * 1024

    /// Reads the credential-protocol request: up to the first blank line (`\n` or `\r\n`), or EOF.
    /// It stops at the blank line so that a caller who keeps stdin open is not waited on. Past
    /// `requestLimit` bytes it stops reading and fails (exit 2), wiping what it read.
    public func readRequest() throws(CLIError) -> [UInt8] {
        var chunk = [UInt8](repeating: 0, count: 4096)
        defer { zeroize(&chunk) }
        // Room for a usual request up front (one from the heap, not a mapping of the whole bound);
        // a larger one moves once to room for the whole bound, and the first buffer is wiped:
        // letting the array grow by itself would leave unwiped copies behind.
        var buffer: [UInt8] = []
        buffer.reserveCapacity(Self.usualRequestBytes)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            let searchStart = buffer.count
            if buffer.count + count > buffer.capacity {
                var larger: [UInt8] = []
                larger.reserveCapacity(Self.requestLimit + chunk.count)
                larger.append(contentsOf: buffer)
                zeroize(&buffer)
                buffer = larger
            }
            buffer.append(contentsOf: chunk[0..<count])
            if buffer.count > Self.requestLimit {
                zeroize(&buffer)
                throw .usage(
                    "the credential request on stdin is larger than \(Self.requestLimit >> 20) MiB",
                    hint: "a request is a few key=value lines ended by a blank line (gitcredentials(7))")
            }
            if endsBlankLine(buffer, from: searchStart) { break }
        }
        return buffer
    }

    /// Whether a newline at or after `start` ends a blank line: one at the very start, right after
    /// another newline, or after a CR that is all its line holds (`\r\n` alone, which git's
    /// reader, `strbuf_getline`, reads as an empty line).
    private func endsBlankLine(_ bytes: [UInt8], from start: Int) -> Bool {
        let newline = UInt8(ascii: "\n")
        let carriageReturn = UInt8(ascii: "\r")
        for index in start..<bytes.count where bytes[index] == newline {
            var lineStart = index
            if lineStart > 0, bytes[lineStart - 1] == carriageReturn { lineStart -= 1 }
            if lineStart == 0 || bytes[lineStart - 1] == newline { return true }
        }
        return false
    }

    /// All of stdin up to EOF, or the first `limit` bytes and a little more (the caller refuses
    /// an oversized input). The caller wipes it.
    public func readAll(limit: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        defer { zeroize(&chunk) }
        while bytes.count <= limit {
            let count = chunk.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            bytes += chunk[0..<count]
        }
        return bytes
    }

    public func write(_ bytes: [UInt8], to descriptor: Int32) {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let written = Glibc.write(descriptor, raw.baseAddress! + offset, raw.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return
                }
                offset += written
            }
        }
    }

    public func print(_ text: String) { write(Array((text + "\n").utf8), to: output) }
    /// One line of a message for a person: whatever it quotes from Portal, the store or the
    /// environment (an end user ID, a server's error text, a path) reaches the terminal with its
    /// control characters escaped, line breaks included, so that it can neither drive the
    /// terminal nor start a line that git would show as portal-token's own.
    public func printError(_ text: String) {
        write(Array((TerminalText.escaped(text) + "\n").utf8), to: error)
    }

    /// One line from stdin, without its line ending, at most `limit` bytes (the rest of a
    /// longer line is not read). The caller wipes it.
    public func readLine(limit: Int) -> [UInt8] {
        // Sized once: growing would leave unwiped copies of a secret line behind.
        var line: [UInt8] = []
        line.reserveCapacity(limit)
        var byte: UInt8 = 0
        while line.count < limit {
            let count = read(input, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 || byte == UInt8(ascii: "\n") { break }
            line.append(byte)
        }
        byte = 0
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        return line
    }
}
