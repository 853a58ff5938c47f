import Basics
import CSodium
import Foundation
import Glibc
import PortalTokenCore

/// Two client API routes for bodies far past the 8 MiB the other routes read, both streamed so
/// the fake never holds one whole: an upload that answers the SHA-256 of what it received, and a
/// chunked download of a body the test can recompute. Both require a live bearer, a fresh trace
/// id and portal-token's User-Agent, as every client API request does; the rules on `Accept`,
/// `Content-Type` and `Content-Length` do not apply to them.
extension FakePortalServer {
    public static let uploadPath = "/api/v3/clients/me/uploads"
    public static let downloadPath = "/api/v3/clients/me/downloads"
    static let largeBodyPaths: Set<String> = [uploadPath, downloadPath]

    /// The byte at `offset` of every download: a sequence no run of zeros or repeat hides.
    public static func downloadByte(at offset: Int) -> UInt8 {
        UInt8(truncatingIfNeeded: (offset &* 2_654_435_761) >> 13 ^ offset)
    }

    /// Writes `count` random bytes (a multiple of 8) to the file at `path`, for an upload, and returns
    /// their lowercase hex SHA-256.
    public static func writeRandomUpload(count: Int, to path: String) throws -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes = [UInt8](repeating: 0, count: count)
        for index in stride(from: 0, to: count, by: 8) {
            withUnsafeBytes(of: generator.next() as UInt64) { word in
                for offset in 0..<8 { bytes[index + offset] = word[offset] }
            }
        }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        var hasher = SHA256Stream()
        hasher.update(bytes[...])
        return hasher.finish()
    }

    /// The lowercase hex SHA-256 of a download of `count` bytes.
    public static func downloadDigest(count: Int) -> String {
        var hasher = SHA256Stream()
        var piece = [UInt8](repeating: 0, count: 65_536)
        var offset = 0
        while offset < count {
            let length = min(piece.count, count - offset)
            for index in 0..<length { piece[index] = downloadByte(at: offset + index) }
            hasher.update(piece[0..<length])
            offset += length
        }
        return hasher.finish()
    }

    func serveLargeBody(_ head: Request, _ rest: [UInt8], _ connection: Int32) {
        state.withLock { $0.requests.append(head) }
        var problems: [String] = []
        if let token = head.bearerToken {
            if state.withLock({ $0.liveTokens[token] }) == nil { problems.append("unauthorized") }
        } else {
            problems.append("Authorization: Bearer is required here")
        }
        if let traceID = head.header("X-Portal-Trace-Id") {
            if !TraceID.isValid(traceID) || state.withLock({ !$0.traceIDs.insert(traceID).inserted }) {
                problems.append("X-Portal-Trace-Id is not a fresh lowercase UUIDv4")
            }
        } else {
            problems.append("X-Portal-Trace-Id is missing")
        }
        if !(head.header("User-Agent") ?? "").hasPrefix("portal-token/") {
            problems.append("User-Agent does not name portal-token")
        }
        if problems == ["unauthorized"] {
            write(.json(401, #"{"error":"Unauthorized"}"#), to: connection)
            return
        }
        if !problems.isEmpty {
            state.withLock { state in
                for problem in problems { state.violations.append(Violation(request: head.description, rule: problem)) }
            }
            write(.json(400, #"{"error":"fake server: \#(problems.joined(separator: "; "))"}"#), to: connection)
            return
        }
        if head.path == Self.uploadPath {
            receiveUpload(head, rest, connection)
        } else {
            sendDownload(head, connection)
        }
    }

    private func receiveUpload(_ head: Request, _ rest: [UInt8], _ connection: Int32) {
        var hasher = SHA256Stream()
        var total = 0
        let chunked = head.header("Transfer-Encoding")?.lowercased() == "chunked"
        var pending = rest
        var chunk = [UInt8](repeating: 0, count: 65_536)
        func more() -> Bool {
            let count = chunk.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return false }
            pending += chunk[0..<count]
            return true
        }
        if chunked {
            var decoder = ChunkedBodyDecoder()
            while !decoder.isDone {
                var body: [UInt8] = []
                do {
                    let consumed = try decoder.decode(pending[...], into: &body)
                    pending.removeFirst(consumed)
                } catch {
                    write(.json(400, #"{"error":"fake server: bad chunked body"}"#), to: connection)
                    return
                }
                hasher.update(body[...])
                total += body.count
                if !decoder.isDone, pending.isEmpty, !more() { return }
            }
        } else {
            let length = Int(head.header("Content-Length") ?? "0") ?? 0
            while total < length {
                if pending.isEmpty, !more() { return }
                let take = min(pending.count, length - total)
                hasher.update(pending[0..<take])
                pending.removeFirst(take)
                total += take
            }
        }
        write(
            .json(200, #"{"bytes":\#(total),"sha256":"\#(hasher.finish())","chunked":\#(chunked)}"#),
            to: connection)
    }

    private func sendDownload(_ head: Request, _ connection: Int32) {
        let count =
            head.query.flatMap { query in
                query.split(separator: "&").first { $0.hasPrefix("bytes=") }.flatMap { Int($0.dropFirst(6)) }
            } ?? 0
        var bytes = Array(
            ("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                + "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n").utf8)
        var offset = 0
        var piece = [UInt8](repeating: 0, count: 65_536)
        while true {
            let length = min(piece.count, count - offset)
            if length > 0 {
                for index in 0..<length { piece[index] = Self.downloadByte(at: offset + index) }
                bytes += Array(String(length, radix: 16).utf8) + [0x0D, 0x0A] + piece[0..<length] + [0x0D, 0x0A]
                offset += length
            } else {
                bytes += Array("0\r\n\r\n".utf8)
            }
            guard sendAll(bytes, connection) else { return }
            bytes = []
            if length == 0 { return }
        }
    }

    private func sendAll(_ bytes: [UInt8], _ connection: Int32) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent < 0, errno == EINTR { continue }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }
}

/// SHA-256 over pieces, with libsodium.
public struct SHA256Stream {
    private var state = crypto_hash_sha256_state()

    public init() { crypto_hash_sha256_init(&state) }

    public mutating func update(_ bytes: ArraySlice<UInt8>) {
        bytes.withUnsafeBufferPointer { _ = crypto_hash_sha256_update(&state, $0.baseAddress, UInt64($0.count)) }
    }

    public mutating func finish() -> String {
        var digest = [UInt8](repeating: 0, count: Int(crypto_hash_sha256_BYTES))
        crypto_hash_sha256_final(&state, &digest)
        return digest.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }
            .joined()
    }
}
