import Foundation
import Glibc
import PortalTokenTestSupport
import Testing

/// A `get` from an unlocked keyring reads over the one session-bus connection the run holds for the
/// `auto` decision, with no more calls than git's C helper makes (docs/storage.md, "Reading
/// without libsecret"). Counted on a bus of the test's own, as `dbus-monitor` sees it.
@Suite("keyring reads over one connection")
struct KeyringReadTests {
    /// One method call a client sent on the bus.
    struct Call: Equatable {
        let destination: String
        let member: String
    }

    /// Everything dbus-monitor saw on the bus while `body` ran, as it printed it; `body` is given
    /// the file it is printing to, to look at as it goes. `directory` holds that file.
    static func monitored(
        directory: URL, busAddress: String, environment: [String: String], during body: (String) throws -> Void
    ) throws -> String {
        let output = directory.appendingPathComponent("monitor-\(UUID().uuidString)").path
        let monitor = try ProcessRunner.spawn(
            "/usr/bin/dbus-monitor", ["--address", busAddress], environment: environment, stdout: output)
        defer {
            kill(monitor, SIGTERM)
            _ = waitpid(monitor, nil, 0)
        }
        func seen(_ text: String) throws -> Bool {
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline {
                if let monitored = try? String(contentsOfFile: output, encoding: .utf8), monitored.contains(text) {
                    return true
                }
                usleep(10_000)
            }
            return false
        }
        // dbus-monitor is told its name is lost once it monitors.
        #expect(try seen("member=NameLost"), "dbus-monitor did not start monitoring")
        try body(output)
        // The bus delivers in order: once the monitor has the marker, it has all that came before.
        // The marker is a call portal-token never makes (it does ask GetId), so it is not mistaken
        // for one of the run's own.
        let marker = try ProcessRunner.run(
            "/usr/bin/dbus-send",
            [
                "--session", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                "org.freedesktop.DBus.ListNames",
            ], environment: environment, timeout: 10)
        #expect(marker.exitCode == 0)
        #expect(try seen("member=ListNames"), "the marker call never reached dbus-monitor")
        return try String(contentsOfFile: output, encoding: .utf8)
    }

    /// The method calls each client that connected while `body` ran sent, by its unique name.
    static func monitoredCalls(on keyring: PrivateKeyring, during body: () throws -> Void) throws -> [String: [Call]] {
        try monitoredCalls(
            directory: keyring.directory, busAddress: keyring.busAddress, environment: keyring.environment,
            during: body)
    }

    /// The same on any private bus: `directory` holds the monitor's output.
    static func monitoredCalls(
        directory: URL, busAddress: String, environment: [String: String], during body: () throws -> Void
    ) throws -> [String: [Call]] {
        let output = try monitored(directory: directory, busAddress: busAddress, environment: environment) { _ in
            try body()
        }
        var calls: [String: [Call]] = [:]
        var clients: [String] = []
        var markerSender = ""
        for line in output.split(separator: "\n") where line.hasPrefix("method call ") {
            func field(_ name: String) -> String {
                guard let start = line.range(of: " \(name)=") else { return "" }
                return String(line[start.upperBound...].prefix { $0 != " " && $0 != ";" })
            }
            let sender = field("sender"), member = field("member")
            if member == "Hello" { clients.append(sender) }
            if member == "ListNames" { markerSender = sender }
            calls[sender, default: []].append(Call(destination: field("destination"), member: member))
        }
        return calls.filter { clients.contains($0.key) && $0.key != markerSender }
    }

    @Test(
        """
        a credential get from an unlocked keyring makes one D-Bus connection and no more calls than git's \
        C helper, under auto and secret-service
        """)
    func oneConnection() throws {
        let helper = try #require(
            ProcessInfo.processInfo.environment["GIT_CREDENTIAL_LIBSECRET"],
            "GIT_CREDENTIAL_LIBSECRET is not set: run the suite through contrib/test.sh")
        let keyring = try PrivateKeyring(withKeyring: true)
        let environment = keyring.environment
        let stored = try ProcessRunner.portalToken(
            ["store"], stdin: "protocol=https\nhost=ours.tld\nusername=u\npassword=ours\n", environment: environment)
        #expect(stored.exitCode == 0, "\(stored.stderr)")
        let helperStored = try ProcessRunner.run(
            helper, ["store"], stdin: "protocol=https\nhost=theirs.tld\nusername=u\npassword=theirs\n",
            environment: environment)
        #expect(helperStored.exitCode == 0)

        let theirs = try Self.monitoredCalls(on: keyring) {
            let got = try ProcessRunner.run(
                helper, ["get"], stdin: "protocol=https\nhost=theirs.tld\n", environment: environment)
            #expect(got.stdout == "username=u\npassword=theirs\n")
        }
        let helperCalls = theirs.values.flatMap { $0 }
        let helperKeyringCalls = helperCalls.filter { $0.destination != "org.freedesktop.DBus" }

        for backend in ["auto", "secret-service"] {
            var environment = environment
            environment["PORTAL_TOKEN_BACKEND"] = backend
            let ours = try Self.monitoredCalls(on: keyring) {
                let got = try ProcessRunner.portalToken(
                    ["get"], stdin: "protocol=https\nhost=ours.tld\n", environment: environment)
                #expect(got.stdout == "username=u\npassword=ours\n", "\(got.stderr)")
            }
            #expect(ours.count == 1, "\(backend): connections \(ours.keys.sorted())")
            let calls = ours.values.flatMap { $0 }
            let keyringCalls = calls.filter { $0.destination != "org.freedesktop.DBus" }
            // A session, the default collection, one search for both of git's schemas; then the
            // collection's Locked, the secret and the item's properties.
            #expect(
                keyringCalls.map(\.member).sorted()
                    == ["Get", "GetAll", "GetSecrets", "OpenSession", "ReadAlias", "SearchItems"],
                "\(backend): \(keyringCalls)")
            #expect(
                keyringCalls.count <= helperKeyringCalls.count, "\(backend): \(keyringCalls) / \(helperKeyringCalls)")
            #expect(calls.count <= helperCalls.count, "\(backend): \(calls) / \(helperCalls)")
        }
    }

    @Test("a locked keyring is never read as empty over the bus: exit 4, and after unlocking the item is there")
    func lockedThenUnlocked() throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        let environment = keyring.environment
        let stored = try ProcessRunner.portalToken(
            ["store"], stdin: "protocol=https\nhost=locked.tld\nusername=u\npassword=kept\n", environment: environment)
        #expect(stored.exitCode == 0, "\(stored.stderr)")
        try keyring.lockLoginCollection()
        for request in ["protocol=https\nhost=locked.tld\n", "protocol=https\nhost=never-stored.tld\n"] {
            let got = try ProcessRunner.portalToken(["get"], stdin: request, environment: environment)
            #expect(got.exitCode == 4 && got.stdout.isEmpty && got.stderr.contains("is locked"), "\(got.stderr)")
        }
        try keyring.restartKeyringUnlocked()
        let got = try ProcessRunner.portalToken(
            ["get"], stdin: "protocol=https\nhost=locked.tld\n", environment: environment)
        #expect(got.exitCode == 0 && got.stdout == "username=u\npassword=kept\n", "\(got.stderr)")
    }
}
