import Foundation
import Glibc
import PortalTokenTestSupport
import Testing

/// A scratch folder removed when the test ends.
final class ScratchFolder {
    let path: String
    init(_ stem: String) throws {
        path =
            FileManager.default.temporaryDirectory.appendingPathComponent("portal-token-\(stem)-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
    func write(_ name: String, _ text: String) throws {
        try text.write(toFile: "\(path)/\(name)", atomically: true, encoding: .utf8)
    }
    func read(_ name: String) -> String { (try? String(contentsOfFile: "\(path)/\(name)", encoding: .utf8)) ?? "" }
}

/// The absolute path of a program on PATH.
func installedProgram(_ name: String) -> String? {
    for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") + [
        "/usr/bin", "/usr/sbin",
    ] {
        let candidate = "\(directory)/\(name)"
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    return nil
}

@Suite("setup-git")
struct SetupGitTests {
    @Test("setup-git adds portal-token once, keeps other helpers, and --unset removes only its entry")
    func setupGitIsIdempotent() throws {
        let git = try GitHarness(backend: .file)
        let config = git.environment["GIT_CONFIG_GLOBAL"]!
        func helpers() throws -> [String] {
            try ProcessRunner.run(
                "/usr/bin/git", ["config", "--global", "--get-all", "credential.helper"], environment: git.environment
            )
            .stdout.split(separator: "\n").map(String.init)
        }
        #expect(
            try ProcessRunner.run(
                "/usr/bin/git", ["config", "--global", "--add", "credential.helper", "cache --timeout 60"],
                environment: git.environment
            ).exitCode == 0)
        #expect(
            try ProcessRunner.run(
                "/usr/bin/git", ["config", "--global", "--add", "credential.helper", "portal-token --backend file"],
                environment: git.environment
            ).exitCode == 0)
        let first = try git.portalToken(["setup-git"])
        #expect(first.exitCode == 0 && first.stdout.isEmpty)
        #expect(first.stderr.contains("added credential.helper portal-token"))
        #expect(try helpers() == ["cache --timeout 60", "portal-token --backend file", "portal-token"])
        let again = try git.portalToken(["setup-git"])
        #expect(again.exitCode == 0 && again.stderr.contains("nothing changed"))
        #expect(try helpers() == ["cache --timeout 60", "portal-token --backend file", "portal-token"])

        // git now finds portal-token through the global config alone.
        let host = GitHarness.uniqueHost("setup-git")
        let approve = try ProcessRunner.run(
            "/usr/bin/git", ["credential", "approve"],
            stdin: "protocol=https\nhost=\(host)\nusername=u\npassword=p-setup\n", environment: git.environment)
        #expect(approve.exitCode == 0)
        #expect(
            try git.portalToken(["get"], stdin: "protocol=https\nhost=\(host)\n").stdout.contains("password=p-setup"))

        let unset = try git.portalToken(["setup-git", "--unset"])
        #expect(unset.exitCode == 0 && unset.stderr.contains("removed credential.helper portal-token"))
        #expect(try helpers() == ["cache --timeout 60", "portal-token --backend file"])
        let unsetAgain = try git.portalToken(["setup-git", "--unset"])
        #expect(unsetAgain.exitCode == 0 && unsetAgain.stderr.contains("nothing changed"))
        #expect(FileManager.default.fileExists(atPath: config))
    }

    @Test("a plaintext store helper ahead is named by setup-git and by doctor, with how to remove it")
    func plaintextStoreHelper() throws {
        let git = try GitHarness(backend: .file)
        let add = try ProcessRunner.run(
            "/usr/bin/git", ["config", "--global", "--add", "credential.helper", "store"], environment: git.environment)
        #expect(add.exitCode == 0)
        var environment = git.environment
        environment["PORTAL_TOKEN_PASSPHRASE"] = "doctor passphrase"
        let setup = try ProcessRunner.portalToken(["setup-git"], environment: environment)
        #expect(setup.exitCode == 0, "\(setup.stderr)")
        #expect(setup.stderr.contains("warning: credential.helper 'store' keeps every password git approves"))
        #expect(
            setup.stderr.contains("hint: remove it with: git config --global --unset-all credential.helper '^store'"))
        let doctor = try ProcessRunner.portalToken(["doctor", "--format", "json"], environment: environment)
        #expect(doctor.exitCode == 1, "\(doctor.stdout)")
        #expect(doctor.stdout.contains(#""check":"git credential helpers""#), "\(doctor.stdout)")
        #expect(doctor.stdout.contains("'store' keeps every password"), "\(doctor.stdout)")
        // Removed as the hint says, doctor finds portal-token alone.
        let removed = try ProcessRunner.run(
            "/usr/bin/git", ["config", "--global", "--unset-all", "credential.helper", "^store"],
            environment: git.environment)
        #expect(removed.exitCode == 0)
        let clean = try ProcessRunner.portalToken(["doctor"], environment: environment)
        #expect(clean.stdout.contains("ok      git credential helpers: git uses portal-token"), "\(clean.stdout)")
        // An empty value resets the list: a store helper before it is not in effect.
        for value in ["store", "", "portal-token"] {
            _ = try ProcessRunner.run(
                "/usr/bin/git", ["config", "--global", "--add", "credential.helper", value],
                environment: git.environment)
        }
        let reset = try ProcessRunner.portalToken(["doctor"], environment: environment)
        #expect(!reset.stdout.contains("keeps every password"), "\(reset.stdout)")
    }
}

@Suite("--verbose on the script paths")
struct VerboseScriptPathTests {
    @Test("--verbose traces the backend, each store call and where the session came from, and no secret")
    func tracesWithoutSecrets() throws {
        let portal = try PortalHarness(backend: .file)
        let token = "canary-token-\(UUID().uuidString)"
        portal.server.registerLiveToken(token)
        #expect(try portal.adopt(token: token).exitCode == 0)
        let host = GitHarness.uniqueHost("verbose")
        let password = "canary-password-\(UUID().uuidString)"
        #expect(
            try portal.git.portalToken(
                ["store"], stdin: "protocol=https\nhost=\(host)\nusername=u\npassword=\(password)\n"
            )
            .exitCode == 0)
        for (arguments, stdin, output) in [
            (["--verbose", "token"], nil, token + "\n"),
            (["get", "--verbose"], "protocol=https\nhost=\(host)\n", "username=u\npassword=\(password)\n"),
            (["list", "--verbose"], nil, nil),
        ] as [([String], String?, String?)] {
            let result = try portal.git.portalToken(arguments, stdin: stdin)
            #expect(result.exitCode == 0, "\(arguments): \(result.stderr)")
            if let output { #expect(result.stdout == output, "the trace leaves stdout alone: \(arguments)") }
            #expect(result.stderr.contains("portal-token: trace: backend: file ("), "\(arguments): \(result.stderr)")
            // The session may come from its kept copy, with no search; a credential is always searched for.
            let step = arguments.contains("token") ? "session: " : "file store: search: "
            #expect(result.stderr.contains("portal-token: trace: \(step)"), "\(arguments): \(result.stderr)")
            #expect(!result.stderr.contains(token) && !result.stderr.contains(password), "\(arguments)")
        }
        // Without it, nothing is traced.
        #expect(try portal.git.portalToken(["token"]).stderr.isEmpty)
    }
}

@Suite("list")
struct ListTests {
    @Test(
        "list shows every stored Portal session, whichever environment is configured, and never a token",
        arguments: TestBackend.allCases)
    func listShowsEverySession(backend: TestBackend) throws {
        let portal = try PortalHarness(backend: backend)
        let other = "env-other-\(UInt32.random(in: 0...UInt32.max))"
        let tokens = ["canary-token-\(UUID().uuidString)", "canary-token-\(UUID().uuidString)"]
        #expect(try portal.adopt(token: tokens[0], endUserID: "first-user").exitCode == 0)
        var elsewhere = portal.git.environment
        elsewhere["PORTAL_AUTH_ENVIRONMENT_ID"] = other
        let adopted = try ProcessRunner.portalToken(
            ["store"], stdin: portal.portalOrigin + "username=second-user\npassword=\(tokens[1])\n",
            environment: elsewhere)
        #expect(adopted.exitCode == 0, "\(adopted.stderr)")
        defer { _ = try? ProcessRunner.portalToken(["logout"], environment: elsewhere) }

        let text = try portal.git.portalToken(["list"])
        #expect(text.exitCode == 0, "\(text.stderr)")
        #expect(
            text.stdout.contains("session     environment \(portal.environmentID)  end user first-user  expires at "),
            "\(text.stdout)")
        #expect(
            text.stdout.contains("session     environment \(other)  end user second-user  expires at "),
            "\(text.stdout)")
        // With no environment configured at all, the stored sessions are still listed.
        var unconfigured = portal.git.environment
        unconfigured["PORTAL_AUTH_ENVIRONMENT_ID"] = nil
        let json = try ProcessRunner.portalToken(["list", "--format", "json"], environment: unconfigured)
        #expect(json.exitCode == 0, "\(json.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let sessions = try #require(object["sessions"] as? [[String: Any]])
        let listed = Dictionary(
            sessions.compactMap { session in
                (session["authEnvironmentId"] as? String).map { ($0, session["endUserId"] as? String) }
            }, uniquingKeysWith: { first, _ in first })
        #expect(listed[portal.environmentID] == "first-user" && listed[other] == "second-user", "\(json.stdout)")
        #expect(sessions.allSatisfy { ($0["expiresAt"] as? String)?.hasSuffix("Z") == true }, "\(json.stdout)")
        for result in [text, json] {
            for token in tokens { #expect(!result.stdout.contains(token) && !result.stderr.contains(token)) }
        }
    }

    @Test(
        "list shows credentials and the session without any secret, and exits 0 when empty",
        arguments: TestBackend.allCases)
    func listNeverShowsSecrets(backend: TestBackend) throws {
        let portal = try PortalHarness(backend: backend)
        let empty = try portal.git.portalToken(["list", "--format", "json"])
        #expect(empty.exitCode == 0, "\(empty.stderr)")
        if backend == .file {
            #expect(empty.stdout == #"{"credentials":[],"sessions":[]}"# + "\n")
        }
        let host = GitHarness.uniqueHost("list")
        let canaryPassword = "canary-password-\(UUID().uuidString)"
        let canaryRefresh = "canary-refresh-\(UUID().uuidString)"
        let canaryToken = "canary-token-\(UUID().uuidString)"
        #expect(
            try portal.git.portalToken(
                ["store"],
                stdin: "protocol=https\nhost=\(host)\npath=repo.git\nusername=list-user\n"
                    + "password=\(canaryPassword)\noauth_refresh_token=\(canaryRefresh)\n"
            ).exitCode == 0)
        #expect(try portal.adopt(token: canaryToken, endUserID: "list-end-user").exitCode == 0)
        defer { _ = try? portal.git.portalToken(["erase"], stdin: "protocol=https\nhost=\(host)\n") }

        let text = try portal.git.portalToken(["list"])
        #expect(text.exitCode == 0)
        #expect(text.stdout.contains("https://\(host)/repo.git  list-user"))
        #expect(text.stdout.contains("environment \(portal.environmentID)  end user list-end-user  expires at "))
        let json = try portal.git.portalToken(["list", "--format", "json"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let credentials = try #require(object["credentials"] as? [[String: Any]])
        let mine = credentials.first { $0["host"] as? String == host }
        #expect(mine?["protocol"] as? String == "https" && mine?["path"] as? String == "repo.git")
        #expect(mine?["username"] as? String == "list-user")
        let sessions = try #require(object["sessions"] as? [[String: Any]])
        #expect(
            sessions.first { $0["authEnvironmentId"] as? String == portal.environmentID }?["endUserId"] as? String
                == "list-end-user")
        for result in [text, json] {
            for canary in [canaryPassword, canaryRefresh, canaryToken] {
                #expect(!result.stdout.contains(canary) && !result.stderr.contains(canary))
            }
        }
    }
}

/// Serialized: the Docker Hub key is one fixed name, and the keyring-backed cases share the test run's
/// keyring, so two cases at once would erase each other's item.
@Suite("Docker credential-helper protocol", .serialized)
struct DockerHelperTests {
    /// A directory holding `docker-credential-portal-token`, linked to the binary under test.
    static func helperDirectory(_ scratch: ScratchFolder) throws -> String {
        let bin = scratch.path + "/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: bin + "/docker-credential-portal-token",
            withDestinationPath: ProcessRunner.portalTokenPath)
        return bin
    }

    @Test(
        "store, get with and without a scheme, list, erase, then get answers not found", arguments: TestBackend.allCases
    )
    func roundTrip(backend: TestBackend) throws {
        let git = try GitHarness(backend: backend)
        let scratch = try ScratchFolder("docker")
        let helper = try Self.helperDirectory(scratch) + "/docker-credential-portal-token"
        let host = GitHarness.uniqueHost("registry") + ":5000"
        func run(_ operation: String, _ input: String?) throws -> ProcessResult {
            try ProcessRunner.run(helper, [operation], stdin: input, environment: git.environment)
        }
        let store = try run("store", #"{"ServerURL":"https://\#(host)","Username":"reg-user","Secret":"reg-secret"}"#)
        #expect(store.exitCode == 0 && store.stdout.isEmpty, "\(store.stdout)\(store.stderr)")
        for serverURL in ["https://\(host)", host, "\(host)\n"] {
            let get = try run("get", serverURL)
            #expect(get.exitCode == 0, "\(get.stdout)")
            let object = try JSONSerialization.jsonObject(with: Data(get.stdout.utf8)) as? [String: String]
            #expect(object?["Username"] == "reg-user" && object?["Secret"] == "reg-secret")
            #expect(object?["ServerURL"] == serverURL.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        // git sees the same credential: one generic store.
        #expect(try git.portalToken(["get"], stdin: "url=https://\(host)\n").stdout.contains("password=reg-secret"))
        let list = try run("list", nil)
        let listed = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [String: String]
        #expect(listed?["https://\(host)"] == "reg-user")
        #expect(!list.stdout.contains("reg-secret"))
        // A user written in the server URL is no part of the key: the same URL finds it again.
        let withUser = "https://someone@\(GitHarness.uniqueHost("registry-user"))"
        #expect(
            try run("store", #"{"ServerURL":"\#(withUser)","Username":"field-user","Secret":"user-secret"}"#).exitCode
                == 0)
        let foundWithUser = try run("get", withUser)
        #expect(
            foundWithUser.exitCode == 0 && foundWithUser.stdout.contains(#""Username":"field-user""#),
            "\(foundWithUser.stdout)")
        #expect(try run("erase", withUser).exitCode == 0)
        // Docker Hub's key comes back exactly as Docker wrote it, trailing slash included.
        let hub = try run(
            "store", #"{"ServerURL":"https://index.docker.io/v1/","Username":"hub-user","Secret":"hub-secret"}"#)
        #expect(hub.exitCode == 0, "\(hub.stdout)")
        let hubListed =
            try JSONSerialization.jsonObject(with: Data(try run("list", nil).stdout.utf8)) as? [String: String]
        #expect(hubListed?["https://index.docker.io/v1/"] == "hub-user", "\(String(describing: hubListed))")
        #expect(try run("erase", "https://index.docker.io/v1/").exitCode == 0)
        #expect(try run("erase", host).exitCode == 0)
        let missing = try run("get", "https://\(host)")
        #expect(missing.exitCode == 1)
        #expect(missing.stdout == "credentials not found in native keychain\n")
        #expect(try run("erase", host).stdout == "credentials not found in native keychain\n")
        let version = try run("version", nil)
        #expect(version.exitCode == 0 && version.stdout.hasPrefix("docker-credential-portal-token"))
        #expect(try run("store", #"{"Username":"u","Secret":"s"}"#).stdout == "no credentials server URL\n")
        for blank in [
            #"{"ServerURL":"\#(host)","Secret":"s"}"#, #"{"ServerURL":"\#(host)","Username":" \t","Secret":"s"}"#,
        ] {
            let refused = try run("store", blank)
            #expect(refused.exitCode == 1 && refused.stdout == "no credentials username\n", "\(refused.stdout)")
        }
        #expect(try run("get", host).exitCode == 1, "a refused store stores nothing")
    }

    /// A free TCP port on loopback, as the kernel hands one out.
    static func freePort() throws -> UInt16 {
        let socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socketDescriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socketDescriptor, $0, length) == 0 && getsockname(socketDescriptor, $0, &length) == 0
            }
        }
        guard bound else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EADDRINUSE) }
        return UInt16(bigEndian: address.sin_port)
    }

    /// A one-layer OCI image in `directory` (an OCI layout), tagged `1`.
    static func writeImage(to directory: String) throws {
        let script = """
            import hashlib, io, json, os, sys, tarfile
            d = sys.argv[1]; os.makedirs(d + "/blobs/sha256", exist_ok=True)
            def blob(data):
                digest = hashlib.sha256(data).hexdigest()
                open(d + "/blobs/sha256/" + digest, "wb").write(data)
                return "sha256:" + digest, len(data)
            buffer = io.BytesIO()
            with tarfile.open(fileobj=buffer, mode="w") as archive:
                info = tarfile.TarInfo("hello.txt"); info.size = 6; archive.addfile(info, io.BytesIO(b"hello\\n"))
            layer, layer_size = blob(buffer.getvalue())
            config, config_size = blob(json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                "rootfs": {"type": "layers", "diff_ids": [layer]}}).encode())
            manifest, manifest_size = blob(json.dumps({"schemaVersion": 2, "mediaType": \
            "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": \
            config_size},
                "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer, "size": \
            layer_size}]}).encode())
            json.dump({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": manifest, "size": manifest_size, "annotations": {"org.opencontainers.image.ref.name": "1"}}]},
                open(d + "/index.json", "w"))
            open(d + "/oci-layout", "w").write('{"imageLayoutVersion": "1.0.0"}')
            """
        let result = try ProcessRunner.run(try #require(installedProgram("python3")), ["-c", script, directory])
        #expect(result.exitCode == 0, "\(result.stderr)")
    }

    @Test("skopeo login, copy, inspect and logout against a local registry go through portal-token")
    func skopeoAgainstLocalRegistry() throws {
        let skopeo = try #require(installedProgram("skopeo"), "skopeo is not installed: run contrib/deps.sh test")
        let registry = try #require(
            installedProgram("docker-registry"), "docker-registry is not installed: run contrib/deps.sh test")
        let htpasswd = try #require(installedProgram("htpasswd"), "htpasswd (apache2-utils) is not installed")
        let scratch = try ScratchFolder("registry")
        let git = try GitHarness(backend: .file)
        let port = try Self.freePort()
        let server = "127.0.0.1:\(port)"
        let password = "registry-pass-\(UUID().uuidString)"
        let users = try ProcessRunner.run(htpasswd, ["-Bbn", "alice", password])
        #expect(users.exitCode == 0)
        try scratch.write("htpasswd", users.stdout)
        try scratch.write(
            "config.yml",
            """
            version: 0.1
            log:
              level: error
            storage:
              filesystem:
                rootdirectory: \(scratch.path)/data
            http:
              addr: \(server)
            auth:
              htpasswd:
                realm: portal-token-test
                path: \(scratch.path)/htpasswd
            """)
        let registryPID = try ProcessRunner.spawn(
            registry, ["serve", "\(scratch.path)/config.yml"], environment: ProcessRunner.environment(),
            stdout: "\(scratch.path)/registry.log", stderr: "\(scratch.path)/registry.log")
        defer {
            kill(registryPID, SIGKILL)
            _ = waitpid(registryPID, nil, 0)
        }
        // Ready once it answers /v2/ with a demand for credentials; bounded.
        let deadline = ProcessRunner.monotonicSeconds() + 15
        var ready = false
        while !ready && ProcessRunner.monotonicSeconds() < deadline {
            let probe = try ProcessRunner.run(
                "/usr/bin/curl",
                [
                    "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "1",
                    "http://\(server)/v2/",
                ], timeout: 5)
            ready = probe.stdout == "401"
            if !ready { usleep(50_000) }
        }
        try #require(ready, "the registry did not start: \(scratch.read("registry.log"))")

        try scratch.write("auth.json", #"{"credHelpers":{"\#(server)":"portal-token"}}"#)
        try Self.writeImage(to: scratch.path + "/image")
        var environment = git.environment
        environment["PATH"] = try Self.helperDirectory(scratch) + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["REGISTRY_AUTH_FILE"] = scratch.path + "/auth.json"
        func skopeoRun(_ arguments: [String], stdin: String? = nil) throws -> ProcessResult {
            try ProcessRunner.run(skopeo, arguments, stdin: stdin, environment: environment, timeout: 60)
        }

        let login = try skopeoRun(
            ["login", "--tls-verify=false", "-u", "alice", "--password-stdin", server], stdin: password + "\n")
        #expect(login.exitCode == 0, "\(login.stderr)")
        #expect(
            scratch.read("auth.json") == #"{"credHelpers":{"\#(server)":"portal-token"}}"#,
            "the password went to portal-token, not auth.json")
        let stored = try git.portalToken(["get"], stdin: "protocol=https\nhost=\(server)\n")
        #expect(stored.stdout == "username=alice\npassword=\(password)\n")

        let copy = try skopeoRun([
            "copy", "--dest-tls-verify=false", "oci:\(scratch.path)/image:1", "docker://\(server)/test:1",
        ])
        #expect(copy.exitCode == 0, "\(copy.stderr)")
        let inspect = try skopeoRun(["inspect", "--tls-verify=false", "docker://\(server)/test:1"])
        #expect(inspect.exitCode == 0, "\(inspect.stderr)")
        #expect(inspect.stdout.contains("\"Name\": \"\(server)/test\""))

        let logout = try skopeoRun(["logout", server])
        #expect(logout.exitCode == 0, "\(logout.stderr)")
        #expect(try git.portalToken(["get"], stdin: "protocol=https\nhost=\(server)\n").stdout.isEmpty)
        let refused = try skopeoRun(["inspect", "--tls-verify=false", "docker://\(server)/test:1"])
        #expect(refused.exitCode != 0 && refused.stderr.contains("unauthorized"))
    }
}

@Suite("doctor")
struct DoctorTests {
    @Test("doctor exits 0 on a healthy private keyring, one ok line per check")
    func healthyKeyring() throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        var environment = keyring.environment
        environment["PORTAL_TOKEN_BACKEND"] = nil
        environment["PORTAL_TOKEN_PASSPHRASE"] = "doctor-canary-passphrase"
        let result = try ProcessRunner.portalToken(["doctor"], environment: environment, timeout: 20)
        #expect(result.exitCode == 0, "\(result.stdout)\(result.stderr)")
        let lines = result.stdout.split(separator: "\n")
        for name in [
            "config file", "session bus", "secret service provider", "default keyring", "backend", "encrypted file",
            "hook", "kernel keyring",
        ] {
            #expect(lines.contains { $0.hasPrefix("ok      \(name): ") }, "no ok line for \(name): \(result.stdout)")
        }
        #expect(result.stdout.contains("backend: secret-service"))
        #expect(result.stdout.contains("passphrase source: PORTAL_TOKEN_PASSPHRASE"))
        #expect(
            !result.stdout.contains("doctor-canary-passphrase") && !result.stderr.contains("doctor-canary-passphrase"))
        let json = try ProcessRunner.portalToken(["doctor", "--format", "json"], environment: environment, timeout: 20)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["ok"] as? Bool == true)
        #expect((object["checks"] as? [[String: Any]])?.allSatisfy { $0["status"] as? String == "ok" } == true)
    }

    @Test("doctor exits 1 on a stopped keyring daemon, within the keyring bound")
    func stoppedKeyring() throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        keyring.stopKeyring()
        defer { keyring.continueKeyring() }
        var environment = keyring.environment
        environment["PORTAL_TOKEN_BACKEND"] = nil
        environment["PORTAL_TOKEN_KEYRING_TIMEOUT_MS"] = "800"
        let result = try ProcessRunner.portalToken(["doctor"], environment: environment, timeout: 20)
        #expect(result.exitCode == 1, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("problem secret service provider: "))
        #expect(result.stdout.contains("hint: the keyring daemon does not answer"))
        #expect(result.duration < 0.8 + 1.0, "took \(result.duration) s")
    }

    @Test("doctor names a hook that is not executable and a locked keyring, with hints")
    func problemsHaveHints() throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        try keyring.lockLoginCollection()
        let scratch = try ScratchFolder("doctor")
        try scratch.write("hook", "#!/bin/sh\n")
        var environment = keyring.environment
        environment["PORTAL_TOKEN_BACKEND"] = nil
        environment["PORTAL_TOKEN_ON_SESSION_INVALIDATED"] = scratch.path + "/hook"
        let result = try ProcessRunner.portalToken(["doctor"], environment: environment, timeout: 20)
        #expect(result.exitCode == 1)
        #expect(result.stdout.contains("problem default keyring: 'Login' is locked"), "\(result.stdout)")
        #expect(result.stdout.contains("problem hook: \(scratch.path)/hook is not executable"))
        #expect(result.stdout.contains("hint: chmod +x"))
    }

    @Test("doctor reports a hook that others may write as a problem, since it is never run")
    func writableHook() throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        let scratch = try ScratchFolder("doctor")
        try scratch.write("hook", "#!/bin/sh\n")
        chmod(scratch.path + "/hook", 0o777)
        var environment = keyring.environment
        environment["PORTAL_TOKEN_BACKEND"] = nil
        environment["PORTAL_TOKEN_ON_SESSION_INVALIDATED"] = scratch.path + "/hook"
        let result = try ProcessRunner.portalToken(["doctor"], environment: environment, timeout: 20)
        #expect(result.exitCode == 1, "\(result.stdout)\(result.stderr)")
        #expect(
            result.stdout.contains(
                "problem hook: \(scratch.path)/hook is writable by other users (mode 777), so it is not run"),
            "\(result.stdout)")
        #expect(result.stdout.contains("hint: chmod go-w \(scratch.path)/hook"))
    }

    @Test("doctor reports a relative hook path as a problem, where other commands refuse it")
    func relativeHook() throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        var environment = keyring.environment
        environment["PORTAL_TOKEN_BACKEND"] = nil
        environment["PORTAL_TOKEN_ON_SESSION_INVALIDATED"] = "hooks/on-session-invalidated"
        let result = try ProcessRunner.portalToken(["doctor"], environment: environment, timeout: 20)
        #expect(result.exitCode == 1, "\(result.stdout)\(result.stderr)")
        #expect(
            result.stdout.contains(
                """
                problem hook: PORTAL_TOKEN_ON_SESSION_INVALIDATED: the hook path 'hooks/on-session-invalidated' is \
                not absolute
                """
            ),
            "\(result.stdout)")
        #expect(result.stdout.contains("ok      kernel keyring"))
    }

    @Test("doctor reports a broken config file as a problem and still runs the other checks")
    func brokenConfig() throws {
        let keyring = try PrivateKeyring(withKeyring: true)
        let scratch = try ScratchFolder("doctor-config")
        try scratch.write("config", "colour = blue\n")
        var environment = keyring.environment
        environment["PORTAL_TOKEN_CONFIG"] = scratch.path + "/config"
        let result = try ProcessRunner.portalToken(["doctor"], environment: environment, timeout: 20)
        #expect(result.exitCode == 1)
        #expect(result.stdout.hasPrefix("problem config file: "), "\(result.stdout)")
        #expect(result.stdout.contains("ok      kernel keyring"))
    }
}

@Suite("install and uninstall")
struct InstallTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    /// Every file and link under `directory`, relative to it.
    static func files(under directory: String) -> [String] {
        guard let enumerator = FileManager.default.enumerator(atPath: directory) else { return [] }
        return enumerator.compactMap { $0 as? String }.filter { path in
            var isDirectory: ObjCBool = false
            let full = directory + "/" + path
            return (try? FileManager.default.destinationOfSymbolicLink(atPath: full)) != nil
                || (FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory) && !isDirectory.boolValue)
        }.sorted()
    }

    @Test("a fresh install makes man portal-token and completion work, and uninstall leaves nothing behind")
    func installAndUninstall() throws {
        let scratch = try ScratchFolder("install")
        let home = scratch.path + "/home"
        let prefix = scratch.path + "/prefix"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        let binary =
            ProcessInfo.processInfo.environment["PORTAL_TOKEN_RELEASE_BIN"].flatMap { $0.isEmpty ? nil : $0 }
            ?? ProcessRunner.portalTokenPath
        let environment = ProcessRunner.environment([
            "HOME": home, "XDG_DATA_HOME": nil, "XDG_CONFIG_HOME": nil, "XDG_CACHE_HOME": home + "/.cache",
            "GIT_CONFIG_GLOBAL": nil, "GIT_CONFIG_NOSYSTEM": "1", "PORTAL_REDIRECT_URL": "myapp://auth/callback",
            "PATH": "\(prefix)/bin:" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"),
        ])
        let install = try ProcessRunner.run(
            "/bin/bash", ["\(Self.root)/contrib/install.sh", "--prefix", prefix, "--binary", binary, "--no-try"],
            environment: environment, timeout: 60)
        #expect(install.exitCode == 0, "\(install.stdout)\(install.stderr)")
        #expect(install.stdout.contains("Next steps"))
        #expect(install.stdout.split(separator: "\n").count <= 24, "the next steps fit one screen")

        // The three names, each running the same binary.
        for name in ["portal-token", "git-credential-portal-token", "docker-credential-portal-token"] {
            #expect(FileManager.default.isExecutableFile(atPath: "\(prefix)/bin/\(name)"), "\(name) is not installed")
        }
        // The agent's systemd user units, the service naming the installed binary.
        let units = home + "/.config/systemd/user/"
        #expect(FileManager.default.fileExists(atPath: units + "portal-token-agent.socket"))
        let agentService = (try? String(contentsOfFile: units + "portal-token-agent.service", encoding: .utf8)) ?? ""
        #expect(agentService.contains("ExecStart=\(prefix)/bin/portal-token agent"))
        let version = try ProcessRunner.run(
            "\(prefix)/bin/docker-credential-portal-token", ["version"], environment: environment)
        #expect(version.exitCode == 0 && version.stdout.hasPrefix("docker-credential-portal-token"))

        // man finds the page from PATH alone (PREFIX/bin on PATH puts PREFIX/share/man on man's
        // path), as in a newcomer's shell: no MANPATH.
        let man = try #require(installedProgram("man"), "man is not installed: run contrib/deps.sh")
        var manEnvironment = environment
        manEnvironment["MANPATH"] = nil
        manEnvironment["MANPAGER"] = "cat"
        manEnvironment["MANWIDTH"] = "80"
        let page = try ProcessRunner.run(man, ["portal-token"], environment: manEnvironment, timeout: 30)
        #expect(page.exitCode == 0, "\(page.stderr)")
        #expect(page.stdout.contains("exec-credential"))
        // The rules file's page, and the documentation the pages and hints cite.
        let rulesPage = try ProcessRunner.run(
            man, ["portal-token-agent.rules"], environment: manEnvironment, timeout: 30)
        #expect(rulesPage.exitCode == 0, "\(rulesPage.stderr)")
        #expect(rulesPage.stdout.contains("allow git-get"), "\(rulesPage.stdout)")
        #expect(FileManager.default.fileExists(atPath: "\(prefix)/share/doc/portal-token/agent.md"))
        // The next steps say the restricted socket needs a rule, how to get it, and where the
        // agent's settings go.
        #expect(install.stdout.contains("--check-rules"), "\(install.stdout)")
        #expect(install.stdout.contains("/portal-token/config"), "\(install.stdout)")

        // Each shell loads the completion from where install.sh put it. bash: bash-completion's
        // own loader (what the first Tab runs) finds it in the per-user folder and completes.
        let bashCompletion = "/usr/share/bash-completion/bash_completion"
        try #require(
            FileManager.default.fileExists(atPath: bashCompletion),
            "bash-completion is not installed: run contrib/deps.sh")
        let bash = try ProcessRunner.run(
            "/bin/bash",
            [
                "--norc", "--noprofile", "-c",
                #"""
                . /usr/share/bash-completion/bash_completion
                _completion_loader portal-token
                COMP_WORDS=(portal-token exec-c); COMP_CWORD=1; COMP_LINE="portal-token exec-c"; \#
                COMP_POINT=${#COMP_LINE}
                "$(complete -p portal-token | sed -n 's/.* -F \([^ ]*\) .*/\1/p')" portal-token exec-c portal-token
                printf '%s\n' "${COMPREPLY[@]}"
                """#,
            ], environment: environment, timeout: 30)
        #expect(bash.stdout == "exec-credential\n", "\(bash.stdout)\(bash.stderr)")
        if let zsh = installedProgram("zsh") {
            let loaded = try ProcessRunner.run(
                zsh,
                [
                    "-f", "-c",
                    #"""
                    fpath=("$HOME/.local/share/zsh/site-functions" $fpath); autoload -Uz compinit; compinit -u -d \#
                    "$HOME/.cache/zcompdump"; print -r -- $_comps[portal-token]
                    """#,
                ],
                environment: environment, timeout: 30)
            #expect(loaded.stdout == "_portal-token\n", "\(loaded.stderr)")
        }
        if let fish = installedProgram("fish") {
            let offered = try ProcessRunner.run(
                fish, ["-c", "complete -C 'portal-token exec-c'"], environment: environment, timeout: 30)
            #expect(offered.stdout.hasPrefix("exec-credential"), "\(offered.stdout)\(offered.stderr)")
        }
        // The redirect handler is D-Bus activated: no URL ever goes on its command line.
        let desktop = try String(
            contentsOfFile: "\(home)/.local/share/applications/io.portalhq.PortalToken.desktop", encoding: .utf8)
        #expect(desktop.contains("Exec=\(prefix)/bin/portal-token redirect --dbus-activated\n"))
        #expect(desktop.contains("DBusActivatable=true"))
        #expect(desktop.contains("MimeType=x-scheme-handler/myapp;"))
        #expect(!desktop.contains("%u"))
        let service = try String(
            contentsOfFile: "\(home)/.local/share/dbus-1/services/io.portalhq.PortalToken.service", encoding: .utf8)
        #expect(service.contains("Exec=\(prefix)/bin/portal-token redirect --dbus-activated"))
        // With xdg-mime there, the scheme is handed to the desktop entry in mimeapps.list.
        let mimeapps = "\(home)/.config/mimeapps.list"
        if installedProgram("xdg-mime") != nil {
            #expect(
                ((try? String(contentsOfFile: mimeapps, encoding: .utf8)) ?? "").contains(
                    "x-scheme-handler/myapp=io.portalhq.PortalToken.desktop"))
        }

        let uninstall = try ProcessRunner.run(
            "/bin/bash", ["\(Self.root)/contrib/uninstall.sh", "--prefix", prefix],
            environment: environment, timeout: 60)
        #expect(uninstall.exitCode == 0, "\(uninstall.stdout)\(uninstall.stderr)")
        #expect(Self.files(under: prefix).isEmpty, "left under the prefix: \(Self.files(under: prefix))")
        // Nothing in HOME names portal-token, by file name or in a file (the shells' own caches aside).
        let left = Self.files(under: home).filter { path in
            guard !path.hasPrefix(".cache/") else { return false }
            let text = (try? String(contentsOfFile: home + "/" + path, encoding: .utf8)) ?? ""
            return path.contains("portal-token") || path.contains("portal_token") || text.contains("portal-token")
        }
        #expect(left.isEmpty, "left in HOME: \(left)")
        #expect(
            !FileManager.default.fileExists(atPath: mimeapps), "install created mimeapps.list, uninstall leaves none")
    }
}
