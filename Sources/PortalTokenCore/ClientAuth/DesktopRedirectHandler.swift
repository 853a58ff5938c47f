/// The desktop entry that makes `portal-token redirect URL` the handler of a custom-scheme
/// redirect URL (product contract §3), registered as `x-scheme-handler/<scheme>` per the
/// freedesktop Desktop Entry and shared MIME-info specifications.
public enum DesktopRedirectHandler {
    public static let fileName = "portal-token-redirect.desktop"

    /// The MIME type a desktop routes the redirect URL's scheme through; nil when the redirect
    /// URL has no custom scheme (http and https go to the loopback listener instead).
    public static func mimeType(redirectURL: String) -> String? {
        RedirectURL.customScheme(redirectURL).map { "x-scheme-handler/" + $0 }
    }

    /// The entry's text. `executable` is quoted as the Exec key requires when it holds
    /// characters the spec reserves. No terminal is opened: a pending two-factor step waits in
    /// the store for `portal-token verify-totp`.
    public static func desktopEntry(redirectURL: String, executable: String = "portal-token") -> String? {
        guard let mimeType = mimeType(redirectURL: redirectURL) else { return nil }
        return """
            [Desktop Entry]
            Type=Application
            Name=portal-token sign-in
            Comment=Completes a Portal sign-in from its redirect URL
            Exec=\(execArgument(executable)) redirect %u
            Terminal=false
            NoDisplay=true
            MimeType=\(mimeType);

            """
    }

    /// The command that makes the entry the scheme's default handler.
    public static func registrationCommand(redirectURL: String) -> String? {
        mimeType(redirectURL: redirectURL).map { "xdg-mime default \(fileName) \($0)" }
    }

    /// Quoted with `"` when it holds a space or a reserved character; `"`, `` ` ``, `$` and `\`
    /// are escaped inside the quotes, and the escaping backslash itself is escaped once more,
    /// as the Exec key is also a string value.
    static func execArgument(_ text: String) -> String {
        let reserved: Set<Character> = [" ", "\t", "\n", "\"", "'", "\\", ">", "<", "~", "|", "&", ";", "$", "*", "?", "#", "(", ")", "`"]
        guard text.contains(where: reserved.contains) else { return text }
        var quoted = "\""
        for character in text {
            if character == "\"" || character == "`" || character == "$" || character == "\\" { quoted += "\\\\" }
            quoted.append(character)
        }
        return quoted + "\""
    }
}
