import Foundation
import PortalTokenTestSupport
import Testing

/// A user's world with no D-Bus at all: a throwaway HOME, no session bus, and a passphrase file.
/// Every run drives the built portal-token binary, as git would.
final class FileBackendWorld: Sendable {
    let home: String
    let passphrase: String
    let passphraseFile: String
    let extra: [String: String]

    init(
        passphrase: String = "correct horse \(UUID().uuidString)", keyCacheTimeout: Int = 0,
        extra: [String: String] = [:]
    ) throws {
        home =
            FileManager.default.temporaryDirectory.appendingPathComponent("portal-token-cli-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        self.passphrase = passphrase
        passphraseFile = home + "/passphrase"
        try (passphrase + "\n").write(toFile: passphraseFile, atomically: false, encoding: .utf8)
        // As a user keeps it: a passphrase file others may read draws a warning.
        chmod(passphraseFile, 0o600)
        var extra = extra
        extra["PORTAL_TOKEN_KEY_CACHE_TIMEOUT"] = extra["PORTAL_TOKEN_KEY_CACHE_TIMEOUT"] ?? String(keyCacheTimeout)
        self.extra = extra
    }

    deinit { try? FileManager.default.removeItem(atPath: home) }

    var storePath: String { home + "/.local/share/portal-token/store" }

    func environment(_ changes: [String: String?] = [:]) -> [String: String] {
        var base: [String: String?] = [
            "HOME": home, "DBUS_SESSION_BUS_ADDRESS": nil, "DISPLAY": nil, "WAYLAND_DISPLAY": nil,
            "XDG_RUNTIME_DIR": nil, "XDG_DATA_HOME": nil, "XDG_CONFIG_HOME": nil, "CREDENTIALS_DIRECTORY": nil,
            "PORTAL_TOKEN_BACKEND": nil, "PORTAL_TOKEN_FILE": nil, "PORTAL_TOKEN_PASSPHRASE": nil,
            "PORTAL_TOKEN_CONFIG": nil, "PORTAL_TOKEN_TRACE": nil,
            "PORTAL_TOKEN_PASSPHRASE_FILE": passphraseFile,
        ]
        for (name, value) in extra { base[name] = value }
        for (name, value) in changes { base[name] = value }
        return ProcessRunner.environment(base)
    }

    @discardableResult
    func run(_ arguments: [String], _ input: String = "", _ changes: [String: String?] = [:]) throws -> ProcessResult {
        try ProcessRunner.portalToken(arguments, stdin: input, environment: environment(changes))
    }

    func storeBytes() throws -> Data { try Data(contentsOf: URL(fileURLWithPath: storePath)) }

    func storeDirectoryListing() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: (storePath as NSString).deletingLastPathComponent).sorted()
    }
}

func request(_ host: String, user: String? = nil, password: String? = nil) -> String {
    var lines = ["protocol=https", "host=\(host)"]
    if let user { lines.append("username=\(user)") }
    if let password { lines.append("password=\(password)") }
    return lines.joined(separator: "\n") + "\n\n"
}

@Suite("file backend, as a user without a keyring meets it")
struct FileBackendTests {
    static let fallbackLine = "portal-token: using the encrypted file store: there is no D-Bus session bus\n"

    @Test("with no D-Bus at all, auto uses the file; only the store that creates it says so, once")
    func autoFallsBackWithoutDBus() throws {
        let world = try FileBackendWorld()
        let before = try world.run(["get"], request("example.com"))
        #expect(before.exitCode == 0 && before.stdout.isEmpty && before.stderr.isEmpty, "\(before.stderr)")
        #expect(!FileManager.default.fileExists(atPath: world.storePath))
        let stored = try world.run(["store"], request("example.com", user: "alice", password: "s3cret"))
        #expect(stored.exitCode == 0)
        #expect(stored.stderr == Self.fallbackLine, "\(stored.stderr)")
        #expect(stored.stdout.isEmpty)
        let got = try world.run(["get"], request("example.com"))
        #expect(got.exitCode == 0)
        #expect(got.stdout == "username=alice\npassword=s3cret\n")
        #expect(got.stderr.isEmpty, "\(got.stderr)")
        let again = try world.run(["store"], request("example.com", user: "bob", password: "other"))
        #expect(again.exitCode == 0 && again.stderr.isEmpty, "\(again.stderr)")
        #expect(got.duration < 1.5, "auto must give up on a missing bus quickly")
        #expect(FileManager.default.fileExists(atPath: world.storePath))
    }

    @Test(
        "a forced file backend is used without a word on stderr",
        arguments: [
            (["--backend", "file"], [String: String]()),
            ([], ["PORTAL_TOKEN_BACKEND": "file"]),
        ])
    func forcedFile(flags: [String], environment: [String: String]) throws {
        let world = try FileBackendWorld(extra: environment)
        let stored = try world.run(flags + ["store"], request("example.com", user: "alice", password: "pw"))
        #expect(stored.exitCode == 0 && stored.stderr.isEmpty, "\(stored.stderr)")
        let got = try world.run(["get"] + flags, request("example.com"))
        #expect(got.stdout == "username=alice\npassword=pw\n" && got.stderr.isEmpty)
    }

    @Test("PORTAL_TOKEN_FILE places the store, creating its directory 0700 and the file 0600")
    func storeFileSetting() throws {
        let world = try FileBackendWorld()
        let path = world.home + "/elsewhere/deeper/credentials.store"
        let stored = try world.run(
            ["store", "--backend=file"], request("example.com", user: "u", password: "p"),
            ["PORTAL_TOKEN_FILE": path])
        #expect(stored.exitCode == 0, "\(stored.stderr)")
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let directory = try FileManager.default.attributesOfItem(atPath: world.home + "/elsewhere/deeper")
        #expect((directory[.posixPermissions] as? NSNumber)?.intValue == 0o700)
        #expect(!FileManager.default.fileExists(atPath: world.storePath))
    }

    /// With `ownRuntimeDirectories`, each process has an XDG_RUNTIME_DIR of its own (as a
    /// container given the host's data directory has): the file's lock is the one they share,
    /// and no lock is made anywhere else.
    @Test(
        "concurrent store processes of distinct credentials leave every one readable, whatever their runtime directory",
        arguments: [false, true])
    func concurrentStores(ownRuntimeDirectories: Bool) throws {
        let world = try FileBackendWorld(keyCacheTimeout: 120)
        // 64 in one runtime directory; 16 with their own, enough to share the lock and light
        // enough to leave the keyring daemons of suites running beside it their time.
        let count = ownRuntimeDirectories ? 16 : 64
        let scratch = world.home + "/inputs"
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        var processes: [(Process, String)] = []
        for index in 0..<count {
            let input = "\(scratch)/\(index)"
            try request("host-\(index).example", user: "user-\(index)", password: "password-\(index)")
                .write(toFile: input, atomically: false, encoding: .utf8)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: ProcessRunner.portalTokenPath)
            process.arguments = ["store", "--backend", "file"]
            let runtime = "\(scratch)/run-\(index)"
            if ownRuntimeDirectories { #expect(mkdir(runtime, 0o700) == 0) }
            process.environment = world.environment(ownRuntimeDirectories ? ["XDG_RUNTIME_DIR": runtime] : [:])
            process.standardInput = FileHandle(forReadingAtPath: input)
            let errorPath = "\(scratch)/\(index).err"
            _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
            process.standardError = FileHandle(forWritingAtPath: errorPath)
            process.standardOutput = FileHandle.nullDevice
            processes.append((process, errorPath))
        }
        for (process, _) in processes { try process.run() }
        for (index, (process, errorPath)) in processes.enumerated() {
            process.waitUntilExit()
            let stderr = (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? ""
            #expect(process.terminationStatus == 0, "store \(index) failed: \(stderr)")
        }
        for index in 0..<count {
            let got = try world.run(["get", "--backend", "file"], request("host-\(index).example"))
            #expect(
                got.stdout == "username=user-\(index)\npassword=password-\(index)\n",
                "credential \(index): \(got.stderr)")
            if ownRuntimeDirectories {
                let made = try FileManager.default.contentsOfDirectory(atPath: "\(scratch)/run-\(index)")
                #expect(made.isEmpty, "a store made \(made) in its runtime directory")
            }
        }
        #expect(try world.storeDirectoryListing() == ["store", "store.lock"])
        #expect(!FileManager.default.fileExists(atPath: world.home + "/.local/state/portal-token/sessions.lock"))
    }

    @Test("a writer killed with SIGKILL at any moment leaves the old file or the new one, never a torn one")
    func killedWriter() throws {
        let world = try FileBackendWorld(keyCacheTimeout: 120)
        // A large entry makes each write long enough for kills to land inside it.
        let bulky = String(repeating: "b", count: 400_000)
        #expect(
            try world.run(["store", "--backend", "file"], request("base.example", user: "base", password: bulky))
                .exitCode == 0)
        var generator = SystemRandomNumberGenerator()
        var landed = 0
        for round in 0..<30 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: ProcessRunner.portalTokenPath)
            process.arguments = ["store", "--backend", "file"]
            process.environment = world.environment()
            let input = Pipe()
            process.standardInput = input
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            try input.fileHandleForWriting.write(
                contentsOf: Data(request("round.example", user: "round", password: "password-\(round)").utf8))
            try input.fileHandleForWriting.close()
            usleep(UInt32.random(in: 0...25_000, using: &generator))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            if process.terminationReason == .uncaughtSignal { landed += 1 }

            let base = try world.run(["get", "--backend", "file"], request("base.example"))
            #expect(
                base.exitCode == 0 && base.stdout == "username=base\npassword=\(bulky)\n",
                "round \(round): \(base.stderr)")
            let latest = try world.run(["get", "--backend", "file"], request("round.example"))
            #expect(latest.exitCode == 0 && latest.stderr.isEmpty, "round \(round): \(latest.stderr)")
            #expect(
                latest.stdout.isEmpty || latest.stdout.hasPrefix("username=round\npassword=password-"),
                "round \(round)")
            #expect(try !world.storeDirectoryListing().contains { $0.contains("damaged") }, "round \(round)")
        }
        #expect(landed > 0, "no kill landed while the writer ran")
    }

    @Test("a full disk fails the write with exit 4 and leaves the previous file intact")
    func diskFull() throws {
        let world = try FileBackendWorld(keyCacheTimeout: 0)
        let mountPoint = world.home + "/small"
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        let binary = ProcessRunner.portalTokenPath
        let script = """
            set -u
            BIG=$(head -c 200000 /dev/zero | tr '\\0' x)
            mount -t tmpfs -o size=256k,mode=0700 tmpfs "$SMALL" || exit 90
            export PORTAL_TOKEN_FILE="$SMALL/store"
            printf 'protocol=https\\nhost=example.com\\nusername=alice\\npassword=first\\n\\n' | "$BIN" store \
            --backend file || exit 91
            cp "$SMALL/store" "$SMALL/../before"
            dd if=/dev/zero of="$SMALL/filler" bs=4096 2>/dev/null
            printf 'protocol=https\\nhost=example.com\\nusername=bob\\npassword=%s\\n\\n' "$BIG" | "$BIN" store \
            --backend file
            echo "store-exit=$?"
            cmp -s "$SMALL/store" "$SMALL/../before" && echo "file-intact"
            ls -A "$SMALL" | tr '\\n' ' '; echo
            printf 'protocol=https\\nhost=example.com\\nusername=alice\\n\\n' | "$BIN" get --backend file
            """
        let result = try ProcessRunner.run(
            "/usr/bin/unshare", ["-m", "sh", "-c", script],
            environment: world.environment(["SMALL": mountPoint, "BIN": binary]),
            timeout: 60)
        #expect(result.exitCode == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("store-exit=4\n"), "\(result.stdout)")
        #expect(result.stdout.contains("file-intact\n"), "\(result.stdout)")
        #expect(result.stdout.contains("filler store store.lock \n"), "a temporary file was left: \(result.stdout)")
        #expect(result.stdout.hasSuffix("username=alice\npassword=first\n"), "\(result.stdout)")
        #expect(
            result.stderr.contains(
                """
                portal-token: error: cannot write the store file \(mountPoint)/store: No space left on device\n\
                hint: free some space
                """
            ),
            "\(result.stderr)")
    }

    @Test("a wrong passphrase gives exit 4 and leaves the file byte-identical")
    func wrongPassphrase() throws {
        let world = try FileBackendWorld(keyCacheTimeout: 0)
        #expect(
            try world.run(["store", "--backend", "file"], request("example.com", user: "alice", password: "pw"))
                .exitCode == 0)
        let before = try world.storeBytes()
        for command in ["get", "store", "erase"] {
            let result = try world.run(
                [command, "--backend", "file"], request("example.com", user: "alice", password: "other"),
                ["PORTAL_TOKEN_PASSPHRASE_FILE": nil, "PORTAL_TOKEN_PASSPHRASE": "wrong wrong"])
            #expect(result.exitCode == 4, "\(command)")
            #expect(
                result.stderr == """
                    portal-token: error: wrong passphrase for the store file \(world.storePath)
                    hint: check the passphrase in PORTAL_TOKEN_PASSPHRASE; the file was left as it is

                    """, "\(command)")
            #expect(result.stdout.isEmpty)
        }
        #expect(try world.storeBytes() == before)
        #expect(try world.storeDirectoryListing() == ["store", "store.lock"])
    }

    @Test("a damaged file is moved aside with a warning, and read as empty")
    func damagedFile() throws {
        let world = try FileBackendWorld()
        #expect(
            try world.run(["store", "--backend", "file"], request("example.com", user: "alice", password: "pw"))
                .exitCode == 0)
        var bytes = try world.storeBytes()
        bytes[bytes.count - 3] ^= 0x10
        try bytes.write(to: URL(fileURLWithPath: world.storePath))
        let got = try world.run(["get", "--backend", "file"], request("example.com"))
        #expect(got.exitCode == 0)
        #expect(got.stdout.isEmpty)
        let listing = try world.storeDirectoryListing()
        let aside = try #require(listing.first { $0.hasPrefix("store.damaged-") })
        #expect(
            got.stderr
                == """
                portal-token: warning: the store file \(world.storePath) could not be read (its contents failed \
                authentication); moved it aside to \(world.storePath)\
                .damaged-\(aside.dropFirst("store.damaged-".count)) and started an empty store\n
                """
        )
        #expect(try Data(contentsOf: URL(fileURLWithPath: world.storePath + aside.dropFirst("store".count))) == bytes)
    }

    @Test("a store file others can read is refused with exit 4 and a hint")
    func badPermissions() throws {
        let world = try FileBackendWorld()
        #expect(
            try world.run(["store", "--backend", "file"], request("example.com", user: "alice", password: "pw"))
                .exitCode == 0)
        chmod(world.storePath, 0o644)
        let got = try world.run(["get", "--backend", "file"], request("example.com"))
        #expect(got.exitCode == 4)
        #expect(got.stdout.isEmpty)
        #expect(
            got.stderr == """
                portal-token: error: the store file \(world.storePath) is open to other users (mode 644)
                hint: if only you have used it, restrict it with 'chmod 600 \(world.storePath)' and try again

                """)
    }

    @Test("with no passphrase source and no terminal, exit 4 and a hint that lists the sources")
    func noPassphrase() throws {
        let world = try FileBackendWorld()
        let result = try world.run(
            ["store", "--backend", "file"], request("example.com", user: "alice", password: "pw"),
            ["PORTAL_TOKEN_PASSPHRASE_FILE": nil])
        #expect(result.exitCode == 4)
        #expect(
            result.stderr == """
                portal-token: error: no passphrase for the encrypted file store \(world.storePath)
                hint: set PORTAL_TOKEN_PASSPHRASE_FILE to a file holding it (or passphrase-file in the config file), \
                or PORTAL_TOKEN_PASSPHRASE, or pass the systemd credential portal-token.passphrase, or run \
                portal-token in a terminal to be asked

                """)
        #expect(!FileManager.default.fileExists(atPath: world.storePath))
    }

    @Test("a missing passphrase file is exit 4 naming the file, not a silent fall-through")
    func missingPassphraseFile() throws {
        let world = try FileBackendWorld()
        let result = try world.run(
            ["store", "--backend", "file"], request("example.com", user: "alice", password: "pw"),
            ["PORTAL_TOKEN_PASSPHRASE_FILE": world.home + "/nope", "PORTAL_TOKEN_PASSPHRASE": "fallback"])
        #expect(result.exitCode == 4)
        #expect(
            result.stderr.hasPrefix(
                """
                portal-token: error: cannot read the passphrase from PORTAL_TOKEN_PASSPHRASE_FILE (\(world.home)\
                /nope): No such file or directory\n
                """
            ))
    }

    @Test("the passphrase sources are tried in order, and a file's trailing newline is not part of it")
    func sourceOrder() throws {
        let world = try FileBackendWorld(keyCacheTimeout: 0)
        #expect(
            try world.run(["store", "--backend", "file"], request("example.com", user: "alice", password: "pw"))
                .exitCode == 0)
        let expected = "username=alice\npassword=pw\n"
        // The file wins over the variable.
        #expect(
            try world.run(["get", "--backend", "file"], request("example.com"), ["PORTAL_TOKEN_PASSPHRASE": "wrong"])
                .stdout == expected)
        // The variable, which holds the passphrase without the file's newline.
        #expect(
            try world.run(
                ["get", "--backend", "file"], request("example.com"),
                ["PORTAL_TOKEN_PASSPHRASE_FILE": nil, "PORTAL_TOKEN_PASSPHRASE": world.passphrase]
            ).stdout == expected)
        // The variable wins over the systemd credential.
        let credentials = world.home + "/credentials"
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
        try (world.passphrase + "\r\n").write(
            toFile: credentials + "/portal-token.passphrase", atomically: false, encoding: .utf8)
        #expect(
            try world.run(
                ["get", "--backend", "file"], request("example.com"),
                [
                    "PORTAL_TOKEN_PASSPHRASE_FILE": nil, "PORTAL_TOKEN_PASSPHRASE": "wrong",
                    "CREDENTIALS_DIRECTORY": credentials,
                ]
            ).exitCode == 4)
        // The systemd credential alone, CRLF and all.
        #expect(
            try world.run(
                ["get", "--backend", "file"], request("example.com"),
                ["PORTAL_TOKEN_PASSPHRASE_FILE": nil, "CREDENTIALS_DIRECTORY": credentials]
            ).stdout == expected)
        // The config file's passphrase-file.
        let config = world.home + "/config"
        try "passphrase-file = \(world.passphraseFile)\n".write(toFile: config, atomically: false, encoding: .utf8)
        #expect(
            try world.run(
                ["get", "--backend", "file"], request("example.com"),
                ["PORTAL_TOKEN_PASSPHRASE_FILE": nil, "PORTAL_TOKEN_CONFIG": config]
            ).stdout == expected)
    }

    @Test("the passphrase never appears in any output, even in errors and traces")
    func passphraseCanary() throws {
        let canary = "canary-\(UUID().uuidString)"
        let world = try FileBackendWorld(passphrase: canary, keyCacheTimeout: 0)
        let wrongCanary = "wrong-canary-\(UUID().uuidString)"
        let wrongFile = world.home + "/wrong"
        try wrongCanary.write(toFile: wrongFile, atomically: false, encoding: .utf8)
        var outputs: [ProcessResult] = []
        for flags in [[], ["--verbose"]] {
            outputs.append(try world.run(flags + ["store"], request("example.com", user: "alice", password: "pw")))
            outputs.append(try world.run(flags + ["get"], request("example.com")))
            outputs.append(
                try world.run(flags + ["get"], request("example.com"), ["PORTAL_TOKEN_PASSPHRASE_FILE": wrongFile]))
            outputs.append(
                try world.run(
                    flags + ["get"], request("example.com"),
                    ["PORTAL_TOKEN_PASSPHRASE_FILE": nil, "PORTAL_TOKEN_PASSPHRASE": wrongCanary]))
            outputs.append(
                try world.run(
                    flags + ["get"], request("example.com"),
                    ["PORTAL_TOKEN_PASSPHRASE_FILE": nil, "PORTAL_TOKEN_PASSPHRASE": canary, "PORTAL_TOKEN_TRACE": "1"])
            )
            outputs.append(try world.run(flags + ["erase"], request("example.com", user: "alice")))
        }
        #expect(outputs.contains { $0.exitCode == 4 }, "the wrong passphrases were refused")
        for output in outputs {
            for secret in [canary, wrongCanary] {
                #expect(!output.stdout.contains(secret) && !output.stderr.contains(secret))
            }
        }
        let file = try world.storeBytes()
        #expect(file.range(of: Data(canary.utf8)) == nil)
    }

    @Test("a second get within the cache timeout does not need the passphrase again")
    func keyCache() throws {
        let world = try FileBackendWorld(keyCacheTimeout: 120)
        #expect(
            try world.run(["store", "--backend", "file"], request("example.com", user: "alice", password: "pw"))
                .exitCode == 0)
        let wrong = ["PORTAL_TOKEN_PASSPHRASE_FILE": nil, "PORTAL_TOKEN_PASSPHRASE": "not the passphrase"]
        let cached = try world.run(["get", "--backend", "file"], request("example.com"), wrong)
        #expect(cached.exitCode == 0 && cached.stdout == "username=alice\npassword=pw\n", "\(cached.stderr)")
        let names = try KernelKeys.names()
        #expect(names.contains { $0.hasPrefix("portal-token:file-key:") }, "\(names)")
        // With the cache turned off, the key must be derived, and the wrong passphrase fails.
        var uncached = wrong
        uncached["PORTAL_TOKEN_KEY_CACHE_TIMEOUT"] = "0"
        #expect(try world.run(["get", "--backend", "file"], request("example.com"), uncached).exitCode == 4)
    }

    @Test("a key cache timeout that is not a number of seconds is a usage error")
    func badCacheTimeout() throws {
        let world = try FileBackendWorld(extra: ["PORTAL_TOKEN_KEY_CACHE_TIMEOUT": "15m"])
        let result = try world.run(["get", "--backend", "file"], request("example.com"))
        #expect(result.exitCode == 2)
        #expect(
            result.stderr.hasPrefix(
                "portal-token: error: PORTAL_TOKEN_KEY_CACHE_TIMEOUT must be a whole number of seconds"))
    }
}

/// Runs `script` on a private session bus with a real, unlocked gnome-keyring, both stopped
/// with SIGKILL by their PIDs when the script ends, so no process outlives the run. (Children of
/// the test process inherit a mask that blocks SIGTERM, so neither daemon would heed it.)
func runBesideKeyring(_ world: FileBackendWorld, _ script: String) throws -> ProcessResult {
    let runtime = world.home + "/run"
    try FileManager.default.createDirectory(
        atPath: runtime, withIntermediateDirectories: true,
        attributes: [.posixPermissions: 0o700])
    let wrapper = """
        dbus-daemon --session --fork --print-address=3 --print-pid=4 3>"$XDG_RUNTIME_DIR/bus-address" \
        4>"$XDG_RUNTIME_DIR/bus-pid" 2>/dev/null || exit 96
        BUS=$(cat "$XDG_RUNTIME_DIR/bus-pid")
        DBUS_SESSION_BUS_ADDRESS=$(cat "$XDG_RUNTIME_DIR/bus-address")
        export DBUS_SESSION_BUS_ADDRESS
        printf 'keyring-password' | gnome-keyring-daemon --foreground --unlock --components=secrets >/dev/null 2>&1 &
        KEYRING=$!
        trap 'kill -KILL $KEYRING $BUS 2>/dev/null' EXIT
        gdbus wait --session --timeout 10 org.freedesktop.secrets || exit 97
        \(script)
        """
    return try ProcessRunner.run(
        "/bin/sh", ["-c", wrapper],
        environment: world.environment(["XDG_RUNTIME_DIR": runtime, "BIN": ProcessRunner.portalTokenPath]),
        timeout: 60)
}

@Suite("file backend beside a running keyring")
struct FileBesideKeyringTests {
    @Test("a locked keyring in auto is exit 4, never a switch to the file")
    func lockedKeyring() throws {
        let world = try FileBackendWorld()
        let result = try runBesideKeyring(
            world,
            """
            gdbus call --session --dest org.freedesktop.secrets --object-path /org/freedesktop/secrets \\
                --method org.freedesktop.Secret.Service.Lock "['/org/freedesktop/secrets/collection/login']" >/dev/null
            printf 'protocol=https\\nhost=example.com\\nusername=alice\\npassword=pw\\n\\n' | "$BIN" store
            echo "store-exit=$?"
            """)
        #expect(result.stdout == "store-exit=4\n", "\(result.stdout) \(result.stderr)")
        #expect(result.stderr.contains("portal-token: error: keyring"), "\(result.stderr)")
        #expect(result.stderr.contains("is locked"), "\(result.stderr)")
        #expect(!result.stderr.contains("using the encrypted file store"))
        #expect(!FileManager.default.fileExists(atPath: world.storePath))
    }

    @Test("auto with a keyring uses the keyring alone: a file left from a fallback is never read or written")
    func autoUsesOneStore() throws {
        let world = try FileBackendWorld(keyCacheTimeout: 0)
        #expect(
            try world.run(["store", "--backend", "file"], request("example.com", user: "from-file", password: "f"))
                .exitCode == 0)
        let before = try world.storeBytes()
        let result = try runBesideKeyring(
            world,
            """
            get() { printf 'protocol=https\\nhost=example.com\\n\\n' | "$BIN" get "$@"; echo "get-exit=$?"; }
            get
            printf 'protocol=https\\nhost=example.com\\nusername=from-keyring\\npassword=k\\n\\n' | "$BIN" store
            echo "store-exit=$?"
            get
            get --backend file
            """)
        #expect(result.stderr.isEmpty, "\(result.stderr)")
        #expect(
            result.stdout == """
                get-exit=0
                store-exit=0
                username=from-keyring
                password=k
                get-exit=0
                username=from-file
                password=f
                get-exit=0

                """)
        #expect(try world.storeBytes() == before, "auto wrote to the file")
    }
}
