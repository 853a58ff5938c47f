import PortalTokenCore
import Testing

@Suite("the proxy's path filter, pure")
struct ProxyPathRulesTests {
    static let prefixes = ["/api/v3/clients/me"]

    @Test("';', '%25', overlong UTF-8, escapes of bytes of 0x80 or more and malformed escapes are refused")
    func refused() {
        for path in [
            "/api/v3/clients/me/..;/..;/auth", "/api/v3/clients/me;x", "/api/v3/clients/me/a;b",
            "/api/v3/clients/me/%252e%252e", "/api/v3/clients/me/%25", "/api/v3/clients/me/%c0%ae",
            "/api/v3/clients/me/%C0%AE", "/api/v3/clients/me/%e0%80%ae", "/api/v3/clients/me/%80",
            "/api/v3/clients/me/%ff", "/api/v3/clients/me/%3B", "/api/v3/clients/me/%2e", "/api/v3/clients/me/%2F",
            "/api/v3/clients/me/%5c", "/api/v3/clients/me/%00", "/api/v3/clients/me/%1f", "/api/v3/clients/me/%7f",
            "/api/v3/clients/me/%zz", "/api/v3/clients/me/%2", "/api/v3/clients/me/%", "/api/v3/clients/me/é",
            "/api/v3/clients/me/a b", "/api/v3/clients/me/a\\b", "/api/v3/clients/me//x", "/api/v3/clients/me/..",
            "/api/v3/clients/me/a\u{0}", "/api/v3/clients/me/#x",
        ] {
            #expect(!ProxyRules.isAllowed(path: path[...], prefixes: Self.prefixes), "\(path.debugDescription)")
        }
    }

    @Test("plain paths, sub-delimiters and escapes of printable ASCII still pass")
    func allowed() {
        for path in [
            "/api/v3/clients/me", "/api/v3/clients/me/", "/api/v3/clients/me/wallets/abc-1_2.3~x",
            "/api/v3/clients/me/a:b@c!$&'()*+,=", "/api/v3/clients/me/a%20b", "/api/v3/clients/me/%41%7e",
        ] {
            #expect(ProxyRules.isAllowed(path: path[...], prefixes: Self.prefixes), "\(path)")
        }
    }
}
