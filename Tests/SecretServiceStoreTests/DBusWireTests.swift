import Basics
import Foundation
import Glibc
import PortalTokenTestSupport
import Testing

@testable import SessionBus

/// portal-token's own D-Bus: the wire format against the specification's layout, hostile and
/// damaged input, and real conversations with the bus daemon this suite runs on.
@Suite("D-Bus wire format and connection")
struct DBusWireTests {
    @Test("a call round-trips through the wire format: header fields and a body of every kind read back")
    func roundTrip() throws {
        var call = try DBusMessage.methodCall(
            destination: "org.example.Peer", path: "/org/example/object", interface: "org.example.Interface",
            member: "Method", signature: "ybuta{ss}(so)vay"
        ) { body in
            body.byte(7)
            body.bool(true)
            body.uint32(0xDEAD_BEEF)
            body.uint64(0x0102_0304_0506_0708)
            body.array(alignment: 8) { pairs in
                for (key, value) in [("one", "1"), ("two", "22")] {
                    pairs.structure {
                        $0.string(key)
                        $0.string(value)
                    }
                }
            }
            body.structure {
                $0.string("inside")
                $0.string("/a/path")
            }
            body.variant("s") { $0.string("varied") }
            body.array(alignment: 1) { for byte in [UInt8]([0, 1, 255]) { $0.byte(byte) } }
        }
        call.flags = DBusMessage.noReplyExpected
        let bytes = call.encoded(serial: 42)
        #expect(try DBusMessage.length(of: bytes[...]) == bytes.count)
        #expect(try DBusMessage.length(of: bytes[0..<15]) == nil)
        let decoded = try DBusMessage.decode(bytes)
        #expect(decoded.kind == .methodCall && decoded.serial == 42 && decoded.flags == DBusMessage.noReplyExpected)
        #expect(decoded.destination == "org.example.Peer" && decoded.path == "/org/example/object")
        #expect(decoded.interface == "org.example.Interface" && decoded.member == "Method")
        #expect(decoded.signature == "ybuta{ss}(so)vay")
        var reader = decoded.reader()
        #expect(try reader.byte() == 7)
        #expect(try reader.bool())
        #expect(try reader.uint32() == 0xDEAD_BEEF)
        #expect(try reader.uint64() == 0x0102_0304_0506_0708)
        var pairs: [String] = []
        try reader.array(alignment: 8) { pair throws(DBusWireError) in
            pairs.append(try pair.string() + "=" + pair.string())
        }
        #expect(pairs == ["one=1", "two=22"])
        try reader.structure()
        #expect(try reader.string() == "inside")
        #expect(try reader.string() == "/a/path")
        try reader.variant("s")
        #expect(try reader.string() == "varied")
        #expect(try reader.byteArray() == [0, 1, 255])
        #expect(reader.isAtEnd)

        // Skipping by signature lands on the same place as reading.
        var skipper = decoded.reader()
        try skipper.skip("ybuta{ss}(so)v")
        #expect(try skipper.byteArray() == [0, 1, 255])
    }

    /// The specification's layout, byte for byte: a method return, big-endian, as another
    /// implementation may send it.
    @Test("a big-endian message from another implementation reads correctly")
    func bigEndian() throws {
        var bytes: [UInt8] = [UInt8(ascii: "B"), 2, 1, 1, 0, 0, 0, 12, 0, 0, 0, 9]
        var fields: [UInt8] = [5, 1, UInt8(ascii: "u"), 0, 0, 0, 0, 3]  // REPLY_SERIAL = 3
        fields += [8, 1, UInt8(ascii: "g"), 0, 2, UInt8(ascii: "u"), UInt8(ascii: "s"), 0]  // SIGNATURE = "us"
        bytes += [0, 0, 0, UInt8(fields.count)] + fields
        bytes += [0, 0, 1, 2] + [0, 0, 0, 3] + Array("abc".utf8) + [0]  // 258, "abc"
        let message = try DBusMessage.decode(bytes)
        #expect(message.kind == .methodReturn && message.replySerial == 3 && message.serial == 9)
        var reader = message.reader()
        #expect(try reader.uint32() == 258)
        #expect(try reader.string() == "abc")
    }

    @Test(
        "damaged and hostile messages are refused with a reason, never read out of bounds",
        arguments: [
            ("an array longer than its message", "au", [0xff, 0xff, 0, 0] as [UInt8]),
            ("a string without its NUL", "s", [3, 0, 0, 0, 0x61, 0x62, 0x63, 0x64]),
            ("a string with a NUL inside", "s", [3, 0, 0, 0, 0x61, 0, 0x63, 0]),
            ("a boolean of 2", "b", [2, 0, 0, 0]),
            ("a variant of another type", "v", [1, UInt8(ascii: "u"), 0, 0, 1, 0, 0, 0]),
            ("a value cut short", "t", [1, 2, 3]),
            ("a signature of an unknown type", "v", [1, UInt8(ascii: "z"), 0]),
        ])
    func damaged(_ what: String, signature: String, body: [UInt8]) throws {
        var message = DBusMessage(kind: .methodReturn)
        message.signature = signature
        message.body = body
        var reader = message.reader()
        #expect(throws: DBusWireError.self, "\(what)") {
            switch signature {
            case "au": try reader.array(alignment: 4) { element throws(DBusWireError) in _ = try element.uint32() }
            case "s": _ = try reader.string()
            case "b": _ = try reader.bool()
            case "v" where what.contains("unknown"): try reader.skip("v")
            case "v": try reader.variant("s")
            default: _ = try reader.uint64()
            }
        }
    }

    @Test("a header claiming more than D-Bus allows, or another byte order or version, is refused")
    func hostileHeaders() throws {
        let call = try DBusMessage.methodCall(destination: "a.b", path: "/", interface: "a.b", member: "C")
        var huge = call.encoded(serial: 1)
        huge.replaceSubrange(4..<8, with: [0, 0, 0, 0x10])  // a body of 256 MiB
        #expect(throws: DBusWireError.self) { try DBusMessage.length(of: huge[...]) }
        var order = call.encoded(serial: 1)
        order[0] = UInt8(ascii: "x")
        #expect(throws: DBusWireError.self) { try DBusMessage.length(of: order[...]) }
        var version = call.encoded(serial: 1)
        version[3] = 2
        #expect(throws: DBusWireError.self) { try DBusMessage.length(of: version[...]) }
        #expect(throws: DBusWireError.self) {
            try DBusMessage.methodCall(destination: "a.b", path: "/", interface: "a.b", member: "C", signature: "s") {
                $0.string("nul\u{0}inside")
            }
        }
    }

    @Test("addresses: unix paths and abstract names, escapes decoded, other transports passed over")
    func addresses() {
        #expect(DBusConnection.socketNames(in: "unix:path=/run/user/1000/bus") == [Array("/run/user/1000/bus".utf8)])
        #expect(
            DBusConnection.socketNames(in: "tcp:host=localhost,port=1;unix:abstract=/tmp/dbus-x,guid=00ff")
                == [[0] + Array("/tmp/dbus-x".utf8)])
        #expect(DBusConnection.socketNames(in: "unix:path=/tmp/a%20b%2cc") == [Array("/tmp/a b,c".utf8)])
        #expect(DBusConnection.socketNames(in: "unix:path=/tmp/bad%2").isEmpty)
        #expect(DBusConnection.socketNames(in: "launchd:env=X").isEmpty)
    }

    @Test("against the real bus daemon: GetId says what dbus-send says, and calls in flight together answer in order")
    func realBus() throws {
        let address = try #require(DBusConnection.sessionBusAddress(), "the suite runs on a session bus")
        let bus = try #require(DBusConnection.connect(address: address, deadline: Self.deadline(seconds: 5)))
        let getID = try DBusMessage.methodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "GetId")
        let unknown = try DBusMessage.methodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "NoSuchMethod")
        let hasOwner = try DBusMessage.methodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "NameHasOwner", signature: "s"
        ) { $0.string("org.freedesktop.secrets") }
        let replies = try bus.call([getID, unknown, hasOwner], deadline: Self.deadline(seconds: 5))
        #expect(replies.map(\.kind) == [.methodReturn, .error, .methodReturn])
        #expect(replies[1].errorName == "org.freedesktop.DBus.Error.UnknownMethod")
        var idReader = replies[0].reader()
        let id = try idReader.string()
        var ownerReader = replies[2].reader()
        #expect(try ownerReader.bool())
        let reference = try ProcessRunner.run(
            "/usr/bin/dbus-send",
            [
                "--session", "--print-reply=literal", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                "org.freedesktop.DBus.GetId",
            ], timeout: 10)
        #expect(reference.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == id)
        #expect(bus.uniqueName?.hasPrefix(":") == true)
    }

    @Test("a bus that never answers costs the deadline and no more; one that refuses or sends garbage is an error")
    func hostileBus() throws {
        for (name, answer) in [
            ("silent", nil), ("refusing", "REJECTED EXTERNAL\r\n"), ("garbage", "OK 1234\r\nxxxxxxxxxxxxxxxxxxxx"),
        ] {
            var template = Array("/tmp/portal-token-dbus.XXXXXX".utf8CString)
            let folder = String(cString: try #require(mkdtemp(&template)))
            let path = folder + "/bus"
            let listener = try Self.listen(at: path)
            defer {
                close(listener)
                unlink(path)
                rmdir(folder)
            }
            let server = Thread {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }
                var buffer = [UInt8](repeating: 0, count: 4096)
                _ = recv(client, &buffer, buffer.count, 0)
                if let answer { _ = answer.withCString { send(client, $0, strlen($0), Int32(MSG_NOSIGNAL)) } }
                // Held open until the client closes it (a sleep here ends early on any signal
                // the test process gets, and the silent bus would then seem to hang up).
                while recv(client, &buffer, buffer.count, 0) > 0 {}
                close(client)
            }
            server.start()
            guard let bus = DBusConnection.connect(address: "unix:path=" + path, deadline: Self.deadline(seconds: 2))
            else {
                Issue.record("no connection to the \(name) bus")
                continue
            }
            let call = try DBusMessage.methodCall(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "GetId")
            let started = MonotonicClock.milliseconds()
            do throws(DBusConnection.Failure) {
                _ = try bus.call([call], deadline: MonotonicClock.nanoseconds() + 400_000_000)
                Issue.record("the \(name) bus answered")
            } catch {
                switch (name, error) {
                case ("silent", .timedOut), ("refusing", .disconnected), ("garbage", .malformed): break
                default: Issue.record("the \(name) bus gave \(error)")
                }
            }
            let elapsed = MonotonicClock.milliseconds() - started
            #expect(elapsed < 1000, "\(name): \(elapsed) ms")
            if name == "silent" { #expect(elapsed >= 390, "the silent bus was given up on early: \(elapsed) ms") }
        }
    }

    @Test("the journal's copy is one datagram of NAME=value lines; a value with a newline is refused")
    func journalDatagram() throws {
        var template = Array("/tmp/portal-token-journal.XXXXXX".utf8CString)
        let folder = String(cString: try #require(mkdtemp(&template)))
        let path = folder + "/socket"
        defer {
            unlink(path)
            rmdir(folder)
        }
        let listener = try Self.bound(Int32(SOCK_DGRAM.rawValue), at: path)
        defer { close(listener) }
        #expect(
            Journal.send(["MESSAGE={\"event\":\"get\"}", "SYSLOG_IDENTIFIER=portal-token", "PRIORITY=6"], to: path))
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(listener, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        #expect(
            String(decoding: buffer[0..<max(count, 0)], as: UTF8.self)
                == "MESSAGE={\"event\":\"get\"}\nSYSLOG_IDENTIFIER=portal-token\nPRIORITY=6\n")
        #expect(!Journal.send(["MESSAGE=two\nlines"], to: path))
        #expect(recv(listener, &buffer, buffer.count, Int32(MSG_DONTWAIT)) < 0, "a refused entry was sent")
        #expect(!Journal.send(["MESSAGE=nobody listens"], to: folder + "/absent"))
    }

    static func deadline(seconds: Int64) -> Int64 { MonotonicClock.nanoseconds() + seconds * 1_000_000_000 }

    static func listen(at path: String) throws -> Int32 {
        let descriptor = try bound(Int32(SOCK_STREAM.rawValue), at: path)
        guard Glibc.listen(descriptor, 4) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        return descriptor
    }

    /// A Unix socket of `type` bound at `path`.
    static func bound(_ type: Int32, at path: String) throws -> Int32 {
        let descriptor = socket(AF_UNIX, type | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { sunPath in
            for (index, byte) in path.utf8.enumerated() { sunPath[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0 else {
            close(descriptor)
            throw POSIXError(.init(rawValue: errno) ?? .EIO)
        }
        return descriptor
    }
}
