import Foundation
import Glibc
import PortalTokenTestSupport
import Testing

/// The kernel-keyring copies against a sandbox of the same user (docs/storage.md, "The kernel
/// keyring"): what `unshare -Ur` and `bwrap --unshare-all` get, started by the user in the very
/// session keyring portal-token ran in, with no seccomp filter in their way. They find no entry in
/// `/proc/keys` and can read none by its ID, while portal-token on the host still reads them.
@Suite("kernel keyring against sandboxes of the same user", .serialized)
struct KernelKeyringBoundaryTests {
    /// A user of the machine that is not root, with a throwaway home, its runs all in one session
    /// keyring of their own, as a login session's would be. A uid of its own each time, so that no
    /// earlier run's keys (the kernel keeps expired ones listed for a while) are in its keyrings.
    struct User {
        let root: String
        let environment: [String: String]
        let uid = UInt32.random(in: 200_000...900_000)

        init() throws {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("portal-token-keys-\(UUID())").path
            let home = root + "/home"
            #expect(mkdir(root, 0o755) == 0 && mkdir(home, 0o700) == 0 && mkdir(home + "/run", 0o700) == 0)
            chown(home, uid, uid)
            chown(home + "/run", uid, uid)
            environment = [
                "PATH": "/usr/bin:/bin", "HOME": home, "XDG_RUNTIME_DIR": home + "/run",
                "PORTAL_TOKEN_BACKEND": "file", "PORTAL_TOKEN_PASSPHRASE": "keyring boundary passphrase",
                "PORTAL_AUTH_ENVIRONMENT_ID": "env-keys", "PORTAL_TOKEN_KEY_CACHE_TIMEOUT": "120",
            ]
        }

        var setpriv: [String] {
            ["/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups"]
        }

        /// `script` run by `sh` as this user, in `session` (a named session keyring shared by
        /// every run given the same name).
        func shell(_ script: String, stdin: String = "", session: String) throws -> ProcessResult {
            try ProcessRunner.run(
                setpriv[0],
                Array(setpriv.dropFirst()) + ["/usr/bin/keyctl", "session", session, "/bin/sh", "-c", script],
                stdin: stdin, environment: environment, timeout: 30)
        }

        func remove() { try? FileManager.default.removeItem(atPath: root) }
    }

    /// What a sandbox prints: each `/proc/keys` line naming portal-token, and `READ ID` for every
    /// key (not keyring) it could read, of those it lists itself and of `ids`.
    static func attack(ids: [String]) -> String {
        """
        grep portal-token /proc/keys
        for hex in $(awk '$8 == "user" { print $1 }' /proc/keys); do
            keyctl pipe $((0x$hex)) >/dev/null 2>&1 && echo "READ $((0x$hex))"
        done
        for id in \(ids.joined(separator: " ")); do
            keyctl pipe "$id" >/dev/null 2>&1 && echo "READ $id"
            keyctl pipe "$id" 2>/dev/null
        done
        exit 0
        """
    }

    @Test("unshare -Ur and bwrap --unshare-all, in portal-token's own session keyring, read no cached key or token")
    func sandboxesReadNothing() throws {
        try #require(geteuid() == 0, "running as another user needs root")
        let user = try User()
        defer { user.remove() }
        let session = "keys-test-\(UInt32.random(in: 0...UInt32.max))"
        let token = "canary-token-\(UInt32.random(in: 0...UInt32.max))"
        let portal = "protocol=https\nhost=api.portalhq.io\n"
        let binary = ProcessRunner.portalTokenPath
        let stored = try user.shell(
            "\(binary) store", stdin: portal + "username=u\npassword=\(token)\n", session: session)
        #expect(stored.exitCode == 0, "\(stored.stderr)")
        let served = try user.shell("\(binary) token", session: session)
        #expect(served.exitCode == 0 && served.stdout == token + "\n", "\(served.stderr)")

        // The host side sees both entries, possessor-only.
        let entries = try KernelKeys.entries(wrapper: user.setpriv, environment: user.environment)
        let ours = entries.filter { $0.description.contains(";portal-token:") }
        #expect(ours.contains { $0.description.contains(";portal-token:file-key:") }, "\(entries)")
        #expect(ours.contains { $0.description.contains(";portal-token:session:") }, "\(entries)")
        for entry in ours {
            let permissions = entry.description.split(separator: ";")[3]
            #expect(permissions == "3f000000", "\(entry.description): some permission beyond the possessor's")
        }

        let ids = ours.map(\.id)
        let sandboxes: [(String, [String])] = [
            ("unshare -Ur", ["/usr/bin/unshare", "-Ur"]),
            ("unshare -Urpf", ["/usr/bin/unshare", "-Urpf", "--mount-proc"]),
            (
                "bwrap --unshare-all",
                ["/usr/bin/bwrap", "--unshare-all", "--bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
            ),
        ]
        for (name, wrapper) in sandboxes {
            let command = wrapper.map { "'\($0)'" }.joined(separator: " ")
            let script = Self.attack(ids: ids).replacingOccurrences(of: "'", with: "'\\''")
            let attacked = try user.shell("\(command) /bin/sh -c '\(script)'", session: session)
            #expect(attacked.exitCode == 0, "\(name) did not run: \(attacked.stderr)")
            #expect(!attacked.stdout.contains("portal-token"), "\(name) lists a portal-token key: \(attacked.stdout)")
            #expect(!attacked.stdout.contains("READ"), "\(name) read a key: \(attacked.stdout)")
            #expect(!attacked.stdout.contains(token), "\(name) read the token")
        }

        // portal-token on the host still reads its copy (no passphrase: only the cached key opens the file).
        var again = user.environment
        again["PORTAL_TOKEN_PASSPHRASE"] = nil
        let cached = try ProcessRunner.run(
            user.setpriv[0], Array(user.setpriv.dropFirst()) + [binary, "token"], environment: again, timeout: 30)
        #expect(cached.exitCode == 0 && cached.stdout == token + "\n", "\(cached.stderr)")
    }

    @Test("an entry an older portal-token left in the user keyring is dropped when its name is used again")
    func olderEntryDropped() throws {
        try #require(geteuid() == 0, "running as another user needs root")
        let user = try User()
        defer { user.remove() }
        let session = "keys-test-\(UInt32.random(in: 0...UInt32.max))"
        let binary = ProcessRunner.portalTokenPath
        let portal = "protocol=https\nhost=api.portalhq.io\n"
        #expect(
            try user.shell("\(binary) store", stdin: portal + "username=u\npassword=t1\n", session: session).exitCode
                == 0)
        #expect(try user.shell("\(binary) token", session: session).stdout == "t1\n")
        let name = try #require(
            try KernelKeys.names(wrapper: user.setpriv, environment: user.environment)
                .first { $0.hasPrefix("portal-token:session:") })
        // An older release's entry, readable by the user's every process.
        let planted = try user.shell("keyctl add user '\(name)' stale @u && keyctl show @u", session: session)
        #expect(planted.stdout.contains(name), "\(planted.stdout) \(planted.stderr)")
        #expect(try user.shell("\(binary) logout", session: session).exitCode == 0)
        let left = try user.shell("keyctl show @u", session: session)
        #expect(!left.stdout.contains("portal-token:"), "left in the user keyring: \(left.stdout)")
    }
}
