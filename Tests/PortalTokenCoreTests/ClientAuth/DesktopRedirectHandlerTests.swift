import PortalTokenCore
import Testing

@Suite("desktop redirect handler")
struct DesktopRedirectHandlerTests {
    @Test("a custom-scheme redirect URL gets a D-Bus-activatable x-scheme-handler entry with no %u on its Exec line")
    func entry() throws {
        let entry = try #require(DesktopRedirectHandler.desktopEntry(redirectURL: "PortalExample://auth/callback"))
        let lines = entry.split(separator: "\n")
        #expect(lines.first == "[Desktop Entry]")
        #expect(lines.contains("Exec=portal-token redirect --dbus-activated"))
        #expect(lines.contains("DBusActivatable=true"))
        #expect(!entry.contains("%u") && !entry.contains("%U"))
        #expect(lines.contains("MimeType=x-scheme-handler/portalexample;"))
        #expect(lines.contains("Terminal=false"))
        #expect(lines.contains("NoDisplay=true"))
        #expect(
            DesktopRedirectHandler.registrationCommand(redirectURL: "portalexample://auth/callback")
                == "xdg-mime default io.portalhq.PortalToken.desktop x-scheme-handler/portalexample")
    }

    @Test(
        "http and https redirect URLs have no desktop handler",
        arguments: ["http://127.0.0.1:8765/cb", "https://app.example.com/cb", ""])
    func none(url: String) {
        #expect(DesktopRedirectHandler.desktopEntry(redirectURL: url) == nil)
        #expect(DesktopRedirectHandler.registrationCommand(redirectURL: url) == nil)
    }

    @Test("an executable path with spaces or reserved characters is quoted for the Exec key")
    func quoting() throws {
        let entry = try #require(
            DesktopRedirectHandler.desktopEntry(redirectURL: "myapp://cb", executable: "/opt/my tools/portal-token"))
        #expect(entry.contains(#"Exec="/opt/my tools/portal-token" redirect --dbus-activated"#))
        let dollar = try #require(
            DesktopRedirectHandler.desktopEntry(redirectURL: "myapp://cb", executable: "/opt/$x/portal-token"))
        #expect(dollar.contains(#"Exec="/opt/\\$x/portal-token" redirect --dbus-activated"#))
    }

    @Test("the D-Bus service file names the bus and starts the handler; a path with a space is quoted")
    func serviceFile() {
        #expect(
            DesktopRedirectHandler.serviceFile()
                == "[D-BUS Service]\nName=io.portalhq.PortalToken\nExec=portal-token redirect --dbus-activated\n")
        #expect(
            DesktopRedirectHandler.serviceFile(executable: "/opt/it's here/portal-token")
                .contains(#"Exec='/opt/it'\''s here/portal-token' redirect --dbus-activated"#))
    }
}
