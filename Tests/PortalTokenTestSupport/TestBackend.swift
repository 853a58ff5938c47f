import Foundation

/// The storage backends the end-to-end suites run on. Each scenario runs once per backend: the
/// two forced ones, and `auto` in the states a user meets it in.
public enum TestBackend: String, CaseIterable, Sendable, CustomStringConvertible {
    case secretService = "secret-service"
    /// The encrypted file, with a passphrase from the environment and the key cached as it
    /// would be for a user, for a shorter time.
    case file
    /// `auto` on the test script's session bus, where gnome-keyring is registered: the keyring.
    case auto
    /// `auto` with no session bus at all, after the store that created the file store (which
    /// alone announces the fallback): every later command must be silent on success.
    case autoWithoutBus = "auto-without-bus"
    /// `auto` on a session bus of its own with no Secret Service provider on it: the file, as
    /// without a bus, after the store that created it.
    case autoWithoutProvider = "auto-without-provider"

    public var description: String { rawValue }

    /// Environment changes that make portal-token use this backend, with any state it needs
    /// kept under `directory`.
    public func environment(directory: URL) -> [String: String?] {
        let file: [String: String?] = [
            "PORTAL_TOKEN_FILE": directory.appendingPathComponent("store").path,
            "PORTAL_TOKEN_PASSPHRASE": "scenario passphrase",
            // Each test's file caches a key of its own; a minute is enough for a test and
            // keeps them from piling up in the user's keyring.
            "PORTAL_TOKEN_KEY_CACHE_TIMEOUT": "60",
        ]
        // The test script's one gnome-keyring answers every suite at once: on two loaded cores a
        // write has taken longer than the 3 s default, so the suites that use it wait longer
        // (KeyringFailureTests measure the default bound, on keyrings of their own).
        let sharedKeyring: [String: String?] = ["PORTAL_TOKEN_KEYRING_TIMEOUT_MS": "10000"]
        switch self {
        case .secretService:
            return sharedKeyring.merging(["PORTAL_TOKEN_BACKEND": rawValue]) { $1 }
        case .file:
            return file.merging(["PORTAL_TOKEN_BACKEND": rawValue]) { $1 }
        case .auto:
            return sharedKeyring.merging(["PORTAL_TOKEN_BACKEND": nil]) { $1 }
        case .autoWithoutProvider:
            // The bus's address comes from `prepare`, which starts it.
            return file.merging([
                "PORTAL_TOKEN_BACKEND": nil, "DISPLAY": nil, "WAYLAND_DISPLAY": nil,
                "XDG_RUNTIME_DIR": directory.appendingPathComponent("run").path,
            ]) { $1 }
        case .autoWithoutBus:
            return file.merging([
                "PORTAL_TOKEN_BACKEND": nil, "DBUS_SESSION_BUS_ADDRESS": nil, "DISPLAY": nil, "WAYLAND_DISPLAY": nil,
                // A runtime directory of its own, holding no bus socket.
                "XDG_RUNTIME_DIR": directory.appendingPathComponent("run").path,
            ]) { $1 }
        }
    }

    /// Brings the backend to the state the suites expect, once the environment is in place:
    /// for `auto` on the file, a bus without a provider where asked for, and the file store
    /// created by a store of an unrelated credential (the one run that announces the fallback).
    /// Returns what must stay alive while the backend is used (the private bus), and updates
    /// the environment.
    public func prepare(directory: URL, environment: inout [String: String]) throws -> AnyObject? {
        guard self == .autoWithoutBus || self == .autoWithoutProvider else { return nil }
        try FileManager.default.createDirectory(
            at: directory.appendingPathComponent("run"), withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        var bus: PrivateKeyring?
        if self == .autoWithoutProvider {
            let started = try PrivateKeyring(withKeyring: false)
            environment["DBUS_SESSION_BUS_ADDRESS"] = started.busAddress
            bus = started
        } else {
            environment["DBUS_SESSION_BUS_ADDRESS"] = nil
        }
        let created = try ProcessRunner.portalToken(
            ["store"], stdin: "protocol=https\nhost=creates-the-file.tld\nusername=u\npassword=p\n",
            environment: environment)
        // The fallback is announced (a --verbose trace may come before it).
        guard created.exitCode == 0,
            created.stderr.split(separator: "\n").contains(where: {
                $0.hasPrefix("portal-token: using the encrypted file store: ")
            })
        else {
            throw ContractFailure("creating the file store failed: \(created.exitCode) \(created.stderr)")
        }
        return bus
    }
}
