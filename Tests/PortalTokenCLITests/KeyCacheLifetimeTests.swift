import Foundation
import Glibc
import PortalTokenTestSupport
import Testing

/// The kernel-keyring caches end to end, with gpg-agent's two knobs (docs/storage.md, "Key
/// cache and its trade-off"): `key-cache-timeout` seconds after the last use, `key-cache-max`
/// seconds at most, and `portal-token lock` to drop them all at once. Small settings, and waits
/// bounded by them; the kernel counts a key's timeout in whole seconds, so every use comes well
/// within a second of the one before's margin.
@Suite("key cache lifetime and lock")
struct KeyCacheLifetimeTests {
    /// No passphrase anywhere: a `get` succeeds only with the key cached.
    static let noPassphrase: [String: String?] = ["PORTAL_TOKEN_PASSPHRASE_FILE": nil]

    static func stored(_ world: FileBackendWorld) throws {
        let result = try world.run(
            ["store", "--backend", "file"], request("example.com", user: "alice", password: "pw"))
        #expect(result.exitCode == 0, "\(result.stderr)")
    }

    static func getWithCachedKey(_ world: FileBackendWorld) throws -> ProcessResult {
        try world.run(["get", "--backend", "file"], request("example.com"), noPassphrase)
    }

    @Test("the cached key outlives key-cache-timeout while used, and expires once unused that long")
    func idleTimeout() throws {
        // Idle 4 s (the kernel's whole seconds make that 3 to 4), cap far off.
        let world = try FileBackendWorld(keyCacheTimeout: 4, extra: ["PORTAL_TOKEN_KEY_CACHE_MAX": "120"])
        try Self.stored(world)
        let start = ProcessRunner.monotonicSeconds()
        while ProcessRunner.monotonicSeconds() - start < 7 {
            usleep(1_000_000)
            let used = try Self.getWithCachedKey(world)
            let elapsed = ProcessRunner.monotonicSeconds() - start
            #expect(used.exitCode == 0, "the key was gone \(elapsed) s after the store, though used every second")
            if used.exitCode != 0 { return }
        }
        // Unused for longer than the idle timeout: gone.
        usleep(5_500_000)
        let unused = try Self.getWithCachedKey(world)
        #expect(unused.exitCode == 4, "the key outlived its idle timeout: \(unused.stdout)")
        #expect(unused.stdout.isEmpty)
    }

    @Test("the cached key expires key-cache-max after it was cached, even while used every second")
    func cap() throws {
        let world = try FileBackendWorld(keyCacheTimeout: 3, extra: ["PORTAL_TOKEN_KEY_CACHE_MAX": "7"])
        try Self.stored(world)
        let start = ProcessRunner.monotonicSeconds()
        var expiredAfter: Double?
        while expiredAfter == nil, ProcessRunner.monotonicSeconds() - start < 12 {
            usleep(1_000_000)
            if try Self.getWithCachedKey(world).exitCode != 0 {
                expiredAfter = ProcessRunner.monotonicSeconds() - start
            }
        }
        let after = try #require(expiredAfter, "the key was still served 12 s after it was cached, cap 7 s")
        // Used every second, it outlived its idle timeout by far; the cap ended it.
        #expect(after > 4.5, "the key expired after \(after) s, as if its idle timeout had never started again")
        #expect(after < 10, "the key expired after \(after) s, long past its 7 s cap")
        // With the passphrase it opens again, and is cached anew.
        #expect(try world.run(["get", "--backend", "file"], request("example.com")).exitCode == 0)
        #expect(try Self.getWithCachedKey(world).exitCode == 0)
    }

    @Test("portal-token lock drops every cached key and session copy of the user: keyctl lists none")
    func lock() throws {
        // Run as nobody, whose persistent keyring is its own: the rest of the suite keeps its keys.
        try #require(geteuid() == 0, "running as another user needs root")
        let nobody = try #require(getpwnam("nobody")?.pointee)
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("portal-token-lock-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let home = root + "/home"
        #expect(mkdir(root, 0o755) == 0 && mkdir(home, 0o700) == 0 && mkdir(home + "/run", 0o700) == 0)
        chown(home, nobody.pw_uid, nobody.pw_gid)
        chown(home + "/run", nobody.pw_uid, nobody.pw_gid)
        var environment = [
            "PATH": "/usr/bin:/bin", "HOME": home, "XDG_RUNTIME_DIR": home + "/run",
            "PORTAL_TOKEN_BACKEND": "file", "PORTAL_TOKEN_PASSPHRASE": "lock test passphrase",
            "PORTAL_AUTH_ENVIRONMENT_ID": "env-lock", "PORTAL_TOKEN_KEY_CACHE_TIMEOUT": "120",
        ]
        func asNobody(_ program: String, _ arguments: [String], stdin: String = "") throws -> ProcessResult {
            try ProcessRunner.run(
                "/usr/bin/setpriv",
                ["--reuid=\(nobody.pw_uid)", "--regid=\(nobody.pw_gid)", "--clear-groups", program] + arguments,
                stdin: stdin, environment: environment, timeout: 30)
        }
        func cachedNames() throws -> [String] {
            try KernelKeys.names(
                wrapper: [
                    "/usr/bin/setpriv", "--reuid=\(nobody.pw_uid)", "--regid=\(nobody.pw_gid)", "--clear-groups",
                ],
                environment: environment)
        }
        let portal = "protocol=https\nhost=api.portalhq.io\n"
        #expect(
            try asNobody(ProcessRunner.portalTokenPath, ["store"], stdin: portal + "username=u\npassword=token-L\n")
                .exitCode == 0)
        #expect(try asNobody(ProcessRunner.portalTokenPath, ["token"]).stdout == "token-L\n")
        let before = try cachedNames()
        #expect(before.contains { $0.contains("portal-token:file-key:") }, "\(before)")
        #expect(before.contains { $0.contains("portal-token:session:") }, "\(before)")

        let locked = try asNobody(ProcessRunner.portalTokenPath, ["lock"])
        #expect(locked.exitCode == 0, "\(locked.stderr)")
        #expect(locked.stderr.contains("dropped every cached key and session copy"))
        let after = try cachedNames()
        #expect(after.isEmpty, "left after lock: \(after)")

        // Nothing stored changed, but the file asks for its passphrase again.
        environment["PORTAL_TOKEN_PASSPHRASE"] = nil
        let withoutPassphrase = try asNobody(ProcessRunner.portalTokenPath, ["token"])
        #expect(withoutPassphrase.exitCode == 4, "\(withoutPassphrase.stdout) \(withoutPassphrase.stderr)")
        environment["PORTAL_TOKEN_PASSPHRASE"] = "lock test passphrase"
        #expect(try asNobody(ProcessRunner.portalTokenPath, ["token"]).stdout == "token-L\n")
    }
}
