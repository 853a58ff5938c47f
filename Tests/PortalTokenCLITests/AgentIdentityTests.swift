import Foundation
import Glibc
import PortalTokenCore
import PortalTokenTestSupport
import Testing

/// Cgroups of the suite's own under the unified hierarchy, made as systemd or an engine would make
/// them, and removed (leaf first) when the test is done.
final class TestCgroups {
    static let hierarchy = "/sys/fs/cgroup/unified"
    /// The top of the tree: a slice of a name no other run uses.
    let top = "portal-token-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).slice"
    private var made: [String] = []

    deinit {
        for path in made.reversed() { rmdir(Self.hierarchy + path) }
    }

    /// Makes `/TOP/RELATIVE` and its parents; returns the path as `/proc/PID/cgroup` names it.
    func make(_ relative: String) throws -> String {
        var path = ""
        for component in ([top] + relative.split(separator: "/").map(String.init)) {
            path += "/" + component
            if mkdir(Self.hierarchy + path, 0o755) == 0 {
                made.append(path)
            } else if errno != EEXIST {
                throw CgroupFailure(path: path, errno: errno)
            }
        }
        return path
    }

    /// A command that first moves itself into the cgroup at `path`.
    static func inside(_ path: String, _ command: [String]) -> [String] {
        ["/bin/sh", "-c", "echo $$ > \"$0/cgroup.procs\" && exec \"$@\"", hierarchy + path] + command
    }

    struct CgroupFailure: Error, CustomStringConvertible {
        var path: String
        var errno: Int32
        var description: String { "cannot make the cgroup \(path): \(String(cString: strerror(errno)))" }
    }
}

@Suite("the agent's word on who is asking", .serialized)
struct AgentIdentityTests {
    static let containerID = "3f2a" + String(repeating: "0123456789abcdef", count: 3) + "012345678901"

    /// `command` in its own user and pid namespaces (so the default never serves it), moved first
    /// into the cgroup at `path`.
    func sandboxed(_ harness: AgentHarness, in path: String, _ command: [String]) throws -> ProcessResult {
        let full = TestCgroups.inside(path, ["/usr/bin/unshare", "-Urpf", "--mount-proc"] + command)
        return try ProcessRunner.run(full[0], Array(full.dropFirst()), environment: harness.clientEnvironment())
    }

    @Test("a child cgroup named like a container below a unit meets no container rule, and is refused")
    func childCgroupNamedLikeContainer() throws {
        let harness = try AgentHarness(
            rules: "rule build\n    container docker:3f2a*\n    allow token *\n")
        let token = try harness.signIn()
        let cgroups = TestCgroups()
        // The container's own scope, as Docker's systemd driver makes it: the rule is for it.
        let real = try cgroups.make("docker-\(Self.containerID).scope")
        let served = try sandboxed(harness, in: real, [ProcessRunner.portalTokenPath, "token"])
        #expect(served.exitCode == 0 && served.stdout == token + "\n", "\(served.stderr)")

        // A unit with a delegated cgroup names a child of its own like that container.
        let forged = try cgroups.make("ci.service/docker-\(Self.containerID).scope")
        let result = try sandboxed(harness, in: forged, [ProcessRunner.portalTokenPath, "token"])
        #expect(result.exitCode == 4, "\(result.stdout)")
        #expect(!result.stdout.contains(token))
        #expect(result.stderr.contains("names a container or sandbox below the unit or container that holds it"))
        #expect(result.stderr.contains("(decided by identity)"))
        let line = try #require(harness.log.split(separator: "\n").last { $0.contains("refused GET /v1/token") })
        #expect(!line.contains("container docker:"), "\(line)")
        #expect(line.contains("unit ci.service"), "\(line)")
    }

    @Test("a child cgroup named like another unit meets no rule for that unit")
    func childCgroupNamedLikeUnit() throws {
        let harness = try AgentHarness(rules: "rule runner\n    unit ci-runner.service\n    allow token *\n")
        let token = try harness.signIn()
        let cgroups = TestCgroups()
        // The runner's own unit, and a cgroup it delegated below itself: the unit is still its own.
        let real = try cgroups.make("ci-runner.service/job-1")
        let served = try sandboxed(harness, in: real, [ProcessRunner.portalTokenPath, "token"])
        #expect(served.exitCode == 0 && served.stdout == token + "\n", "\(served.stderr)")

        let forged = try cgroups.make("x.service/ci-runner.service")
        let result = try sandboxed(harness, in: forged, [ProcessRunner.portalTokenPath, "token"])
        #expect(result.exitCode == 4, "\(result.stdout)")
        #expect(!result.stdout.contains(token))
        #expect(result.stderr.contains("(decided by default)"), "\(result.stderr)")
        let line = try #require(harness.log.split(separator: "\n").last { $0.contains("refused GET /v1/token") })
        #expect(line.contains("unit x.service"), "\(line)")
    }

    @Test("a sandbox with a forged /.flatpak-info meets no flatpak rule; Flatpak's scope does")
    func forgedFlatpakInfo() throws {
        let harness = try AgentHarness(rules: "rule editor\n    flatpak org.example.Editor\n    allow token *\n")
        let token = try harness.signIn()
        let forged = harness.scratch + "/flatpak-info"
        try "[Application]\nname=org.example.Editor\nruntime=runtime/org.example.Platform/x86_64/1\n".write(
            toFile: forged, atomically: false, encoding: .utf8)
        // A root of its own: the system's directories, the binary's, the harness's, and the file.
        var arguments = [
            "--unshare-user", "--unshare-pid", "--uid", "0", "--gid", "0", "--proc", "/proc", "--dev", "/dev",
        ]
        for entry in ["bin", "lib", "lib64", "sbin"] {
            if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/" + entry) {
                arguments += ["--symlink", target, "/" + entry]
            }
        }
        for directory in ["/usr", "/etc", "/opt"] where FileManager.default.fileExists(atPath: directory) {
            arguments += ["--ro-bind", directory, directory]
        }
        let binaries = URL(fileURLWithPath: ProcessRunner.portalTokenPath).resolvingSymlinksInPath()
            .deletingLastPathComponent().path
        arguments += ["--ro-bind", binaries, binaries, "--bind", harness.scratch, harness.scratch]
        arguments += ["--ro-bind", forged, "/.flatpak-info", ProcessRunner.portalTokenPath, "token"]
        let result = try ProcessRunner.run("/usr/bin/bwrap", arguments, environment: harness.clientEnvironment())
        #expect(result.exitCode == 4, "\(result.stdout) \(result.stderr)")
        #expect(!result.stdout.contains(token))
        #expect(result.stderr.contains("(decided by default)"), "\(result.stderr)")
        let line = try #require(harness.log.split(separator: "\n").last { $0.contains("refused GET /v1/token") })
        #expect(!line.contains("flatpak org.example.Editor"), "\(line)")

        // The same app in the scope Flatpak has systemd make for it.
        let cgroups = TestCgroups()
        let scope = try cgroups.make("app-flatpak-org.example.Editor-7.scope")
        let served = try sandboxed(harness, in: scope, [ProcessRunner.portalTokenPath, "token"])
        #expect(served.exitCode == 0 && served.stdout == token + "\n", "\(served.stderr)")
    }

    /// A process that forks; the child connects to the agent's socket, waits, then does `then`
    /// (`stay`, `exit`, or `exec` of sleep), while the parent sends a token request on the same
    /// descriptor once that is done and prints the answer.
    static let forkingClient = #"""
        use Socket;
        socket(my $s, AF_UNIX, SOCK_STREAM, 0) or die "socket: $!";
        my $child = fork();
        if ($child == 0) {
            connect($s, pack_sockaddr_un($ARGV[0])) or die "connect: $!";
            select(undef, undef, undef, 0.5);
            exit 0 if $ARGV[1] eq "exit";
            exec "/usr/bin/sleep", "4" if $ARGV[1] eq "exec";
            select(undef, undef, undef, 4);
            exit 0;
        }
        select(undef, undef, undef, 1.5);
        waitpid($child, 0) if $ARGV[1] eq "exit";
        syswrite($s, "GET /v1/token HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        local $/;
        print <$s>;
        kill "TERM", $child;
        """#

    @Test("an exe rule is not met by a connecting process that has exec'd or ended before the request")
    func executableRecheckedAtRequest() throws {
        let harness = try AgentHarness(rules: "rule perl\n    exe /usr/bin/perl*\n    allow token *\n")
        let token = try harness.signIn()
        func ask(_ then: String) throws -> String {
            try ProcessRunner.run(
                "/usr/bin/unshare", ["-Ur", "/usr/bin/perl", "-e", Self.forkingClient, harness.socket, then],
                environment: harness.clientEnvironment()
            ).stdout
        }
        let stayed = try ask("stay")
        #expect(stayed.hasPrefix("HTTP/1.1 200 "), "\(stayed)")
        #expect(stayed.contains(token))

        let execed = try ask("exec")
        #expect(execed.hasPrefix("HTTP/1.1 403 "), "\(execed)")
        #expect(!execed.contains(token))
        #expect(execed.contains("has run another program since the agent accepted the connection"), "\(execed)")

        let ended = try ask("exit")
        #expect(ended.hasPrefix("HTTP/1.1 403 "), "\(ended)")
        #expect(!ended.contains(token))
        #expect(ended.contains("the process that connected has ended"), "\(ended)")
    }
}
