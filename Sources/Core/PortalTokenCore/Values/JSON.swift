import Basics

/// A JSON value (RFC 8259), parsed and written without Foundation so that the paths every
/// script runs stay small and fast. Objects keep the last value of a repeated key.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// The number's text as it appeared, so that integers of any size survive.
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    public var stringValue: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    public var int64Value: Int64? {
        if case .number(let text) = self { return Int64(text) }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let values) = self { return values }
        return nil
    }

    public static func int(_ value: Int64) -> JSONValue { .number(String(value)) }

    // MARK: Reading

    public typealias ParseError = JSONError

    public static func parse(_ bytes: some Collection<UInt8>) throws(ParseError) -> JSONValue {
        var reader = JSONReader(Array(bytes))
        let value = try reader.value()
        try reader.end()
        return value
    }

    public static func parse(_ text: String) throws(ParseError) -> JSONValue {
        try parse(Array(text.utf8))
    }

    // MARK: Writing

    /// Compact JSON with object keys sorted, so equal values always serialise alike.
    public var serialized: String {
        var writer = JSONWriter()
        write(to: &writer)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// Appends this value to what `writer` is writing.
    public func write(to writer: inout JSONWriter) {
        switch self {
        case .null: writer.null()
        case .bool(let value): writer.bool(value)
        case .number(let text): writer.number(text)
        case .string(let text): writer.string(text)
        case .array(let values):
            writer.beginArray()
            for value in values { value.write(to: &writer) }
            writer.endArray()
        case .object(let members):
            writer.beginObject()
            for key in members.keys.sorted() {
                writer.key(key)
                members[key]!.write(to: &writer)
            }
            writer.endObject()
        }
    }
}

/// Why a text is not JSON: the byte offset of the problem only, never the text itself.
public struct JSONError: Error, Equatable, Sendable {
    public var offset: Int

    public init(offset: Int) { self.offset = offset }
}

/// Writes JSON straight into a byte buffer, so a secret value (`string(_: Secret)`) is copied
/// only into `bytes`, which the caller can wipe; Foundation's coders would leave copies nobody
/// can. Strings are escaped so the document is safe to show on a terminal: C0 controls, DEL and
/// the C1 controls (which JSON allows raw, but a terminal would obey) become `\u00XX`.
public struct JSONWriter {
    public var bytes: [UInt8] = []
    /// Whether the next key or value follows another one and needs a comma first.
    private var needsComma = false

    public init() {}

    public mutating func beginObject() { open(UInt8(ascii: "{")) }
    public mutating func endObject() { close(UInt8(ascii: "}")) }
    public mutating func beginArray() { open(UInt8(ascii: "[")) }
    public mutating func endArray() { close(UInt8(ascii: "]")) }

    public mutating func key(_ name: String) {
        separate()
        quoted(name.utf8)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    public mutating func string(_ value: String) { scalar { $0.quoted(value.utf8) } }

    public mutating func string(_ secret: Secret) { scalar { writer in secret.withBytes { writer.quoted($0) } } }

    public mutating func number(_ value: Int64) { number(String(value)) }

    /// A number's text as it is (it came from a parsed document).
    public mutating func number(_ text: String) { scalar { $0.bytes.append(contentsOf: text.utf8) } }

    public mutating func bool(_ value: Bool) { scalar { $0.bytes.append(contentsOf: (value ? "true" : "false").utf8) } }

    public mutating func null() { scalar { $0.bytes.append(contentsOf: "null".utf8) } }

    private mutating func scalar(_ body: (inout JSONWriter) -> Void) {
        separate()
        body(&self)
        needsComma = true
    }

    private mutating func open(_ bracket: UInt8) {
        separate()
        bytes.append(bracket)
        needsComma = false
    }

    private mutating func close(_ bracket: UInt8) {
        bytes.append(bracket)
        needsComma = true
    }

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }

    private mutating func quoted(_ utf8: some Collection<UInt8>) {
        bytes.append(UInt8(ascii: "\""))
        var afterC2 = false
        for byte in utf8 {
            // A C1 control is U+0080–U+009F: 0xC2 then 0x80–0x9F in UTF-8.
            if afterC2 {
                afterC2 = false
                if byte >= 0x80 && byte <= 0x9f {
                    controlEscape(byte)
                    continue
                }
                bytes.append(0xC2)
            }
            switch byte {
            case UInt8(ascii: "\""): escape(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): escape(UInt8(ascii: "\\"))
            case 0x0A: escape(UInt8(ascii: "n"))
            case 0x0D: escape(UInt8(ascii: "r"))
            case 0x09: escape(UInt8(ascii: "t"))
            case 0..<0x20, 0x7f: controlEscape(byte)
            case 0xC2: afterC2 = true
            default: bytes.append(byte)
            }
        }
        if afterC2 { bytes.append(0xC2) }
        bytes.append(UInt8(ascii: "\""))
    }

    private mutating func controlEscape(_ value: UInt8) {
        bytes.append(contentsOf: "\\u00".utf8)
        Hex.appendDigits(of: value, to: &bytes)
    }

    private mutating func escape(_ letter: UInt8) {
        bytes.append(UInt8(ascii: "\\"))
        bytes.append(letter)
    }
}

/// A pull reader of JSON (RFC 8259): the caller says what it expects next, and can skip what it
/// does not know, so a newer writer's extra fields do not stop an older reader. A string can be
/// read as a `Secret`, its intermediate bytes wiped. `value()` reads any value as a `JSONValue`.
/// Nesting is bounded (128 levels), so hostile input cannot exhaust the stack.
public struct JSONReader {
    private let bytes: [UInt8]
    private var index = 0
    private var depth = 0
    static let maximumDepth = 128

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    private func fail() -> JSONError { JSONError(offset: index) }

    private mutating func skipWhitespace() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    private mutating func peek() -> UInt8? {
        skipWhitespace()
        return index < bytes.count ? bytes[index] : nil
    }

    private mutating func expect(_ byte: UInt8) throws(JSONError) {
        guard peek() == byte else { throw fail() }
        index += 1
    }

    private mutating func nested<Result>(_ body: (inout JSONReader) throws(JSONError) -> Result) throws(JSONError)
        -> Result
    {
        guard depth < Self.maximumDepth else { throw fail() }
        depth += 1
        defer { depth -= 1 }
        return try body(&self)
    }

    /// Reads an object, calling `member` with each key; `member` must read or skip the value.
    public mutating func object(_ member: (inout JSONReader, String) throws(JSONError) -> Void) throws(JSONError) {
        try expect(UInt8(ascii: "{"))
        try nested { reader throws(JSONError) in
            if reader.peek() == UInt8(ascii: "}") { reader.index += 1; return }
            while true {
                let name = try reader.string()
                try reader.expect(UInt8(ascii: ":"))
                try member(&reader, name)
                guard let next = reader.peek() else { throw reader.fail() }
                if next == UInt8(ascii: "}") { reader.index += 1; return }
                guard next == UInt8(ascii: ",") else { throw reader.fail() }
                reader.index += 1
            }
        }
    }

    public mutating func array(_ element: (inout JSONReader) throws(JSONError) -> Void) throws(JSONError) {
        try expect(UInt8(ascii: "["))
        try nested { reader throws(JSONError) in
            if reader.peek() == UInt8(ascii: "]") { reader.index += 1; return }
            while true {
                try element(&reader)
                guard let next = reader.peek() else { throw reader.fail() }
                if next == UInt8(ascii: "]") { reader.index += 1; return }
                guard next == UInt8(ascii: ",") else { throw reader.fail() }
                reader.index += 1
            }
        }
    }

    /// True, and the `null` consumed, when the next value is null.
    public mutating func null() -> Bool {
        guard peek() == UInt8(ascii: "n"), bytes[index...].starts(with: "null".utf8) else { return false }
        index += 4
        return true
    }

    public mutating func bool() throws(JSONError) -> Bool {
        _ = peek()
        if bytes[index...].starts(with: "true".utf8) { index += 4; return true }
        if bytes[index...].starts(with: "false".utf8) { index += 5; return false }
        throw fail()
    }

    public mutating func string() throws(JSONError) -> String {
        var raw = try stringBytes()
        guard let text = String(validating: raw, as: UTF8.self) else { zeroize(&raw); throw fail() }
        return text
    }

    /// A string's bytes as a secret; the intermediate buffer is zeroed.
    public mutating func secret() throws(JSONError) -> Secret {
        var raw = try stringBytes()
        defer { zeroize(&raw) }
        return Secret(bytes: raw)
    }

    public mutating func int64() throws(JSONError) -> Int64 {
        _ = peek()
        let start = index
        guard let value = Int64(try number()) else { index = start; throw fail() }
        return value
    }

    /// A number's text, checked against RFC 8259's grammar.
    public mutating func number() throws(JSONError) -> String {
        _ = peek()
        let start = index
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw fail() }
        if bytes[index] == UInt8(ascii: "0") { index += 1 } else { skipDigits() }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail() }
            skipDigits()
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail() }
            skipDigits()
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
    private mutating func skipDigits() { while index < bytes.count, isDigit(bytes[index]) { index += 1 } }

    /// Any value, as a tree. An object keeps the last value of a repeated key.
    public mutating func value() throws(JSONError) -> JSONValue {
        switch peek() {
        case UInt8(ascii: "{"):
            var members: [String: JSONValue] = [:]
            try object { reader, name throws(JSONError) in members[name] = try reader.value() }
            return .object(members)
        case UInt8(ascii: "["):
            var values: [JSONValue] = []
            try array { reader throws(JSONError) in values.append(try reader.value()) }
            return .array(values)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return .bool(try bool())
        case UInt8(ascii: "n"):
            guard null() else { throw fail() }
            return .null
        case nil: throw fail()
        default: return .number(try number())
        }
    }

    /// Skips one value of any kind; a string's bytes are wiped.
    public mutating func skipValue() throws(JSONError) {
        switch peek() {
        case UInt8(ascii: "{"): try object { reader, _ throws(JSONError) in try reader.skipValue() }
        case UInt8(ascii: "["): try array { reader throws(JSONError) in try reader.skipValue() }
        case UInt8(ascii: "\""): var skipped = try stringBytes(); zeroize(&skipped)
        case UInt8(ascii: "t"), UInt8(ascii: "f"): _ = try bool()
        case UInt8(ascii: "n"): if !null() { throw fail() }
        default: _ = try number()
        }
    }

    /// The rest must be whitespace.
    public mutating func end() throws(JSONError) {
        guard peek() == nil else { throw fail() }
    }

    /// A string's bytes, escapes decoded; a raw control character is refused.
    private mutating func stringBytes() throws(JSONError) -> [UInt8] {
        try expect(UInt8(ascii: "\""))
        var result: [UInt8] = []
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return result
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { zeroize(&result); throw fail() }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): result.append(escape)
                case UInt8(ascii: "n"): result.append(0x0A)
                case UInt8(ascii: "r"): result.append(0x0D)
                case UInt8(ascii: "t"): result.append(0x09)
                case UInt8(ascii: "b"): result.append(0x08)
                case UInt8(ascii: "f"): result.append(0x0C)
                case UInt8(ascii: "u"):
                    do throws(JSONError) {
                        try appendEscapedScalar(to: &result)
                    } catch {
                        zeroize(&result)
                        throw error
                    }
                default: zeroize(&result); throw fail()
                }
            default:
                guard byte >= 0x20 else { zeroize(&result); throw fail() }
                result.append(byte)
                index += 1
            }
        }
        zeroize(&result)
        throw fail()
    }

    /// `\uXXXX`, with a following low surrogate when the first is a high one; a lone surrogate
    /// is refused.
    private mutating func appendEscapedScalar(to result: inout [UInt8]) throws(JSONError) {
        var value = try hexQuad()
        if (0xD800...0xDBFF).contains(value) {
            guard bytes[index...].starts(with: "\\u".utf8) else { throw fail() }
            index += 2
            let low = try hexQuad()
            guard (0xDC00...0xDFFF).contains(low) else { throw fail() }
            value = 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00)
        }
        guard let scalar = Unicode.Scalar(value) else { throw fail() }
        result.append(contentsOf: String(Character(scalar)).utf8)
    }

    private mutating func hexQuad() throws(JSONError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail() }
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = Hex.value(of: bytes[index]) else { throw fail() }
            index += 1
            value = value << 4 | UInt32(digit)
        }
        return value
    }
}
