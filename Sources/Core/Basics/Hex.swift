/// Hexadecimal digits: lowercase when written (as digests and names are shown), either case
/// when read.
public enum Hex {
    @usableFromInline static let lowercaseDigits: [UInt8] = Array("0123456789abcdef".utf8)
    @usableFromInline static let uppercaseDigits: [UInt8] = Array("0123456789ABCDEF".utf8)

    /// Two digits for each byte.
    public static func encode<Bytes: Sequence>(_ bytes: Bytes, uppercase: Bool = false) -> String
    where Bytes.Element == UInt8 {
        var output: [UInt8] = []
        output.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes { appendDigits(of: byte, to: &output, uppercase: uppercase) }
        return String(decoding: output, as: UTF8.self)
    }

    /// `value` in exactly `width` digits, zero-padded on the left (the lowest digits when it
    /// needs more).
    public static func encode(_ value: UInt64, width: Int) -> String {
        var output = [UInt8](repeating: UInt8(ascii: "0"), count: width)
        var rest = value
        for index in stride(from: width - 1, through: 0, by: -1) {
            output[index] = lowercaseDigits[Int(rest & 0xf)]
            rest >>= 4
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Appends the two digits of `byte`. Inlinable, so the hot paths that name things by a digest
    /// (every cached `get`, every `token`'s audit fingerprint) pay no call for it.
    @inlinable
    public static func appendDigits(of byte: UInt8, to output: inout [UInt8], uppercase: Bool = false) {
        let digits = uppercase ? uppercaseDigits : lowercaseDigits
        output.append(digits[Int(byte >> 4)])
        output.append(digits[Int(byte & 0x0f)])
    }

    /// The value of one hex digit of either case, or nil for any other byte.
    public static func value(of digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return digit - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
