import Foundation
import Glibc
import PortalTokenTestSupport
import Testing

/// Hostile files at the store's, passphrase's and config's paths (docs/storage.md, "Paths" "Paths"):
/// each is refused within 2 seconds with a clear error, and no file is lost.
@Suite("hostile files")
struct FileHardeningTests {
    static func stored(_ world: FileBackendWorld) throws {
        let result = try world.run(
            ["store", "--backend", "file"], request("example.com", user: "alice", password: "pw"))
        #expect(result.exitCode == 0, "\(result.stderr)")
    }

    static func expectQuick(_ result: ProcessResult, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(result.duration < 2, "took \(result.duration) s", sourceLocation: sourceLocation)
    }

    @Test("a store directory another user owns, or others may write, is refused (exit 4, hint) and left as it is")
    func directoryOwnerAndMode() throws {
        let world = try FileBackendWorld()
        try Self.stored(world)
        let directory = (world.storePath as NSString).deletingLastPathComponent
        let before = try world.storeBytes()
        for mode in [0o777, 0o770, 0o702] as [mode_t] {
            chmod(directory, mode)
            let result = try world.run(["get", "--backend", "file"], request("example.com"))
            #expect(result.exitCode == 4, "\(result.stderr)")
            #expect(
                result.stderr.contains(
                    """
                    portal-token: error: the store directory \(directory) is writable by other users (mode \
                    \(String(mode, radix: 8)))
                    """
                ))
            #expect(result.stderr.contains("hint: restrict it with 'chmod go-w \(directory)'"))
            let write = try world.run(
                ["store", "--backend", "file"], request("example.com", user: "bob", password: "pw2"))
            #expect(write.exitCode == 4)
            Self.expectQuick(result)
        }
        chmod(directory, 0o700)
        try #require(geteuid() == 0, "giving the directory away needs root")
        chown(directory, 65534, 65534)
        let foreign = try world.run(["get", "--backend", "file"], request("example.com"))
        #expect(foreign.exitCode == 4)
        #expect(foreign.stderr.contains("the store directory \(directory) belongs to another user (uid 65534)"))
        chown(directory, 0, 0)
        #expect(try world.storeBytes() == before)
        #expect(
            try world.run(["get", "--backend", "file"], request("example.com")).stdout
                == "username=alice\npassword=pw\n")
    }

    @Test("a symlink at the lock file's name is not followed: refused, and its target is never created")
    func lockSymlink() throws {
        let world = try FileBackendWorld()
        try Self.stored(world)
        let target = world.home + "/planted-target"
        unlink(world.storePath + ".lock")
        #expect(symlink(target, world.storePath + ".lock") == 0)
        let result = try world.run(
            ["store", "--backend", "file"], request("example.com", user: "bob", password: "pw2"))
        #expect(result.exitCode == 4)
        #expect(result.stderr.contains("portal-token: error: the lock file \(world.storePath).lock is a symbolic link"))
        #expect(!FileManager.default.fileExists(atPath: target))
        Self.expectQuick(result)
    }

    @Test(
        """
        the runtime directory's locks, too (sign-in.lock, which logout takes): a symlink at its name is not \
        followed, and anything but a regular file of the user's own is refused, each with a hint
        """
    )
    func sessionLockSymlinkAndOwner() throws {
        let world = try FileBackendWorld()
        let runtime = world.home + "/runtime"
        #expect(mkdir(runtime, 0o700) == 0 && mkdir(runtime + "/portal-token", 0o700) == 0)
        let lock = runtime + "/portal-token/sign-in.lock"
        let target = world.home + "/planted-target"
        #expect(symlink(target, lock) == 0)
        let environment: [String: String?] = ["XDG_RUNTIME_DIR": runtime, "PORTAL_AUTH_ENVIRONMENT_ID": "env-local"]
        let result = try world.run(["logout", "--backend", "file"], "", environment)
        #expect(result.exitCode == 4, "\(result.stderr)")
        #expect(result.stderr.contains("portal-token: error: the lock file \(lock) is a symbolic link"))
        #expect(result.stderr.contains("hint: remove it; portal-token creates the lock file itself"))
        #expect(!FileManager.default.fileExists(atPath: target))
        Self.expectQuick(result)

        unlink(lock)
        #expect(mkfifo(lock, 0o666) == 0)
        let fifo = try world.run(["logout", "--backend", "file"], "", environment)
        #expect(fifo.exitCode == 4)
        #expect(fifo.stderr.contains("portal-token: error: the lock file \(lock) is not a regular file of your own"))
        Self.expectQuick(fifo)
    }

    @Test(
        """
        the session lock's directory must be the user's own and writable by no one else, and the runtime \
        directory holding it must let no one else rename it: else exit 4 with a hint, and the hook's lock is never \
        taken there
        """
    )
    func sessionLockDirectory() throws {
        let world = try FileBackendWorld()
        let runtime = world.home + "/runtime"
        let directory = runtime + "/portal-token"
        #expect(mkdir(runtime, 0o700) == 0 && mkdir(directory, 0o700) == 0)
        let environment: [String: String?] = ["XDG_RUNTIME_DIR": runtime, "PORTAL_AUTH_ENVIRONMENT_ID": "env-local"]
        for mode in [0o777, 0o770, 0o702] as [mode_t] {
            chmod(directory, mode)
            let result = try world.run(["logout", "--backend", "file"], "", environment)
            #expect(result.exitCode == 4, "\(mode): \(result.stderr)")
            #expect(
                result.stderr.contains(
                    """
                    portal-token: error: the lock directory \(directory) is writable by other users (mode \
                    \(String(mode, radix: 8)))
                    """
                ), "\(result.stderr)")
            #expect(result.stderr.contains("hint: restrict it with 'chmod go-w \(directory)'"))
            #expect(!FileManager.default.fileExists(atPath: directory + "/sign-in.lock"))
            Self.expectQuick(result)
        }
        chmod(directory, 0o700)

        // A runtime directory others may write to without the sticky bit: they could rename the
        // lock directory itself away.
        for mode in [0o777, 0o775] as [mode_t] {
            chmod(runtime, mode)
            let shared = try world.run(["logout", "--backend", "file"], "", environment)
            #expect(shared.exitCode == 4, "\(shared.stderr)")
            #expect(
                shared.stderr.contains(
                    """
                    portal-token: error: the runtime directory \(runtime) (XDG_RUNTIME_DIR) is writable by other \
                    users (mode \(String(mode, radix: 8)))
                    """
                ), "\(shared.stderr)")
            #expect(shared.stderr.contains("hint: set XDG_RUNTIME_DIR to a directory of your own"))
        }
        // Sticky, as /tmp is: only the owner of an entry may rename it.
        chmod(runtime, 0o1777)
        let sticky = try world.run(["logout", "--backend", "file"], "", environment)
        #expect(sticky.exitCode == 0, "\(sticky.stderr)")
        chmod(runtime, 0o700)

        // Another user's lock directory: portal-token run as nobody, in a runtime directory of
        // nobody's own that holds a lock directory of root's.
        let nobody = try #require(getpwnam("nobody")?.pointee)
        try #require(geteuid() == 0, "running as another user needs root")
        let shared = FileManager.default.temporaryDirectory.appendingPathComponent("portal-token-lock-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: shared) }
        #expect(mkdir(shared, 0o755) == 0 && mkdir(shared + "/run", 0o700) == 0)
        #expect(mkdir(shared + "/run/portal-token", 0o700) == 0)
        chown(shared + "/run", nobody.pw_uid, nobody.pw_gid)
        let foreign = try ProcessRunner.run(
            "/usr/bin/setpriv",
            [
                "--reuid=\(nobody.pw_uid)", "--regid=\(nobody.pw_gid)", "--clear-groups",
                ProcessRunner.portalTokenPath, "logout", "--backend", "file",
            ],
            environment: [
                "PATH": "/usr/bin:/bin", "HOME": shared, "XDG_RUNTIME_DIR": shared + "/run",
                "PORTAL_AUTH_ENVIRONMENT_ID": "env-local",
            ], timeout: 10)
        #expect(foreign.exitCode == 4, "\(foreign.stderr)")
        #expect(
            foreign.stderr.contains(
                "portal-token: error: the lock directory \(shared)/run/portal-token belongs to another user (uid 0)"),
            "\(foreign.stderr)")
        #expect(foreign.stderr.contains("hint: remove it (portal-token creates it itself, mode 700)"))
    }

    @Test("a FIFO at the store's, the passphrase's or the config's path is refused at once")
    func fifos() throws {
        let world = try FileBackendWorld()
        try FileManager.default.createDirectory(
            atPath: (world.storePath as NSString).deletingLastPathComponent,
            withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        #expect(mkfifo(world.storePath, 0o600) == 0)
        let store = try world.run(["get", "--backend", "file"], request("example.com"))
        #expect(store.exitCode == 4)
        #expect(store.stderr.contains("the store file \(world.storePath) is not a regular file"))
        Self.expectQuick(store)
        unlink(world.storePath)

        try Self.stored(world)
        let fifo = world.home + "/fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        let passphrase = try world.run(
            ["get", "--backend", "file"], request("example.com"), ["PORTAL_TOKEN_PASSPHRASE_FILE": fifo])
        #expect(passphrase.exitCode == 4)
        #expect(passphrase.stderr.contains("(\(fifo)) is not a regular file"))
        Self.expectQuick(passphrase)

        let config = try world.run(["get", "--backend", "file"], request("example.com"), ["PORTAL_TOKEN_CONFIG": fifo])
        #expect(config.exitCode == 2)
        #expect(config.stderr.contains("portal-token: error: cannot read the config file \(fifo): not a regular file"))
        Self.expectQuick(config)
        #expect(
            try world.run(["get", "--backend", "file"], request("example.com")).stdout
                == "username=alice\npassword=pw\n")
    }

    @Test(
        """
        a config file that others may write, or that another user owns, is refused (exit 2): it names the hook to \
        run and the host to trust
        """
    )
    func configOthersMayWrite() throws {
        let world = try FileBackendWorld()
        try Self.stored(world)
        let config = world.home + "/shared-config"
        try "backend = file\n".write(toFile: config, atomically: false, encoding: .utf8)
        for mode in [0o666, 0o664, 0o646] as [mode_t] {
            chmod(config, mode)
            let result = try world.run(
                ["get", "--backend", "file"], request("example.com"), ["PORTAL_TOKEN_CONFIG": config])
            #expect(result.exitCode == 2, "\(result.stderr)")
            #expect(
                result.stderr.contains(
                    """
                    portal-token: error: cannot read the config file \(config): it is writable by other users \
                    (mode \(String(mode, radix: 8)))
                    """
                ))
            #expect(result.stderr.contains("hint: restrict it with 'chmod go-w \(config)'"))
            #expect(result.stdout.isEmpty)
            Self.expectQuick(result)
        }
        chmod(config, 0o644)
        #expect(
            try world.run(["get", "--backend", "file"], request("example.com"), ["PORTAL_TOKEN_CONFIG": config]).stdout
                == "username=alice\npassword=pw\n")
        try #require(geteuid() == 0, "giving the file away needs root")
        chown(config, 65534, 65534)
        let foreign = try world.run(
            ["get", "--backend", "file"], request("example.com"), ["PORTAL_TOKEN_CONFIG": config])
        #expect(foreign.exitCode == 2)
        #expect(
            foreign.stderr.contains("cannot read the config file \(config): it belongs to another user (uid 65534)"))
    }

    @Test("a sparse 48 GiB store file is moved aside like a damaged one, without a crash")
    func oversizedStore() throws {
        let world = try FileBackendWorld()
        try Self.stored(world)
        #expect(truncate(world.storePath, 48 << 30) == 0)
        let result = try world.run(["get", "--backend", "file"], request("example.com"))
        #expect(result.exitCode == 0, "\(result.stderr)")
        #expect(
            result.stderr.contains(
                """
                could not be read (it is 49152 MiB, larger than the 64 MiB a store may be); moved it aside to \
                \(world.storePath).damaged-
                """
            ))
        Self.expectQuick(result)
        let aside = try world.storeDirectoryListing().filter { $0.hasPrefix("store.damaged-") }
        #expect(aside.count == 1)
        var status = stat()
        #expect(
            stat((world.storePath as NSString).deletingLastPathComponent + "/" + (aside.first ?? ""), &status) == 0
                && status.st_size == 48 << 30)
        #expect(!FileManager.default.fileExists(atPath: world.storePath))
        try Self.stored(world)
    }

    @Test("a passphrase file that group or others may read draws a warning, and still works")
    func readablePassphrase() throws {
        let world = try FileBackendWorld()
        try Self.stored(world)
        chmod(world.passphraseFile, 0o640)
        let result = try world.run(["get", "--backend", "file"], request("example.com"))
        #expect(result.stdout == "username=alice\npassword=pw\n")
        #expect(
            result.stderr.contains(
                """
                portal-token: warning: the passphrase file from PORTAL_TOKEN_PASSPHRASE_FILE \
                (\(world.passphraseFile)) is readable by other users (mode 640)
                """
            ))
        #expect(result.stderr.contains("hint: restrict it with 'chmod 600 \(world.passphraseFile)'"))
        #expect(!result.stderr.contains(world.passphrase))
    }
}
