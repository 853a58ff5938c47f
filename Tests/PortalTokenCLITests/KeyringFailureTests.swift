import Foundation
import PortalTokenTestSupport
import Testing

/// The Secret Service never hangs and never lies: each failure is exit 4 with a reason, within
/// its bound. Each test has a bus of its own, so stopping or locking it disturbs nobody.
@Suite("keyring failures")
struct KeyringFailureTests {
    private let request = "protocol=https\nhost=failure.tld\n"
    private let credential = "protocol=https\nhost=failure.tld\nusername=u\npassword=p\n"

    private func expectStorageError(
        _ result: ProcessResult, mentioning words: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(result.exitCode == 4, sourceLocation: sourceLocation)
        #expect(result.stdout.isEmpty, sourceLocation: sourceLocation)
        #expect(result.stderr.hasPrefix("portal-token: error: "), sourceLocation: sourceLocation)
        #expect(result.stderr.contains(words), "stderr was: \(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stderr.contains("\nhint: "), sourceLocation: sourceLocation)
    }

    @Test(
        "no session bus gives exit 4 within a second",
        arguments: [
            ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent/bus"],
            ["DBUS_SESSION_BUS_ADDRESS": nil, "DISPLAY": nil, "XDG_RUNTIME_DIR": "/nonexistent"],
        ] as [[String: String?]])
    func noBus(environment: [String: String?]) throws {
        var changes = environment
        changes["PORTAL_TOKEN_BACKEND"] = "secret-service"
        let result = try ProcessRunner.portalToken(
            ["get"], stdin: request, environment: ProcessRunner.environment(changes))
        expectStorageError(result, mentioning: "no D-Bus session bus")
        #expect(result.duration < 1.0)
    }

    @Test("a bus without a Secret Service provider gives exit 4 within a second")
    func noProvider() throws {
        let bus = try PrivateKeyring(withKeyring: false)
        var environment = bus.environment
        environment["PORTAL_TOKEN_BACKEND"] = "secret-service"
        for operation in ["get", "store", "erase"] {
            let result = try ProcessRunner.portalToken([operation], stdin: credential, environment: environment)
            expectStorageError(result, mentioning: "no Secret Service provider")
            #expect(result.duration < 1.0)
        }
        // auto uses the file instead (docs/storage.md, "Backends and the auto decision"): a get before the file exists
        // is silent; the store that creates it says so, once; every later command is silent.
        environment["PORTAL_TOKEN_BACKEND"] = nil
        let before = try ProcessRunner.portalToken(["get"], stdin: request, environment: environment)
        #expect(before.exitCode == 0 && before.stdout.isEmpty && before.stderr.isEmpty, "\(before.stderr)")
        #expect(before.duration < 1.0)
        environment["PORTAL_TOKEN_PASSPHRASE"] = "no provider passphrase"
        let created = try ProcessRunner.portalToken(["store"], stdin: credential, environment: environment)
        #expect(created.exitCode == 0)
        #expect(
            created.stderr
                == """
                portal-token: using the encrypted file store: no Secret Service provider is registered on the \
                session bus\n
                """,
            "\(created.stderr)")
        for (operation, input) in [("get", request), ("store", credential), ("erase", request)] {
            let later = try ProcessRunner.portalToken([operation], stdin: input, environment: environment)
            #expect(later.exitCode == 0 && later.stderr.isEmpty, "\(operation): \(later.stderr)")
        }
    }

    @Test("a stopped keyring daemon gives exit 4 at the configured bound")
    func stoppedDaemon() throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        var environment = keyring.environment
        #expect(try ProcessRunner.portalToken(["store"], stdin: credential, environment: environment).exitCode == 0)
        keyring.stopKeyring()
        environment["PORTAL_TOKEN_KEYRING_TIMEOUT_MS"] = "800"
        environment["PORTAL_TOKEN_BACKEND"] = "secret-service"
        let result = try ProcessRunner.portalToken(["get"], stdin: request, environment: environment, timeout: 10)
        expectStorageError(result, mentioning: "did not answer within 800 ms")
        #expect(result.duration < 2.5)

        // auto decides from what is registered on the bus, not from how fast the keyring answers
        // (docs/storage.md, "Backends and the auto decision"): the same exit 4, and no file store.
        environment["PORTAL_TOKEN_BACKEND"] = nil
        let auto = try ProcessRunner.portalToken(["get"], stdin: request, environment: environment, timeout: 10)
        expectStorageError(auto, mentioning: "did not answer within 800 ms")
        #expect(auto.duration < 2.5)
        #expect(
            !FileManager.default.fileExists(
                atPath: keyring.directory.appendingPathComponent("data/portal-token/store").path))
    }

    @Test(
        """
        a stopped keyring daemon costs git's get one keyring bound in all, whatever the helper's spelling, \
        through real git and run as git runs the helper
        """)
    func stoppedDaemonOneBound() throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        var environment = keyring.environment
        #expect(try ProcessRunner.portalToken(["store"], stdin: credential, environment: environment).exitCode == 0)
        let bin = keyring.directory.appendingPathComponent("bin").path
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: bin + "/git-credential-portal-token", withDestinationPath: ProcessRunner.portalTokenPath)
        environment["PATH"] = bin + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["GIT_TERMINAL_PROMPT"] = "0"
        environment["GIT_CONFIG_NOSYSTEM"] = "1"
        environment["PORTAL_TOKEN_KEYRING_TIMEOUT_MS"] = nil
        keyring.stopKeyring()
        defer { keyring.continueKeyring() }
        // The default bound is 3 s: one bound and the process around it.
        for spelling in ["portal-token", "portal-token --backend secret-service", "portal-token --backend auto"] {
            let git = try ProcessRunner.run(
                "/usr/bin/git",
                ["-c", "credential.helper=", "-c", "credential.helper=\(spelling)", "credential", "fill"],
                stdin: request, environment: environment, timeout: 20)
            #expect(git.exitCode != 0, "\(spelling): \(git.stdout)")
            #expect(git.stderr.contains("did not answer within 3000 ms"), "\(spelling): \(git.stderr)")
            #expect(git.duration < 3.5, "\(spelling): git credential fill took \(git.duration) s")
            let arguments = spelling.split(separator: " ").dropFirst().map(String.init)
            let direct = try ProcessRunner.run(
                bin + "/git-credential-portal-token", arguments + ["get"], stdin: request, environment: environment,
                timeout: 20)
            expectStorageError(direct, mentioning: "did not answer within 3000 ms")
            #expect(direct.duration < 3.5, "\(spelling): the helper's get took \(direct.duration) s")
        }
        environment["PORTAL_AUTH_ENVIRONMENT_ID"] = "env-stalled"
        for operation in ["get", "token"] {
            let script = try ProcessRunner.portalToken([operation], stdin: "", environment: environment, timeout: 20)
            #expect(script.exitCode == 4, "\(operation): \(script.stderr)")
            #expect(script.duration < 3.5, "script-mode \(operation) took \(script.duration) s")
        }
    }

    @Test("a locked collection is exit 4 naming the lock, never 'nothing found'")
    func lockedCollection() throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        let environment = keyring.environment
        #expect(try ProcessRunner.portalToken(["store"], stdin: credential, environment: environment).exitCode == 0)
        try keyring.lockLoginCollection()
        // A hit on a locked item, a miss in a locked collection, a store and an erase.
        for (operation, input) in [
            ("get", request), ("get", "protocol=https\nhost=never-stored.tld\n"),
            ("store", credential), ("erase", request),
        ] {
            let result = try ProcessRunner.portalToken([operation], stdin: input, environment: environment)
            expectStorageError(result, mentioning: "is locked")
            #expect(result.duration < 3.0)
        }
    }

    @Test(
        """
        without libsecret installed, an unlocked keyring is still read, and a write or a locked keyring is exit 4 \
        naming it, under auto too
        """)
    func libsecretMissing() throws {
        // A keyring that works: only the library is missing (dlopen fails as if not installed).
        let keyring = try PrivateKeyring(withKeyring: true)
        var environment = keyring.environment
        #expect(try ProcessRunner.portalToken(["store"], stdin: credential, environment: environment).exitCode == 0)
        let shim = ProcessInfo.processInfo.environment["PORTAL_TOKEN_TEST_HIDE_SHIM"]
        try #require(shim != nil, "PORTAL_TOKEN_TEST_HIDE_SHIM is not set: run the suite through contrib/test.sh")
        environment["LD_PRELOAD"] = shim
        environment["PORTAL_TOKEN_TEST_HIDE_LIBRARIES"] = "libsecret-1.so.0"
        environment["PORTAL_TOKEN_BACKEND"] = "secret-service"
        // Reading an unlocked keyring needs no libsecret (docs/storage.md, "Reading without libsecret").
        let found = try ProcessRunner.portalToken(["get"], stdin: request, environment: environment)
        #expect(found.exitCode == 0 && found.stdout == "username=u\npassword=p\n", "\(found.stderr)")
        for (operation, input) in [("store", credential), ("erase", request)] {
            let result = try ProcessRunner.portalToken([operation], stdin: input, environment: environment)
            expectStorageError(result, mentioning: "libsecret (libsecret-1.so.0) could not be loaded")
            #expect(
                result.stderr.hasSuffix("\nhint: install Debian's libsecret-1-0, or use --backend file\n"),
                "\(result.stderr)")
        }
        // auto sees a registered provider and uses it, so the missing library is the same error,
        // never a switch to the file (docs/storage.md, "Backends and the auto decision").
        environment["PORTAL_TOKEN_BACKEND"] = nil
        let auto = try ProcessRunner.portalToken(["store"], stdin: credential, environment: environment)
        expectStorageError(auto, mentioning: "libsecret (libsecret-1.so.0) could not be loaded")
        #expect(
            !FileManager.default.fileExists(
                atPath: keyring.directory.appendingPathComponent("data/portal-token/store").path))
        // Only libsecret unlocks: a locked keyring without it is the same error.
        try keyring.lockLoginCollection()
        let locked = try ProcessRunner.portalToken(["get"], stdin: request, environment: environment)
        expectStorageError(locked, mentioning: "libsecret (libsecret-1.so.0) could not be loaded")
    }
}
