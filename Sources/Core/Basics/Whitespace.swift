extension StringProtocol {
    /// The text without leading and trailing spaces, tabs and line breaks. By UTF-8 byte (all four
    /// are ASCII, so the cut falls between scalars), and inlinable, so that each caller gets a copy
    /// for String or Substring and no generic code runs on start-up paths.
    @inlinable
    public var trimmingWhitespace: String {
        let bytes = utf8
        let isTrimmed = { (byte: UInt8) in
            byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\n")
                || byte == UInt8(ascii: "\r")
        }
        var start: String.Index?, end = bytes.startIndex, index = bytes.startIndex
        while index != bytes.endIndex {
            let next = bytes.index(after: index)
            if !isTrimmed(bytes[index]) {
                if start == nil { start = index }
                end = next
            }
            index = next
        }
        guard let start else { return "" }
        return String(self[start..<end])
    }

    /// The text without leading and trailing Unicode white space and line breaks (the SDK's
    /// `whitespacesAndNewlines`).
    public var trimmingUnicodeWhitespace: String {
        String(trimming { $0.properties.isWhitespace })
    }

    /// The text without the leading and trailing scalars that `isTrimmed` matches. By Unicode
    /// scalar, since Swift reads CR LF as one Character.
    public func trimming(_ isTrimmed: (Unicode.Scalar) -> Bool) -> Substring {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !isTrimmed($0) }) else { return "" }
        let last = scalars.lastIndex(where: { !isTrimmed($0) })!
        var result = ""
        result.unicodeScalars.append(contentsOf: scalars[first...last])
        return result[...]
    }
}
