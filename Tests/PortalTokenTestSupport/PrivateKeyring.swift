import Foundation

/// A D-Bus session bus of its own, optionally with a real gnome-keyring on it, for tests that
/// stop, lock or remove the keyring and must not disturb the one the test script started.
public final class PrivateKeyring {
    public let directory: URL
    public let busAddress: String
    public private(set) var busPID: Int32 = 0
    /// The keyring daemon's PID, for `kill -STOP`.
    public private(set) var keyringPID: pid_t?

    /// Starts a bus without service activation, so that "no provider" stays true, and with
    /// `withKeyring` a gnome-keyring unlocked with an empty-free test password.
    public init(withKeyring: Bool) throws {
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("portal-token-keyring-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: directory.appendingPathComponent("run"),
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        let socket = directory.appendingPathComponent("bus").path
        let config = directory.appendingPathComponent("bus.conf")
        try PrivateApplicationBus.configuration(
            type: "session", listen: "unix:path=\(socket)", extra: "<auth>EXTERNAL</auth>"
        )
        .write(to: config, atomically: false, encoding: .utf8)
        let started = try ProcessRunner.run(
            "/usr/bin/dbus-daemon",
            ["--config-file=\(config.path)", "--fork", "--print-pid"], timeout: 10)
        guard started.exitCode == 0, let pid = Int32(started.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        else {
            throw ContractFailure("dbus-daemon did not start: \(started.stderr)")
        }
        busPID = pid
        busAddress = "unix:path=\(socket)"
        if withKeyring { try startKeyring() }
    }

    /// The environment a client of this bus runs with.
    public var environment: [String: String] {
        ProcessRunner.environment([
            "DBUS_SESSION_BUS_ADDRESS": busAddress,
            "HOME": directory.path,
            "XDG_RUNTIME_DIR": directory.appendingPathComponent("run").path,
            "XDG_DATA_HOME": directory.appendingPathComponent("data").path,
            "XDG_CONFIG_HOME": directory.appendingPathComponent("config").path,
            "DISPLAY": nil, "WAYLAND_DISPLAY": nil,
        ])
    }

    private func startKeyring() throws {
        // --unlock reads the login keyring's password from stdin until EOF.
        let password = directory.appendingPathComponent("password").path
        _ = FileManager.default.createFile(atPath: password, contents: Data("test-password".utf8))
        keyringPID = try ProcessRunner.spawn(
            "/usr/bin/gnome-keyring-daemon",
            ["--foreground", "--unlock", "--components=secrets"],
            environment: environment, stdin: password)
        let waited = try ProcessRunner.run(
            "/usr/bin/gdbus", ["wait", "--session", "--timeout", "10", "org.freedesktop.secrets"],
            environment: environment, timeout: 15)
        guard waited.exitCode == 0 else { throw ContractFailure("gnome-keyring did not appear on the bus") }
    }

    /// Locks the login collection, as a screen lock would (libsecret 0.20.5's `secret-tool lock`
    /// does not work, so the Secret Service's own Lock method is called).
    public func lockLoginCollection() throws {
        let result = try ProcessRunner.run(
            "/usr/bin/gdbus",
            [
                "call", "--session", "--dest", "org.freedesktop.secrets",
                "--object-path", "/org/freedesktop/secrets",
                "--method", "org.freedesktop.Secret.Service.Lock",
                "['/org/freedesktop/secrets/collection/login']",
            ], environment: environment, timeout: 10)
        guard result.exitCode == 0 else { throw ContractFailure("locking failed: \(result.stderr)") }
    }

    /// Stops the keyring daemon and starts it again unlocked with its password, as a user
    /// unlocking a locked keyring would (the Secret Service's own Unlock needs a prompt). Items
    /// survive: gnome-keyring keeps them in the keyring file under XDG_DATA_HOME.
    public func restartKeyringUnlocked() throws {
        if let pid = keyringPID {
            kill(pid, SIGKILL)
            _ = waitpid(pid, nil, 0)
            keyringPID = nil
        }
        try startKeyring()
    }

    public func stopKeyring() { if let pid = keyringPID { kill(pid, SIGSTOP) } }
    public func continueKeyring() { if let pid = keyringPID { kill(pid, SIGCONT) } }

    deinit {
        if let keyringPID {
            kill(keyringPID, SIGKILL)
            _ = waitpid(keyringPID, nil, 0)
        }
        if busPID > 0 { kill(busPID, SIGKILL) }
        try? FileManager.default.removeItem(at: directory)
    }
}
