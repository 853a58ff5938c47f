import Basics
import Glibc

/// A connection to a D-Bus message bus over its Unix socket, spoken directly: no libdbus, no
/// sd-bus, no GLib, so asking the bus costs a run no library load (docs/storage.md, "The
/// session bus"). Everything waits against a deadline the caller gives.
///
/// Connecting sends the whole opening at once and waits for nothing: the `EXTERNAL`
/// authentication with an empty identity (the bus takes the socket's credentials, so a client
/// in a user namespace is the uid the bus sees), `BEGIN`, and `Hello`. The calls that follow go
/// out behind them, so the first answer costs one round trip in all, as with sd-bus, which
/// pipelines the same way. Several calls can be sent at once and their replies awaited together.
public final class DBusConnection {
    private let descriptor: Int32
    private var lastSerial: UInt32 = 0
    /// Bytes received and not yet taken as a message.
    private var received: [UInt8] = []
    private var authenticated = false
    /// Messages received while waiting for something else: calls and signals, for `next`.
    private var queued: [DBusMessage] = []
    /// Replies received before they were asked for, by the serial they answer.
    private var replies: [UInt32: DBusMessage] = [:]
    /// Calls whose caller stopped waiting: their replies are dropped (and wiped) when they come.
    private var abandoned: Set<UInt32> = []
    private var helloSerial: UInt32 = 0
    public private(set) var uniqueName: String?

    public enum Failure: Error {
        /// Nothing arrived before the deadline.
        case timedOut
        /// The bus closed the connection, or refused the authentication.
        case disconnected(String)
        /// The bus sent what is no D-Bus message.
        case malformed(String)
    }

    /// The session bus's address as every D-Bus client finds it: `DBUS_SESSION_BUS_ADDRESS`,
    /// else the socket `$XDG_RUNTIME_DIR/bus`; nil when neither says where.
    public static func sessionBusAddress() -> String? {
        if let address = getenv("DBUS_SESSION_BUS_ADDRESS"), address.pointee != 0 { return String(cString: address) }
        guard let runtime = getenv("XDG_RUNTIME_DIR"), runtime.pointee != 0 else { return nil }
        let path = String(cString: runtime) + "/bus"
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return "unix:path=" + path
    }

    /// The Unix socket an address names (its `unix:path=` or `unix:abstract=` entries, tried
    /// in order): a path, or an abstract name with its leading NUL.
    static func socketNames(in address: String) -> [[UInt8]] {
        var names: [[UInt8]] = []
        for entry in address.split(separator: ";") {
            guard entry.hasPrefix("unix:") else { continue }
            for pair in entry.dropFirst(5).split(separator: ",") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard parts.count == 2, let value = unescape(parts[1]) else { continue }
                if parts[0] == "path" { names.append(value) }
                if parts[0] == "abstract" { names.append([0] + value) }
            }
        }
        return names
    }

    /// An address value with its `%XX` escapes decoded; nil when one is malformed.
    private static func unescape(_ value: Substring) -> [UInt8]? {
        var bytes: [UInt8] = []
        var iterator = Array(value.utf8).makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next(), let low = iterator.next(),
                let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
            else { return nil }
            bytes.append(value)
        }
        return bytes
    }

    /// Connects to the bus at `address` and sends the opening; nil when no socket it names
    /// accepts a connection before `deadline` (nanoseconds of `MonotonicClock`).
    public static func connect(address: String, deadline: Int64) -> DBusConnection? {
        for name in socketNames(in: address) {
            guard let descriptor = connectSocket(name, deadline: deadline) else { continue }
            let connection = DBusConnection(descriptor: descriptor)
            guard (try? connection.open(deadline: deadline)) != nil else { continue }
            return connection
        }
        return nil
    }

    private static func connectSocket(_ name: [UInt8], deadline: Int64) -> Int32? {
        var socketAddress = sockaddr_un()
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: socketAddress.sun_path)
        guard !name.isEmpty, name.count < capacity else { return nil }
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { path in
            for (index, byte) in name.enumerated() { path[index] = byte }
        }
        let descriptor = socket(
            AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        // An abstract name's length is exact; a path's includes its terminating NUL.
        let length = socklen_t(MemoryLayout<sa_family_t>.size + name.count + (name[0] == 0 ? 0 : 1))
        while true {
            let connected = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, length) }
            }
            if connected == 0 { return descriptor }
            // A listener whose queue is full refuses at once; its queue may drain before the deadline.
            guard errno == EAGAIN || errno == EINTR, MonotonicClock.nanoseconds() < deadline else { break }
            usleep(1000)
        }
        close(descriptor)
        return nil
    }

    private init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { close(descriptor) }

    /// Sends the authentication, `BEGIN` and `Hello`, without waiting for an answer.
    private func open(deadline: Int64) throws(Failure) {
        var opening = Array("\u{0}AUTH EXTERNAL\r\nDATA\r\nBEGIN\r\n".utf8)
        lastSerial += 1
        helloSerial = lastSerial
        opening +=
            (try? DBusMessage.methodCall(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "Hello"))!.encoded(serial: helloSerial)
        try write(opening, deadline: deadline)
    }

    // MARK: Sending

    /// Sends `message` with the next serial, which it returns.
    @discardableResult
    public func send(_ message: DBusMessage, deadline: Int64) throws(Failure) -> UInt32 {
        lastSerial &+= 1
        if lastSerial == 0 { lastSerial = 1 }
        try write(message.encoded(serial: lastSerial), deadline: deadline)
        return lastSerial
    }

    /// Sends every call at once and returns their replies in the same order: method returns, or
    /// errors as the bus or the callee sent them.
    public func call(_ calls: [DBusMessage], deadline: Int64) throws(Failure) -> [DBusMessage] {
        var serials: [UInt32] = []
        var encoded: [[UInt8]] = []
        for call in calls {
            lastSerial &+= 1
            if lastSerial == 0 { lastSerial = 1 }
            serials.append(lastSerial)
            encoded.append(call.encoded(serial: lastSerial))
        }
        var outgoing: [UInt8] = []
        outgoing.reserveCapacity(encoded.reduce(0) { $0 + $1.count })
        for index in encoded.indices {
            outgoing += encoded[index]
            Self.wipe(&encoded[index])
        }
        // A call may carry a secret (a password to unlock with): no copy outlives its sending.
        defer { Self.wipe(&outgoing) }
        try write(outgoing, deadline: deadline)
        var answered: [DBusMessage] = []
        for (index, serial) in serials.enumerated() {
            do {
                answered.append(try reply(to: serial, deadline: deadline))
            } catch {
                for later in serials[(index + 1)...] { abandon(later) }
                throw error
            }
        }
        return answered
    }

    /// The next call or signal the bus delivers, or nil when none comes before `deadline`.
    public func next(deadline: Int64) throws(Failure) -> DBusMessage? {
        while queued.isEmpty {
            do {
                try receive(deadline: deadline)
            } catch .timedOut {
                return nil
            }
        }
        return queued.removeFirst()
    }

    /// Waits, until `deadline`, for the reply to `serial`.
    public func reply(to serial: UInt32, deadline: Int64) throws(Failure) -> DBusMessage {
        while replies[serial] == nil {
            do {
                try receive(deadline: deadline)
            } catch {
                abandoned.insert(serial)
                throw error
            }
        }
        return replies.removeValue(forKey: serial)!
    }

    private static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } }
    }

    /// Stops waiting for the reply to `serial`: it is dropped when it comes.
    public func abandon(_ serial: UInt32) {
        if let reply = replies.removeValue(forKey: serial) {
            reply.wipeBody()
        } else {
            abandoned.insert(serial)
        }
    }

    private func write(_ bytes: [UInt8], deadline: Int64) throws(Failure) {
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
            }
            if count > 0 {
                sent += count
                continue
            }
            guard count < 0, errno == EAGAIN || errno == EINTR else {
                throw .disconnected("the bus closed the connection (\(String(cString: strerror(errno))))")
            }
            try wait(for: Int16(POLLOUT), deadline: deadline)
        }
    }

    // MARK: Receiving

    /// Reads what has arrived, waiting for it until `deadline`, and files every whole message.
    private func receive(deadline: Int64) throws(Failure) {
        try wait(for: Int16(POLLIN), deadline: deadline)
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        defer { chunk.wipe() }
        if count < 0, errno == EAGAIN || errno == EINTR { return }
        guard count > 0 else { throw .disconnected("the bus closed the connection") }
        received += chunk[0..<count]
        if !authenticated { try readAuthentication() }
        while authenticated, let message = try takeMessage() { file(message) }
    }

    /// The bus's answer to the authentication: `OK GUID` (after a `DATA` challenge, answered
    /// already), or a refusal.
    private func readAuthentication() throws(Failure) {
        while let end = received.firstIndex(of: UInt8(ascii: "\n")) {
            let line = String(decoding: received[..<end], as: UTF8.self).trimmingSuffix("\r")
            received.removeSubrange(...end)
            if line.hasPrefix("OK ") {
                authenticated = true
                return
            }
            guard line == "DATA" || line.hasPrefix("DATA ") else {
                throw .disconnected("the bus refused the authentication (\(line.prefix(80)))")
            }
        }
        guard received.count < 4096 else { throw .malformed("the bus's authentication answer has no end") }
    }

    private func takeMessage() throws(Failure) -> DBusMessage? {
        let length: Int?
        do {
            length = try DBusMessage.length(of: received[...])
        } catch {
            throw .malformed(error.reason)
        }
        guard let length, received.count >= length else { return nil }
        let bytes = Array(received[0..<length])
        received[0..<length].withUnsafeMutableBytes { explicit_bzero($0.baseAddress!, $0.count) }
        received.removeSubrange(0..<length)
        do {
            return try DBusMessage.decode(bytes)
        } catch {
            throw .malformed(error.reason)
        }
    }

    private func file(_ message: DBusMessage) {
        switch message.kind {
        case .methodReturn, .error:
            guard let serial = message.replySerial else { return }
            if serial == helloSerial {
                var reader = message.reader()
                if message.kind == .methodReturn { uniqueName = try? reader.string() }
                return
            }
            if abandoned.remove(serial) != nil {
                message.wipeBody()
                return
            }
            replies[serial] = message
        case .methodCall, .signal:
            queued.append(message)
        }
    }

    private func wait(for events: Int16, deadline: Int64) throws(Failure) {
        while true {
            let left = deadline - MonotonicClock.nanoseconds()
            guard left > 0 else { throw .timedOut }
            var entry = pollfd(fd: descriptor, events: events, revents: 0)
            let ready = poll(&entry, 1, Int32(clamping: (left + 999_999) / 1_000_000))
            if ready > 0 { return }
            if ready < 0, errno != EINTR {
                throw .disconnected("waiting for the bus failed (\(String(cString: strerror(errno))))")
            }
        }
    }
}

extension [UInt8] {
    /// Overwrites the bytes, for a buffer that held a secret.
    mutating func wipe() {
        withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } }
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}
