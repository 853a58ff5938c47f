extension StringProtocol {
    /// Empty, or only Unicode white space and line breaks: what the SDK calls blank
    /// (`trimmingCharacters(in: .whitespacesAndNewlines).isEmpty`).
    var isBlank: Bool { unicodeScalars.allSatisfy { $0.properties.isWhitespace } }
}
