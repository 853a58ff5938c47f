/// Base64 for the few places that use it: a JWT's claims (base64url), the storage index a Vault
/// server names (standard base64) and a delegated credential's text (base64url).
public enum Base64 {
    /// Base64 in either alphabet (mixed too), trailing `=` ignored, leftover bits that make no
    /// whole byte dropped. nil for any other character.
    public static func decode<Bytes: Collection>(_ text: Bytes) -> [UInt8]? where Bytes.Element == UInt8 {
        var trailingPadding = 0
        for byte in text.reversed() {
            guard byte == UInt8(ascii: "=") else { break }
            trailingPadding += 1
        }
        var output: [UInt8] = []
        output.reserveCapacity(text.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in text.dropLast(trailingPadding) {
            let sextet: UInt32
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): sextet = UInt32(byte - UInt8(ascii: "A"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): sextet = UInt32(byte - UInt8(ascii: "a")) + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): sextet = UInt32(byte - UInt8(ascii: "0")) + 52
            case UInt8(ascii: "+"), UInt8(ascii: "-"): sextet = 62
            case UInt8(ascii: "/"), UInt8(ascii: "_"): sextet = 63
            default: return nil
            }
            accumulator = (accumulator << 6 | sextet) & 0xFFFFFF
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        return output
    }

    /// base64url (RFC 4648 §5) without padding.
    public static func encodeURL(_ bytes: [UInt8]) -> [UInt8] {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index < bytes.count {
            let count = min(3, bytes.count - index)
            var group: UInt32 = 0
            for offset in 0..<3 { group = group << 8 | UInt32(offset < count ? bytes[index + offset] : 0) }
            for sextet in 0...count { output.append(alphabet[Int(group >> UInt32(18 - 6 * sextet) & 0x3F)]) }
            index += 3
        }
        return output
    }
}
