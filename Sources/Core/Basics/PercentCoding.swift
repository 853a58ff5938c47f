/// `%HH` escapes (RFC 3986 §2.1), read and written byte by byte.
public enum PercentCoding {
    /// The byte a `%HH` escape starting at `index` stands for, or nil when there is none.
    public static func escapedByte(in text: ArraySlice<UInt8>, at index: Int) -> UInt8? {
        guard text[index] == UInt8(ascii: "%"), text.endIndex - index >= 3,
            let high = Hex.value(of: text[index + 1]), let low = Hex.value(of: text[index + 2])
        else { return nil }
        return high << 4 | low
    }

    /// Every escape decoded (`+` read as a space when `plusAsSpace`); nil when a `%` is not
    /// followed by two hex digits.
    public static func decodeStrictly(_ text: ArraySlice<UInt8>, plusAsSpace: Bool = false) -> [UInt8]? {
        var output: [UInt8] = []
        output.reserveCapacity(text.count)
        var index = text.startIndex
        while index < text.endIndex {
            let byte = text[index]
            if byte == UInt8(ascii: "%") {
                guard let escaped = escapedByte(in: text, at: index) else { return nil }
                output.append(escaped)
                index += 3
            } else {
                output.append(plusAsSpace && byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
                index += 1
            }
        }
        return output
    }

    /// Decodes as git's url_decode does: a `%` not followed by two hex digits, or one that would
    /// decode to NUL, stays as it is.
    public static func decodeLeniently(_ text: ArraySlice<UInt8>) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(text.count)
        var index = text.startIndex
        while index < text.endIndex {
            let escaped = escapedByte(in: text, at: index).flatMap { $0 == 0 ? nil : $0 }
            output.append(escaped ?? text[index])
            index += escaped == nil ? 1 : 3
        }
        return output
    }

    /// Every UTF-8 byte for which `isUnreserved` is false becomes `%` and two uppercase digits.
    public static func encode(_ text: String, keeping isUnreserved: (UInt8) -> Bool) -> String {
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            if isUnreserved(byte) {
                output.append(byte)
            } else {
                output.append(UInt8(ascii: "%"))
                Hex.appendDigits(of: byte, to: &output, uppercase: true)
            }
        }
        return String(decoding: output, as: UTF8.self)
    }
}
