/// The desktop entry that makes portal-token the handler of a custom-scheme redirect URL
/// (docs/signing-in.md, "Completing it: a custom scheme and the desktop handler"), registered as
/// `x-scheme-handler/<scheme>` per the freedesktop Desktop Entry and shared MIME-info specifications.
///
/// The entry is D-Bus activatable (Desktop Entry specification, "D-Bus Activation"): the
/// launcher starts `portal-token redirect --dbus-activated` through the session bus and hands it
/// the URL in an `org.freedesktop.Application.Open` call, so the URL, whose grant is single-use,
/// never sits in portal-token's argv where another local user could read it (docs/security.md, "Hardening
/// rules"); the launcher's own argv may hold it until the handler answers.
public enum DesktopRedirectHandler {
    /// The well-known bus name; the spec requires the entry's file to be named after it.
    public static let busName = "io.portalhq.PortalToken"
    /// The object path the spec derives from the bus name.
    public static let objectPath = "/io/portalhq/PortalToken"
    public static let fileName = busName + ".desktop"
    /// The D-Bus service file, in `~/.local/share/dbus-1/services`.
    public static let serviceFileName = busName + ".service"
    /// The option that makes `redirect` serve the bus instead of reading a URL.
    public static let activationOption = "--dbus-activated"

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
            Exec=\(execArgument(executable)) redirect \(activationOption)
            DBusActivatable=true
            Terminal=false
            NoDisplay=true
            MimeType=\(mimeType);

            """
    }

    /// The D-Bus service file that starts the handler when a launcher calls the bus name. Its
    /// Exec line is not subject to the desktop entry's quoting; D-Bus splits it as a shell
    /// would, so the executable path is single-quoted when it needs to be.
    public static func serviceFile(executable: String = "portal-token") -> String {
        var quoted = executable
        if executable.contains(where: { " \t'\"\\$`".contains($0) }) {
            quoted = "'" + executable.map { $0 == "'" ? #"'\''"# : String($0) }.joined() + "'"
        }
        return """
            [D-BUS Service]
            Name=\(busName)
            Exec=\(quoted) redirect \(activationOption)

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
        let reserved: Set<Character> = [
            " ", "\t", "\n", "\"", "'", "\\", ">", "<", "~", "|", "&", ";", "$", "*", "?", "#", "(", ")", "`",
        ]
        guard text.contains(where: reserved.contains) else { return text }
        var quoted = "\""
        for character in text {
            if character == "\"" || character == "`" || character == "$" || character == "\\" { quoted += "\\\\" }
            quoted.append(character)
        }
        return quoted + "\""
    }
}
