import Foundation
import PortalTokenTestSupport
import Testing

/// The default `auto` backend tells the truth (docs/storage.md, "Backends and the auto decision"): it decides from what
/// is registered on the session bus, uses one store at a time, fails with exit 4 when the keyring
/// it chose cannot serve, and never serves a cached answer from a locked keyring. Each test
/// that stops or locks a keyring has a bus of its own.
@Suite("auto backend")
struct AutoBackendTests {
    /// A world on a private bus and keyring, configured for a Portal environment whose API
    /// nobody answers (nothing here needs it), with the keyring bound at 800 ms.
    private func world(_ keyring: PrivateKeyring, apiPort: UInt16 = 9) -> [String: String] {
        var environment = keyring.environment
        environment["PORTAL_AUTH_ENVIRONMENT_ID"] = "env-auto"
        environment["PORTAL_API_HOST"] = "127.0.0.1:\(apiPort)"
        environment["PORTAL_TOKEN_KEYRING_TIMEOUT_MS"] = "800"
        environment["PORTAL_TOKEN_PASSPHRASE"] = "auto backend passphrase"
        environment["PORTAL_TOKEN_ON_SESSION_INVALIDATED"] = nil
        environment["PORTAL_TOKEN_BACKEND"] = nil
        return environment
    }

    private let portalOrigin = "protocol=http\nhost=127.0.0.1:9\n"

    /// `environment` on the file backend, with the wall clock moved by `seconds`
    /// (contrib/testing/wallclock-shift.c).
    private func fileBackend(_ environment: [String: String], clockShift seconds: Int) throws -> [String: String] {
        let shim = try #require(
            ProcessInfo.processInfo.environment["PORTAL_TOKEN_TEST_CLOCK_SHIM"],
            "PORTAL_TOKEN_TEST_CLOCK_SHIM is not set: run the suite through contrib/test.sh")
        var file = environment
        file["PORTAL_TOKEN_BACKEND"] = "file"
        file["LD_PRELOAD"] = shim
        file["PORTAL_TOKEN_TEST_CLOCK_SHIFT"] = String(seconds)
        return file
    }

    private func storePath(_ keyring: PrivateKeyring) -> String {
        keyring.directory.appendingPathComponent("data/portal-token/store").path
    }

    @Test("a stopped keyring daemon is exit 4 within the bound for every command, and no file store is created")
    func stoppedKeyring() throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        let environment = world(keyring)
        let adopt = try ProcessRunner.portalToken(
            ["store"], stdin: portalOrigin + "username=U\npassword=token-stop\n",
            environment: environment)
        #expect(adopt.exitCode == 0, "\(adopt.stderr)")
        // Served once, so the session also sits in the kernel-keyring cache.
        #expect(try ProcessRunner.portalToken(["get"], stdin: "", environment: environment).stdout == "token-stop\n")
        keyring.stopKeyring()
        defer { keyring.continueKeyring() }
        let credential = "protocol=https\nhost=stopped.tld\nusername=u\npassword=p\n"
        let runs: [(String, [String], String)] = [
            ("get", ["get"], "protocol=https\nhost=stopped.tld\n"), ("script-mode get", ["get"], ""),
            ("store", ["store"], credential), ("erase", ["erase"], credential),
            ("session erase", ["erase"], portalOrigin + "username=U\npassword=token-stop\n"),
            ("logout", ["logout"], ""), ("status", ["status"], ""), ("refresh", ["refresh"], ""),
            ("token", ["token"], ""), ("list", ["list"], ""), ("exec", ["exec", "--", "true"], ""),
            ("exec-credential", ["exec-credential"], ""), ("migrate", ["migrate", "--to", "file"], ""),
        ]
        for (name, arguments, input) in runs {
            let result = try ProcessRunner.portalToken(arguments, stdin: input, environment: environment, timeout: 20)
            #expect(result.exitCode == 4, "\(name): \(result.exitCode) \(result.stderr)")
            #expect(result.stdout.isEmpty, "\(name)")
            #expect(result.stderr.hasPrefix("portal-token: error: "), "\(name): \(result.stderr)")
            #expect(result.stderr.contains("did not answer within 800 ms"), "\(name): \(result.stderr)")
            #expect(!result.stderr.contains("encrypted file"), "\(name): \(result.stderr)")
            #expect(result.duration < 2.5, "\(name) took \(result.duration) s")
        }
        // The Docker helper answers in its own protocol: the error on stdout, exit 1.
        let scratch = try ScratchFolder("stopped-docker")
        let docker = try ProcessRunner.run(
            try DockerHelperTests.helperDirectory(scratch) + "/docker-credential-portal-token", ["get"],
            stdin: "https://registry.stopped.tld\n", environment: environment, timeout: 20)
        #expect(
            docker.exitCode == 1 && docker.stdout.contains("did not answer within 800 ms"),
            "\(docker.stdout) \(docker.stderr)")
        #expect(docker.duration < 2.5, "the Docker helper took \(docker.duration) s")
        #expect(!FileManager.default.fileExists(atPath: storePath(keyring)))
        // Nothing was deleted: once the daemon runs again, the session is there.
        keyring.continueKeyring()
        #expect(try ProcessRunner.portalToken(["get"], stdin: "", environment: environment).stdout == "token-stop\n")
    }

    @Test(
        "a session cached in the kernel keyring is not served once the collection is locked, and is again once unlocked"
    )
    func lockedCollectionLocksTheCache() throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        let environment = world(keyring)
        #expect(
            try ProcessRunner.portalToken(
                ["store"], stdin: portalOrigin + "username=U\npassword=token-lock\n",
                environment: environment
            ).exitCode == 0)
        #expect(try ProcessRunner.portalToken(["get"], stdin: "", environment: environment).stdout == "token-lock\n")
        try keyring.lockLoginCollection()
        for arguments in [["get"], ["status"], ["refresh"]] {
            let locked = try ProcessRunner.portalToken(arguments, stdin: "", environment: environment)
            #expect(locked.exitCode == 4, "\(arguments): \(locked.exitCode) \(locked.stderr)")
            #expect(locked.stdout.isEmpty, "\(arguments)")
            #expect(locked.stderr.contains("is locked"), "\(arguments): \(locked.stderr)")
            #expect(locked.stderr.contains("\nhint: unlock it"), "\(arguments): \(locked.stderr)")
            #expect(locked.duration < 1.0, "\(arguments) took \(locked.duration) s")
        }
        try keyring.restartKeyringUnlocked()
        let unlocked = try ProcessRunner.portalToken(["get"], stdin: "", environment: environment)
        #expect(unlocked.exitCode == 0 && unlocked.stdout == "token-lock\n", "\(unlocked.stderr)")
        #expect(unlocked.stderr.isEmpty)
    }

    @Test("20 concurrent stores of one slot leave exactly one item, and each exits 0")
    func concurrentStores() throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        var environment = world(keyring)
        environment["BIN"] = ProcessRunner.portalTokenPath
        let result = try ProcessRunner.run(
            "/bin/sh",
            [
                "-c",
                """
                for i in $(seq 20); do
                    (printf 'protocol=https\\nhost=race.tld\\nusername=u\\npassword=pw-%s\\n' "$i" | "$BIN" store; \
                echo "exit=$?") &
                done
                wait
                secret-tool search --all protocol https server race.tld 2>/dev/null | grep -c '^\\[/'
                """,
            ], environment: environment, timeout: 60)
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(lines.filter { $0 == "exit=0" }.count == 20, "\(result.stdout) \(result.stderr)")
        #expect(lines.last == "1", "items left: \(result.stdout)")
        #expect(result.stderr.isEmpty, "\(result.stderr)")
        let get = try ProcessRunner.portalToken(
            ["get"], stdin: "protocol=https\nhost=race.tld\n", environment: environment)
        #expect(get.stdout.hasPrefix("username=u\npassword=pw-"))
    }

    @Test("20 concurrent session erases with the token each exit 0 or 3, and the hook runs once")
    func concurrentSessionErases() throws {
        let portal = try PortalHarness(backend: .auto)
        #expect(try portal.adopt(token: "token-erase", endUserID: "U").exitCode == 0)
        var environment = portal.git.environment
        environment["BIN"] = ProcessRunner.portalTokenPath
        environment["ERRORS"] = portal.git.directory.appendingPathComponent("erase-errors").path
        environment["REQUEST"] = portal.portalOrigin + "username=U\npassword=token-erase\n"
        let result = try ProcessRunner.run(
            "/bin/sh",
            [
                "-c",
                """
                for i in $(seq 20); do
                    (printf '%s' "$REQUEST" | "$BIN" erase 2>"$ERRORS.$i"; echo "exit=$?") &
                done
                wait
                cat "$ERRORS".* | grep 'portal-token: error' >&2
                rm -f "$ERRORS".*
                """,
            ], environment: environment, timeout: 60)
        let codes = result.stdout.split(separator: "\n").map(String.init)
        #expect(!result.stderr.contains("portal-token: error: keyring"), "\(result.stderr)")
        #expect(codes.count == 20, "\(result.stdout)")
        #expect(codes.allSatisfy { $0 == "exit=0" || $0 == "exit=3" }, "\(codes) \(result.stderr)")
        #expect(
            portal.hookRuns.filter { !$0.hasPrefix("hook read stdin") } == ["unauthorized U \(portal.environmentID)"])
        #expect(try portal.git.portalToken(["get"]).exitCode == 1)
    }

    @Test("status past the 7-day cap says the session has ended and exits 1, without running the hook")
    func statusPastTheCap() throws {
        let portal = try PortalHarness(backend: .auto)
        #expect(try portal.adopt(token: "token-cap", endUserID: "U").exitCode == 0)
        let status = try portal.portalToken(["status"], clockShift: 8 * 24 * 3600)
        #expect(status.exitCode == 1, "\(status.stderr)")
        #expect(status.stdout.hasPrefix("the session of U has ended: it passed its 7-day cap\n"), "\(status.stdout)")
        let json = try portal.portalToken(["status", "--format", "json"], clockShift: 8 * 24 * 3600)
        #expect(json.exitCode == 1)
        #expect(json.stdout.contains("\"signedIn\":false") && json.stdout.contains("\"ended\":true"), "\(json.stdout)")
        #expect(portal.hookRuns.isEmpty)
        #expect(portal.server.requests.isEmpty)
        // Within the cap, past the idle window: still signed in, and the next use asks Portal.
        let idle = try portal.portalToken(["status"], clockShift: 25 * 3600)
        #expect(idle.exitCode == 0)
        #expect(
            idle.stdout.hasPrefix("signed in as U (idle past expires-at: the next use asks Portal)\n"), "\(idle.stdout)"
        )
    }

    @Test("a file left from a fallback is named by status, and migrate merges it into the keyring with nothing lost")
    func migrateFileIntoKeyring() throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        let environment = world(keyring)
        var file = environment
        file["PORTAL_TOKEN_BACKEND"] = "file"
        func run(_ arguments: [String], _ input: String = "", _ environment: [String: String]) throws -> ProcessResult {
            try ProcessRunner.portalToken(arguments, stdin: input, environment: environment)
        }
        // The file, from a time without a keyring: two credentials and a session.
        #expect(
            try run(["store"], "protocol=https\nhost=a.tld\nusername=u\npassword=from-file-a\n", file).exitCode == 0)
        #expect(
            try run(["store"], "protocol=https\nhost=b.tld\nusername=u\npassword=from-file-b\n", file).exitCode == 0)
        #expect(try run(["store"], portalOrigin + "username=U\npassword=token-file\n", file).exitCode == 0)
        // The keyring, since: a newer password for a.tld.
        #expect(
            try run(["store"], "protocol=https\nhost=a.tld\nusername=u\npassword=from-keyring-a\n", environment)
                .exitCode == 0)

        // auto uses the keyring alone, and status says the file also holds items.
        #expect(try run(["get"], "protocol=https\nhost=b.tld\n", environment).stdout.isEmpty)
        let before = try run(["status"], "", environment)
        #expect(before.exitCode == 1)
        #expect(
            before.stdout.contains(
                """
                backend:      secret-service on gnome-keyring (a Secret Service provider is registered on the \
                session bus)
                """))
        #expect(
            before.stdout.contains(
                """
                note:         the encrypted file store at \(storePath(keyring)) also holds items; 'portal-token \
                migrate --to secret-service' merges them
                """
            ),
            "\(before.stdout)")

        // doctor makes the same decision and says the same about the other store.
        let doctor = try run(["doctor"], "", environment)
        #expect(
            doctor.stdout.contains(
                "ok      backend: secret-service (a Secret Service provider is registered on the session bus)"),
            "\(doctor.stdout)")
        #expect(
            doctor.stdout.contains(
                """
                problem second store: the encrypted file store at \(storePath(keyring)) also holds items; \
                'portal-token migrate --to secret-service' merges them
                """
            ),
            "\(doctor.stdout)")

        let migrated = try run(["migrate", "--to", "secret-service"], "", environment)
        #expect(migrated.exitCode == 0, "\(migrated.stderr)")
        #expect(migrated.stdout.isEmpty)
        #expect(
            migrated.stderr.hasPrefix(
                """
                portal-token: moved 2 items to the secret-service store (kept 1 newer one already there); moved \
                the encrypted file aside to \(storePath(keyring)).migrated-
                """
            ),
            "\(migrated.stderr)")

        #expect(
            try run(["get"], "protocol=https\nhost=a.tld\n", environment).stdout
                == "username=u\npassword=from-keyring-a\n")
        #expect(
            try run(["get"], "protocol=https\nhost=b.tld\n", environment).stdout == "username=u\npassword=from-file-b\n"
        )
        #expect(try run(["get"], "", environment).stdout == "token-file\n")
        #expect(!FileManager.default.fileExists(atPath: storePath(keyring)))
        let aside = try FileManager.default.contentsOfDirectory(
            atPath: (storePath(keyring) as NSString).deletingLastPathComponent)
        #expect(aside.contains { $0.hasPrefix("store.migrated-") }, "\(aside)")
        let after = try run(["status"], "", environment)
        #expect(after.exitCode == 0 && !after.stdout.contains("note:"), "\(after.stdout)")
        let again = try run(["migrate", "--to", "secret-service"], "", environment)
        #expect(again.exitCode == 0 && again.stderr.contains("nothing to migrate"), "\(again.stderr)")
    }

    @Test("migrate --to file moves the keyring's items into the file, deleting them only once written")
    func migrateKeyringIntoFile() throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        let environment = world(keyring)
        #expect(
            try ProcessRunner.portalToken(
                ["store"], stdin: "protocol=https\nhost=k.tld\nusername=u\npassword=from-keyring\n",
                environment: environment
            ).exitCode == 0)
        var file = environment
        file["PORTAL_TOKEN_BACKEND"] = "file"
        // The file is chosen and the keyring also holds items: status and doctor both say so.
        let note = "the Secret Service also holds items; 'portal-token migrate --to file' merges them"
        let status = try ProcessRunner.portalToken(["status"], environment: file)
        #expect(status.stdout.contains("note:         \(note)"), "\(status.stdout)")
        let doctor = try ProcessRunner.portalToken(["doctor"], environment: file)
        #expect(doctor.stdout.contains("problem second store: \(note)"), "\(doctor.stdout)")
        let migrated = try ProcessRunner.portalToken(["migrate", "--to", "file"], environment: file)
        #expect(migrated.exitCode == 0, "\(migrated.stderr)")
        #expect(
            migrated.stderr.contains(
                "portal-token: moved 1 item to the file store; deleted 1 item from the Secret Service"),
            "\(migrated.stderr)")
        #expect(
            try ProcessRunner.portalToken(["get"], stdin: "protocol=https\nhost=k.tld\n", environment: file).stdout
                == "username=u\npassword=from-keyring\n")
        #expect(
            try ProcessRunner.portalToken(["get"], stdin: "protocol=https\nhost=k.tld\n", environment: environment)
                .stdout.isEmpty)
        #expect(!(try ProcessRunner.portalToken(["doctor"], environment: file)).stdout.contains("second store"))
    }

    @Test("migrate --to file removes from the keyring the older copy of a slot the file keeps with another secret")
    func migrateLeavesOneCopyOfEachSlot() throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        let environment = world(keyring)
        // The file's writes are 2 s ahead by the wall clock, so the file holds its two slots newer
        // however the writes fall across a second boundary (each store's times have whole seconds).
        let file = try fileBackend(environment, clockShift: 2)
        func store(_ host: String, _ password: String, _ environment: [String: String]) throws {
            let result = try ProcessRunner.portalToken(
                ["store"], stdin: "protocol=https\nhost=\(host)\nusername=u\npassword=\(password)\n",
                environment: environment)
            #expect(result.exitCode == 0, "\(result.stderr)")
        }
        // The keyring's first, so the file holds each shared slot as new or newer whatever second
        // each store falls in.
        try store("same.tld", "same-secret", environment)
        try store("same.tld", "same-secret", file)
        try store("differs.tld", "keyring-secret", environment)
        try store("differs.tld", "file-secret", file)
        try store("only-keyring.tld", "moved-secret", environment)

        let migrated = try ProcessRunner.portalToken(["migrate", "--to", "file"], environment: file)
        #expect(migrated.exitCode == 0, "\(migrated.stderr)")
        #expect(
            migrated.stderr.contains(
                "moved 1 item to the file store (kept 2 newer ones already there); "
                    + "deleted 3 items from the Secret Service"),
            "\(migrated.stderr)")
        func get(_ host: String, _ environment: [String: String]) throws -> String {
            try ProcessRunner.portalToken(["get"], stdin: "protocol=https\nhost=\(host)\n", environment: environment)
                .stdout
        }
        #expect(try get("differs.tld", file) == "username=u\npassword=file-secret\n")
        #expect(try get("only-keyring.tld", file) == "username=u\npassword=moved-secret\n")
        // One copy of each slot remains, the newest: the keyring's older one is gone too.
        #expect(try get("differs.tld", environment).isEmpty)
        #expect(try get("same.tld", environment).isEmpty)
        #expect(try get("only-keyring.tld", environment).isEmpty)
    }

    @Test(
        """
        migrate --to file under auto with a keyring present makes the file the default: a new shell's list, get and \
        status find the items where they went
        """)
    func migrateMakesTheDestinationTheDefault() throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        var environment = world(keyring)
        environment["PORTAL_TOKEN_BACKEND"] = nil
        environment["PORTAL_TOKEN_PASSPHRASE"] = "migrate passphrase"
        let stored = try ProcessRunner.portalToken(
            ["store"], stdin: "protocol=https\nhost=moved.tld\nusername=u\npassword=moved-secret\n",
            environment: environment)
        #expect(stored.exitCode == 0, "\(stored.stderr)")
        let migrated = try ProcessRunner.portalToken(["migrate", "--to", "file"], environment: environment)
        #expect(migrated.exitCode == 0, "\(migrated.stderr)")
        let config = keyring.directory.appendingPathComponent("config/portal-token/config").path
        #expect(
            migrated.stderr.contains(
                "portal-token: the file store is the default now (backend = file in \(config))"), "\(migrated.stderr)")
        #expect(try String(contentsOfFile: config, encoding: .utf8) == "backend = file\n")
        // A new shell, with the keyring still registered: the file is in use.
        let get = try ProcessRunner.portalToken(
            ["get"], stdin: "protocol=https\nhost=moved.tld\n", environment: environment)
        #expect(get.stdout == "username=u\npassword=moved-secret\n", "\(get.stderr)")
        let list = try ProcessRunner.portalToken(["list"], environment: environment)
        #expect(list.stdout.contains("moved.tld"), "\(list.stdout)")
        let status = try ProcessRunner.portalToken(["status"], environment: environment)
        #expect(status.stdout.contains("chosen by backend in \(config)"), "\(status.stdout)")
        #expect(!status.stdout.contains("migrate --to"), "no note suggests moving back: \(status.stdout)")
        // Back again: the keyring is what auto picks, so the setting is rewritten to it.
        let back = try ProcessRunner.portalToken(["migrate", "--to", "secret-service"], environment: environment)
        #expect(back.exitCode == 0, "\(back.stderr)")
        #expect(try String(contentsOfFile: config, encoding: .utf8) == "backend = secret-service\n")
        // A variable naming another store is not overridden, and migrate says so.
        environment["PORTAL_TOKEN_BACKEND"] = "secret-service"
        let pinned = try ProcessRunner.portalToken(["migrate", "--to", "file"], environment: environment)
        #expect(pinned.exitCode == 0, "\(pinned.stderr)")
        #expect(
            pinned.stderr.contains("warning: PORTAL_TOKEN_BACKEND still chooses the secret-service store"),
            "\(pinned.stderr)")
    }

    @Test(
        """
        migrate keeps the newer of two secrets for one slot, whichever store holds it, and leaves exactly one item
        """,
        arguments: [true, false])
    func migrateNewerWins(fileIsNewer: Bool) throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        let environment = world(keyring)
        // The file's write happens 2 s after the keyring's, or 10 s before it, by the wall clock.
        let file = try fileBackend(environment, clockShift: fileIsNewer ? 2 : -10)
        func store(_ password: String, _ environment: [String: String]) throws {
            let result = try ProcessRunner.portalToken(
                ["store"], stdin: "protocol=https\nhost=slot.tld\nusername=u\npassword=\(password)\n",
                environment: environment)
            #expect(result.exitCode == 0, "\(result.stderr)")
        }
        if fileIsNewer {
            try store("older-keyring", environment)
            try store("newer-file", file)
        } else {
            try store("older-file", file)
            try store("newer-keyring", environment)
        }
        let newer = fileIsNewer ? "newer-file" : "newer-keyring"
        let destination = fileIsNewer ? environment : file
        let migrated = try ProcessRunner.portalToken(
            ["migrate", "--to", fileIsNewer ? "secret-service" : "file"], environment: destination)
        #expect(migrated.exitCode == 0, "\(migrated.stderr)")
        let got = try ProcessRunner.portalToken(
            ["get"], stdin: "protocol=https\nhost=slot.tld\n", environment: destination)
        #expect(got.stdout == "username=u\npassword=\(newer)\n", "\(got.stdout)")
        // Exactly one item holds the slot in the destination.
        let listed = try ProcessRunner.portalToken(["list"], environment: destination)
        #expect(listed.stdout.components(separatedBy: "slot.tld").count - 1 == 1, "\(listed.stdout)")
        if fileIsNewer {
            let search = try LibsecretClient.run(
                "/usr/bin/secret-tool", ["search", "--all", "server", "slot.tld"], environment: environment,
                timeout: 10)
            let labels = (search.stdout + search.stderr).split(separator: "\n").filter { $0.hasPrefix("label = ") }
            #expect(labels.count == 1, "\(search.stdout)")
        }
    }
}

@Suite("auto backend, start-up")
struct AutoBackendStartupTests {
    @Test("no D-Bus library is linked or loaded: portal-token speaks to the session bus itself")
    func noBusLibrary() throws {
        let binary = try #require(
            ProcessInfo.processInfo.environment["PORTAL_TOKEN_RELEASE_BIN"],
            "PORTAL_TOKEN_RELEASE_BIN is not set: run the suite through contrib/test.sh")
        let dynamic = try ProcessRunner.run("/usr/bin/readelf", ["--dynamic", binary], timeout: 30)
        #expect(dynamic.stdout.contains("(NEEDED)"))
        for library in ["libsystemd", "libdbus"] {
            #expect(!dynamic.stdout.contains(library), "\(dynamic.stdout)")
        }
        // `auto` asks the bus (this suite runs on one), and maps no library for it.
        let traced = ProcessRunner.environment([
            "LD_DEBUG": "files", "PORTAL_TOKEN_BACKEND": "auto",
            "PORTAL_AUTH_ENVIRONMENT_ID": "bus-library-environment",
        ])
        let status = try ProcessRunner.run(binary, ["status"], environment: traced)
        #expect(status.stdout.contains("secret-service"), "\(status.stdout)\(status.stderr)")
        #expect(status.stderr.contains("file=libc.so.6"), "LD_DEBUG traced nothing: \(status.stderr)")
        for library in ["libsystemd", "libdbus"] {
            #expect(!status.stderr.contains(library), "\(library) loaded by status under auto")
        }
    }

    @Test("with no bus address and no bus socket, auto chooses the file")
    func noBusLoadsNoLibsystemd() throws {
        let binary = try #require(
            ProcessInfo.processInfo.environment["PORTAL_TOKEN_RELEASE_BIN"],
            "PORTAL_TOKEN_RELEASE_BIN is not set: run the suite through contrib/test.sh")
        let scratch = try ScratchFolder("auto-no-bus")
        var environment = ProcessRunner.environment([
            "LD_DEBUG": "files", "HOME": scratch.path, "XDG_CONFIG_HOME": scratch.path + "/config",
            "XDG_DATA_HOME": scratch.path + "/data", "XDG_RUNTIME_DIR": scratch.path,
            "DBUS_SESSION_BUS_ADDRESS": nil, "DISPLAY": nil, "PORTAL_TOKEN_BACKEND": nil,
            "PORTAL_AUTH_ENVIRONMENT_ID": "no-bus-environment",
        ])
        environment["PORTAL_TOKEN_PASSPHRASE"] = "no-bus passphrase"
        let status = try ProcessRunner.run(binary, ["status"], environment: environment)
        #expect(status.stdout.contains("file (there is no D-Bus session bus)"), "\(status.stdout)\(status.stderr)")
        #expect(status.stderr.contains("file=libc.so.6"), "LD_DEBUG traced nothing: \(status.stderr)")
        #expect(!status.stderr.contains("libsystemd"), "\(status.stderr)")
    }
}
