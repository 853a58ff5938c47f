import Glibc

/// D-Bus messages as the wire carries them (D-Bus Specification, "Message Protocol"): what
/// portal-token's own connection to the bus sends and reads. Messages are written little-endian
/// and read in either byte order; a body is read by its signature, strictly (every length and
/// offset within the message, booleans 0 or 1, strings NUL-terminated with no NUL inside).
public struct DBusMessage {
    public enum Kind: UInt8 {
        case methodCall = 1
        case methodReturn = 2
        case error = 3
        case signal = 4
    }

    /// The header flag a call carries when it wants no reply.
    public static let noReplyExpected: UInt8 = 0x1
    /// The header flag of a call that must not start the service it is sent to.
    public static let noAutoStart: UInt8 = 0x2
    /// The longest message the specification allows (2^27 bytes).
    static let maximumLength = 1 << 27

    public var kind: Kind
    public var flags: UInt8 = 0
    public var serial: UInt32 = 0
    public var path: String?
    public var interface: String?
    public var member: String?
    public var errorName: String?
    public var replySerial: UInt32?
    public var destination: String?
    public var sender: String?
    /// The body's signature ("" for none).
    public var signature = ""
    public var body: [UInt8] = []
    /// The byte order the body was written in.
    var bigEndian = false

    public init(kind: Kind) { self.kind = kind }

    /// A method call; `arguments` writes the body, whose signature is `signature`.
    public static func methodCall(
        destination: String, path: String, interface: String, member: String, signature: String = "",
        arguments: (inout DBusWriter) -> Void = { _ in }
    ) throws(DBusWireError) -> DBusMessage {
        var message = DBusMessage(kind: .methodCall)
        message.destination = destination
        message.path = path
        message.interface = interface
        message.member = member
        try message.setBody(signature: signature, arguments)
        return message
    }

    /// The reply to `call`: a method return, or an error named `errorName` with one string.
    public static func reply(to call: DBusMessage, errorName: String? = nil, text: String = "")
        throws(DBusWireError) -> DBusMessage
    {
        var message = DBusMessage(kind: errorName == nil ? .methodReturn : .error)
        message.flags = noReplyExpected
        message.replySerial = call.serial
        message.destination = call.sender
        message.errorName = errorName
        if errorName != nil { try message.setBody(signature: "s") { $0.string(text) } }
        return message
    }

    public mutating func setBody(signature: String, _ write: (inout DBusWriter) -> Void) throws(DBusWireError) {
        var writer = DBusWriter()
        write(&writer)
        if let invalid = writer.invalid { throw DBusWireError(invalid) }
        self.signature = signature
        body = writer.bytes
    }

    /// A reader of the body, from its start.
    public func reader() -> DBusReader { DBusReader(body, bigEndian: bigEndian) }

    /// Whether this is a call of `member` on `interface`.
    public func isMethodCall(_ interface: String, _ member: String) -> Bool {
        kind == .methodCall && self.interface == interface && self.member == member
    }

    /// Overwrites the body's bytes where they are held, in every copy of this message (copies
    /// share them), for a message that carried a secret once it has been read.
    public func wipeBody() {
        body.withUnsafeBytes { bytes in
            if let base = bytes.baseAddress { explicit_bzero(UnsafeMutableRawPointer(mutating: base), bytes.count) }
        }
    }

    // MARK: The wire

    private enum Field: UInt8 {
        case path = 1, interface, member, errorName, replySerial, destination, sender, signature
    }

    /// The message's bytes, numbered `serial`.
    func encoded(serial: UInt32) -> [UInt8] {
        var writer = DBusWriter()
        writer.byte(UInt8(ascii: "l"))
        writer.byte(kind.rawValue)
        writer.byte(flags)
        writer.byte(1)
        writer.uint32(UInt32(body.count))
        writer.uint32(serial)
        writer.array(alignment: 8) { fields in
            func text(_ field: Field, _ type: String, _ value: String?) {
                guard let value else { return }
                fields.structure { entry in
                    entry.byte(field.rawValue)
                    entry.signature(type)
                    entry.string(value)
                }
            }
            text(.path, "o", path)
            text(.interface, "s", interface)
            text(.member, "s", member)
            text(.errorName, "s", errorName)
            if let replySerial {
                fields.structure { field in
                    field.byte(Field.replySerial.rawValue)
                    field.signature("u")
                    field.uint32(replySerial)
                }
            }
            text(.destination, "s", destination)
            text(.sender, "s", sender)
            if !signature.isEmpty {
                fields.structure { field in
                    field.byte(Field.signature.rawValue)
                    field.signature("g")
                    field.signature(signature)
                }
            }
        }
        writer.pad(to: 8)
        return writer.bytes + body
    }

    /// The length of the message that starts `bytes`, once its fixed header has come (16 bytes);
    /// nil before. Throws for what is no D-Bus message, or one longer than the specification allows.
    static func length(of bytes: ArraySlice<UInt8>) throws(DBusWireError) -> Int? {
        guard bytes.count >= 16 else { return nil }
        let start = bytes.startIndex
        let order = bytes[start]
        guard order == UInt8(ascii: "l") || order == UInt8(ascii: "B") else {
            throw DBusWireError("the bus sent a message in no byte order")
        }
        guard bytes[start + 3] == 1 else {
            throw DBusWireError("the bus sent a message of protocol version \(bytes[start + 3])")
        }
        let bigEndian = order == UInt8(ascii: "B")
        func uint32(at offset: Int) -> Int {
            let value = bytes[(start + offset)..<(start + offset + 4)].reduce(UInt32(0)) { ($0 << 8) | UInt32($1) }
            return Int(bigEndian ? value : value.byteSwapped)
        }
        let bodyLength = uint32(at: 4)
        let fieldsLength = uint32(at: 12)
        let headerLength = (16 + fieldsLength + 7) & ~7
        let total = headerLength + bodyLength
        guard bodyLength <= maximumLength, fieldsLength <= maximumLength, total <= maximumLength else {
            throw DBusWireError("the bus sent a message longer than D-Bus allows")
        }
        return total
    }

    /// Decodes one whole message (`length(of:)` bytes).
    static func decode(_ bytes: [UInt8]) throws(DBusWireError) -> DBusMessage {
        let bigEndian = bytes[0] == UInt8(ascii: "B")
        guard let kind = Kind(rawValue: bytes[1]) else {
            throw DBusWireError("the bus sent a message of unknown type \(bytes[1])")
        }
        var header = DBusReader(bytes, bigEndian: bigEndian)
        try header.skip(count: 4)
        let bodyLength = Int(try header.uint32())
        var message = DBusMessage(kind: kind)
        message.flags = bytes[2]
        message.bigEndian = bigEndian
        message.serial = try header.uint32()
        try header.array(alignment: 8) { (field: inout DBusReader) throws(DBusWireError) in
            let code = try field.byte()
            let type = try field.signature()
            switch (Field(rawValue: code), type) {
            case (.path, "o"): message.path = try field.string()
            case (.interface, "s"): message.interface = try field.string()
            case (.member, "s"): message.member = try field.string()
            case (.errorName, "s"): message.errorName = try field.string()
            case (.replySerial, "u"): message.replySerial = try field.uint32()
            case (.destination, "s"): message.destination = try field.string()
            case (.sender, "s"): message.sender = try field.string()
            case (.signature, "g"): message.signature = try field.signature()
            case (nil, _): try field.skip(type)
            default: throw DBusWireError("the bus sent header field \(code) of type \(type)")
            }
        }
        try header.align(8)
        guard header.offset + bodyLength == bytes.count else {
            throw DBusWireError("the bus sent a message whose length does not add up")
        }
        message.body = Array(bytes[header.offset...])
        return message
    }
}

/// Why a message could not be written or read.
public struct DBusWireError: Error {
    public let reason: String
    init(_ reason: String) { self.reason = reason }
}

/// Writes D-Bus values, little-endian, each aligned as the specification says. Offsets count
/// from the body's start, which the header pads to a multiple of 8.
public struct DBusWriter {
    public private(set) var bytes: [UInt8] = []
    /// Why what was written cannot be sent (a string holding a NUL), if it cannot.
    private(set) var invalid: String?

    public init() {}

    mutating func pad(to alignment: Int) {
        while bytes.count % alignment != 0 { bytes.append(0) }
    }

    public mutating func byte(_ value: UInt8) { bytes.append(value) }

    public mutating func bool(_ value: Bool) { uint32(value ? 1 : 0) }

    public mutating func uint32(_ value: UInt32) {
        pad(to: 4)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    public mutating func uint64(_ value: UInt64) {
        pad(to: 8)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    /// A string or an object path.
    public mutating func string(_ value: String) {
        let utf8 = Array(value.utf8)
        if utf8.contains(0) { invalid = "a string holds a NUL byte, which D-Bus cannot carry" }
        uint32(UInt32(utf8.count))
        bytes.append(contentsOf: utf8)
        bytes.append(0)
    }

    public mutating func signature(_ value: String) {
        let utf8 = Array(value.utf8)
        bytes.append(UInt8(truncatingIfNeeded: utf8.count))
        bytes.append(contentsOf: utf8)
        bytes.append(0)
    }

    /// An array whose elements align to `alignment`, written by `elements`.
    public mutating func array(alignment: Int, _ elements: (inout DBusWriter) -> Void) {
        uint32(0)
        let lengthOffset = bytes.count - 4
        pad(to: alignment)
        let start = bytes.count
        elements(&self)
        let length = UInt32(bytes.count - start).littleEndian
        withUnsafeBytes(of: length) { bytes.replaceSubrange(lengthOffset..<(lengthOffset + 4), with: $0) }
    }

    /// A struct or a dictionary entry.
    public mutating func structure(_ members: (inout DBusWriter) -> Void) {
        pad(to: 8)
        members(&self)
    }

    public mutating func variant(_ signature: String, _ value: (inout DBusWriter) -> Void) {
        self.signature(signature)
        value(&self)
    }
}

/// Reads D-Bus values from a message body (or header) in the byte order it was written in;
/// anything out of bounds or malformed throws.
public struct DBusReader {
    private let bytes: [UInt8]
    private let bigEndian: Bool
    private(set) var offset = 0
    /// Where the innermost array being read ends.
    private var limit: Int

    init(_ bytes: [UInt8], bigEndian: Bool) {
        self.bytes = bytes
        self.bigEndian = bigEndian
        limit = bytes.count
    }

    public var isAtEnd: Bool { offset >= limit }

    mutating func align(_ alignment: Int) throws(DBusWireError) {
        let aligned = (offset + alignment - 1) / alignment * alignment
        guard aligned <= limit else { throw DBusWireError("a value runs past the end of the message") }
        offset = aligned
    }

    mutating func skip(count: Int) throws(DBusWireError) {
        guard count >= 0, offset + count <= limit else {
            throw DBusWireError("a value runs past the end of the message")
        }
        offset += count
    }

    private mutating func fixed(_ size: Int) throws(DBusWireError) -> UInt64 {
        try align(size)
        let start = offset
        try skip(count: size)
        let value = bytes[start..<(start + size)].reversed().reduce(UInt64(0)) { ($0 << 8) | UInt64($1) }
        guard bigEndian else { return value }
        return value.byteSwapped >> UInt64(64 - 8 * size)
    }

    public mutating func byte() throws(DBusWireError) -> UInt8 {
        try skip(count: 1)
        return bytes[offset - 1]
    }

    public mutating func uint32() throws(DBusWireError) -> UInt32 { UInt32(truncatingIfNeeded: try fixed(4)) }

    public mutating func uint64() throws(DBusWireError) -> UInt64 { try fixed(8) }

    public mutating func bool() throws(DBusWireError) -> Bool {
        let value = try uint32()
        guard value <= 1 else { throw DBusWireError("a boolean is \(value)") }
        return value == 1
    }

    /// A string's or object path's bytes, without its NUL.
    public mutating func stringBytes() throws(DBusWireError) -> ArraySlice<UInt8> {
        let length = Int(try uint32())
        let start = offset
        try skip(count: length + 1)
        guard bytes[start + length] == 0, !bytes[start..<(start + length)].contains(0) else {
            throw DBusWireError("a string is not NUL-terminated")
        }
        return bytes[start..<(start + length)]
    }

    /// A string or an object path.
    public mutating func string() throws(DBusWireError) -> String {
        String(decoding: try stringBytes(), as: UTF8.self)
    }

    public mutating func signature() throws(DBusWireError) -> String {
        let length = Int(try byte())
        let start = offset
        try skip(count: length + 1)
        guard bytes[start + length] == 0 else { throw DBusWireError("a signature is not NUL-terminated") }
        return String(decoding: bytes[start..<(start + length)], as: UTF8.self)
    }

    /// An array's bytes (`ay`), copied.
    public mutating func byteArray() throws(DBusWireError) -> [UInt8] {
        let length = Int(try uint32())
        let start = offset
        try skip(count: length)
        return Array(bytes[start..<(start + length)])
    }

    /// An array whose elements align to `alignment`: `element` is called once per element and
    /// reads exactly one.
    public mutating func array(
        alignment: Int, _ element: (inout DBusReader) throws(DBusWireError) -> Void
    ) throws(DBusWireError) {
        let length = Int(try uint32())
        guard length <= 1 << 26 else { throw DBusWireError("an array is longer than D-Bus allows") }
        try align(alignment)
        let end = offset + length
        guard end <= limit else { throw DBusWireError("an array runs past the end of the message") }
        let outer = limit
        limit = end
        defer { limit = outer }
        while offset < end {
            try align(alignment)
            try element(&self)
        }
        guard offset == end else { throw DBusWireError("an array's elements do not fill it") }
    }

    /// A struct or a dictionary entry starts here.
    public mutating func structure() throws(DBusWireError) { try align(8) }

    /// Reads a variant's signature and checks it is `expected`; the value follows.
    public mutating func variant(_ expected: String) throws(DBusWireError) {
        let type = try signature()
        guard type == expected else { throw DBusWireError("a variant holds \(type), not \(expected)") }
    }

    /// Skips the values of `signature` (one or more complete types).
    public mutating func skip(_ signature: String) throws(DBusWireError) {
        let types = Array(signature.utf8)
        var index = 0
        while index < types.count { try skipType(types, &index, depth: 0) }
    }

    private mutating func skipType(_ types: [UInt8], _ index: inout Int, depth: Int) throws(DBusWireError) {
        guard depth < 64, index < types.count else { throw DBusWireError("a signature is malformed") }
        let code = types[index]
        index += 1
        switch code {
        case UInt8(ascii: "y"): try skip(count: 1)
        case UInt8(ascii: "n"), UInt8(ascii: "q"): _ = try fixed(2)
        case UInt8(ascii: "b"), UInt8(ascii: "i"), UInt8(ascii: "u"), UInt8(ascii: "h"): _ = try fixed(4)
        case UInt8(ascii: "x"), UInt8(ascii: "t"), UInt8(ascii: "d"): _ = try fixed(8)
        case UInt8(ascii: "s"), UInt8(ascii: "o"): _ = try stringBytes()
        case UInt8(ascii: "g"): _ = try signature()
        case UInt8(ascii: "v"):
            let inner = Array(try signature().utf8)
            var innerIndex = 0
            try skipType(inner, &innerIndex, depth: depth + 1)
            guard innerIndex == inner.count else { throw DBusWireError("a variant holds more than one type") }
        case UInt8(ascii: "a"):
            let elementStart = index
            try Self.skipSignature(types, &index, depth: depth + 1)
            let length = Int(try uint32())
            try align(Self.alignment(of: types[elementStart]))
            try skip(count: length)
        case UInt8(ascii: "("), UInt8(ascii: "{"):
            let close = code == UInt8(ascii: "(") ? UInt8(ascii: ")") : UInt8(ascii: "}")
            try align(8)
            while index < types.count, types[index] != close { try skipType(types, &index, depth: depth + 1) }
            guard index < types.count else { throw DBusWireError("a signature is malformed") }
            index += 1
        default: throw DBusWireError("a signature holds the unknown type \(Character(Unicode.Scalar(code)))")
        }
    }

    /// Moves past one complete type in a signature, reading no value.
    private static func skipSignature(_ types: [UInt8], _ index: inout Int, depth: Int) throws(DBusWireError) {
        guard depth < 64, index < types.count else { throw DBusWireError("a signature is malformed") }
        let code = types[index]
        index += 1
        if code == UInt8(ascii: "a") { return try skipSignature(types, &index, depth: depth + 1) }
        guard code == UInt8(ascii: "(") || code == UInt8(ascii: "{") else { return }
        let close = code == UInt8(ascii: "(") ? UInt8(ascii: ")") : UInt8(ascii: "}")
        while index < types.count, types[index] != close { try skipSignature(types, &index, depth: depth + 1) }
        guard index < types.count else { throw DBusWireError("a signature is malformed") }
        index += 1
    }

    private static func alignment(of code: UInt8) -> Int {
        switch code {
        case UInt8(ascii: "y"), UInt8(ascii: "g"), UInt8(ascii: "v"): return 1
        case UInt8(ascii: "n"), UInt8(ascii: "q"): return 2
        case UInt8(ascii: "x"), UInt8(ascii: "t"), UInt8(ascii: "d"), UInt8(ascii: "("), UInt8(ascii: "{"): return 8
        default: return 4
        }
    }
}
