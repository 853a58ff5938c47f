import PortalTokenCore
import Testing

@Suite("naming the Secret Service provider")
struct SecretServiceProviderTests {
    @Test(
        "the owner's executable, or a program in its command line, names the provider",
        arguments: [
            ("/usr/bin/gnome-keyring-daemon", ["/usr/bin/gnome-keyring-daemon", "--foreground"], "gnome-keyring"),
            (
                "/opt/root/usr/lib64/ld-linux-x86-64.so.2",
                [
                    "/opt/root/usr/lib64/ld-linux-x86-64.so.2", "--library-path", "/opt/root/usr/lib",
                    "/opt/root/usr/bin/gnome-keyring-daemon", "--foreground",
                ], "gnome-keyring"
            ),
            ("/usr/bin/keepassxc", ["keepassxc", "--pw-stdin", "/home/u/Passwords.kdbx"], "KeePassXC"),
            ("/app/bin/KeePassXC", ["KeePassXC"], "KeePassXC"),
            ("/usr/bin/kwalletd5", ["kwalletd5", "--pam-login", "3", "4"], "KWallet"),
            ("/usr/bin/kwalletd6", ["kwalletd6"], "KWallet"),
            ("/usr/libexec/oo7-daemon", ["/usr/libexec/oo7-daemon"], "oo7"),
            ("/usr/bin/python3", ["python3", "/home/u/fake-secrets.py"], "another provider (python3)"),
            ("", [], "another provider"),
        ] as [(String, [String], String)])
    func named(executable: String, commandLine: [String], name: String) {
        #expect(SecretServiceProvider(executable: executable, commandLine: commandLine).name == name)
    }

    @Test("every provider comes with what portal-token knows of it")
    func quirks() {
        for provider in [SecretServiceProvider.gnomeKeyring, .keepassxc, .kwallet, .oo7, .other("x")] {
            #expect(!provider.quirks.isEmpty && !provider.quirks.contains("\n"))
        }
        #expect(SecretServiceProvider.keepassxc.quirks.contains("Unlock before search"))
    }
}
