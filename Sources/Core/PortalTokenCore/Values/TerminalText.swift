import Basics

/// Text from Portal or the store on its way to a person's terminal (docs/security.md, "Hardening rules"): an
/// `endUserId` or a server's error text could otherwise carry escape sequences that retitle the
/// window, rewrite what is on screen, or ring the bell. Control characters are shown as escapes
/// instead, as `git` and `ls` show unprintable bytes.
public enum TerminalText {
    /// C0 controls, DEL and the C1 controls (which some terminals obey as 8-bit escapes)
    /// become `\xNN` / `\u{NN}`; a backslash stays as it is. `keepingNewlines` leaves line
    /// breaks for text of several lines that portal-token composed itself.
    public static func escaped(_ text: String, keepingNewlines: Bool = false) -> String {
        guard text.unicodeScalars.contains(where: { isControl($0) && !(keepingNewlines && $0 == "\n") }) else {
            return text
        }
        var result = ""
        result.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
        for scalar in text.unicodeScalars {
            if isControl(scalar) && !(keepingNewlines && scalar == "\n") {
                result += scalar.value < 0x80 ? "\\x" + hex(scalar.value) : "\\u{" + hex(scalar.value) + "}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (scalar.value >= 0x7f && scalar.value <= 0x9f)
    }

    private static func hex(_ value: UInt32) -> String { Hex.encode(UInt64(value & 0xff), width: 2) }
}
