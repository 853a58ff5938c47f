import Basics
import PortalTokenCore

/// The small part of JSON (RFC 8259) the store's plaintext needs, read and written straight
/// from and into byte buffers the store zeroes afterwards. Foundation's coders would leave
/// copies of every password in buffers nobody can wipe, and cost start-up time.
struct JSONWriter {
    var bytes: [UInt8] = []
    /// Whether the next key or value follows another one and needs a comma first.
    private var needsComma = false

    mutating func beginObject() { open(UInt8(ascii: "{")) }
    mutating func endObject() { close(UInt8(ascii: "}")) }
    mutating func beginArray() { open(UInt8(ascii: "[")) }
    mutating func endArray() { close(UInt8(ascii: "]")) }

    mutating func key(_ name: String) {
        separate()
        quoted(name.utf8)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    mutating func string(_ value: String) {
        separate()
        quoted(value.utf8)
        needsComma = true
    }

    mutating func string(_ secret: Secret) {
        separate()
        secret.withBytes { quoted($0) }
        needsComma = true
    }

    mutating func number(_ value: Int64) {
        separate()
        bytes.append(contentsOf: String(value).utf8)
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

    private mutating func quoted(_ utf8: some Sequence<UInt8>) {
        bytes.append(UInt8(ascii: "\""))
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "\""): escape(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): escape(UInt8(ascii: "\\"))
            case 0x0A: escape(UInt8(ascii: "n"))
            case 0x0D: escape(UInt8(ascii: "r"))
            case 0x09: escape(UInt8(ascii: "t"))
            case 0..<0x20:
                bytes.append(contentsOf: "\\u00".utf8)
                Hex.appendDigits(of: byte, to: &bytes)
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private mutating func escape(_ letter: UInt8) {
        bytes.append(UInt8(ascii: "\\"))
        bytes.append(letter)
    }
}

/// Why a plaintext could not be read as the store's JSON; the position only, never content.
struct JSONError: Error {
    var offset: Int
}

/// A pull reader: the caller says what it expects next, and unknown members are skipped, so a
/// newer writer's extra fields do not stop an older reader.
struct JSONReader {
    private let bytes: [UInt8]
    private var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

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

    /// Reads an object, calling `member` with each key; `member` must read or skip the value.
    mutating func object(_ member: (inout JSONReader, String) throws(JSONError) -> Void) throws(JSONError) {
        try expect(UInt8(ascii: "{"))
        if peek() == UInt8(ascii: "}") { index += 1; return }
        while true {
            let name = String(decoding: try stringBytes(), as: UTF8.self)
            try expect(UInt8(ascii: ":"))
            try member(&self, name)
            guard let next = peek() else { throw fail() }
            index += 1
            if next == UInt8(ascii: "}") { return }
            guard next == UInt8(ascii: ",") else { index -= 1; throw fail() }
        }
    }

    mutating func array(_ element: (inout JSONReader) throws(JSONError) -> Void) throws(JSONError) {
        try expect(UInt8(ascii: "["))
        if peek() == UInt8(ascii: "]") { index += 1; return }
        while true {
            try element(&self)
            guard let next = peek() else { throw fail() }
            index += 1
            if next == UInt8(ascii: "]") { return }
            guard next == UInt8(ascii: ",") else { index -= 1; throw fail() }
        }
    }

    /// True, and the `null` consumed, when the next value is null.
    mutating func null() -> Bool {
        guard peek() == UInt8(ascii: "n"), bytes[index...].starts(with: "null".utf8) else { return false }
        index += 4
        return true
    }

    mutating func string() throws(JSONError) -> String {
        let raw = try stringBytes()
        guard let text = String(validating: raw, as: UTF8.self) else { throw fail() }
        return text
    }

    /// A string's bytes as a secret; the intermediate buffer is zeroed.
    mutating func secret() throws(JSONError) -> Secret {
        var raw = try stringBytes()
        defer { zeroize(&raw) }
        return Secret(bytes: raw)
    }

    mutating func int64() throws(JSONError) -> Int64 {
        _ = peek()
        let start = index
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
        guard let value = Int64(String(decoding: bytes[start..<index], as: UTF8.self)) else { throw fail() }
        return value
    }

    /// Skips one value of any kind.
    mutating func skipValue() throws(JSONError) {
        switch peek() {
        case UInt8(ascii: "{"): try object { reader, _ throws(JSONError) in try reader.skipValue() }
        case UInt8(ascii: "["): try array { reader throws(JSONError) in try reader.skipValue() }
        case UInt8(ascii: "\""): var skipped = try stringBytes(); zeroize(&skipped)
        case UInt8(ascii: "n"): if !null() { throw fail() }
        case UInt8(ascii: "t"), UInt8(ascii: "f"):
            while index < bytes.count, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(bytes[index]) { index += 1 }
        default:
            while index < bytes.count, !",}] \t\r\n".utf8.contains(bytes[index]) { index += 1 }
        }
    }

    /// The rest must be whitespace.
    mutating func end() throws(JSONError) {
        guard peek() == nil else { throw fail() }
    }

    private mutating func stringBytes() throws(JSONError) -> [UInt8] {
        try expect(UInt8(ascii: "\""))
        var result: [UInt8] = []
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return result
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { throw fail() }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): result.append(escape)
                case UInt8(ascii: "n"): result.append(0x0A)
                case UInt8(ascii: "r"): result.append(0x0D)
                case UInt8(ascii: "t"): result.append(0x09)
                case UInt8(ascii: "b"): result.append(0x08)
                case UInt8(ascii: "f"): result.append(0x0C)
                case UInt8(ascii: "u"): try appendEscapedScalar(to: &result)
                default: throw fail()
                }
            default:
                result.append(byte)
            }
        }
        throw fail()
    }

    /// `\uXXXX`, with a following low surrogate when the first is a high one.
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
