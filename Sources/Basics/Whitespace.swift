extension StringProtocol {
    /// The text without leading and trailing spaces, tabs and line breaks.
    public var trimmingWhitespace: String {
        String(trimming { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" })
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
