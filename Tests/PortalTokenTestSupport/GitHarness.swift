import Foundation

/// The real gits the end-to-end suites drive: Debian 12's git 2.39, and a current git 2.47
/// (Debian trixie's, run with its own libc through its loader; contrib/testing/current-git.sh
/// fetches it and contrib/test.sh names its wrapper in GIT_CURRENT). Only the current one speaks
/// the credential protocol's capabilities (authtype, state: git 2.46+) and passes
/// password_expiry_utc and oauth_refresh_token between helpers and callers (git 2.41+).
public enum RealGit: String, CaseIterable, Sendable, CustomStringConvertible {
    case debian12 = "git 2.39"
    case current = "git 2.47"

    public var description: String { rawValue }

    /// The git to run. A missing current git fails the test: it is never skipped.
    public func executable() throws -> String {
        switch self {
        case .debian12:
            return "/usr/bin/git"
        case .current:
            guard let path = ProcessInfo.processInfo.environment["GIT_CURRENT"], !path.isEmpty else {
                throw ContractFailure(
                    "GIT_CURRENT is not set: run the suite through contrib/test.sh, "
                        + "which fetches git 2.47 with contrib/testing/current-git.sh")
            }
            return path
        }
    }
}

/// Real git, driven as a user's git would drive a credential helper: `credential.helper` set to
/// `portal-token`, found on PATH as `git-credential-portal-token` (a symlink to the binary),
/// with an askpass program that shows when git had to ask the user instead.
public final class GitHarness: @unchecked Sendable {
    public let directory: URL
    /// Which git `credential` runs.
    public let git: RealGit
    public private(set) var environment: [String: String]
    /// What the backend needs kept alive while the harness lives (a private session bus).
    private var backendState: AnyObject?

    public init(backend: TestBackend, git: RealGit = .debian12, extraEnvironment: [String: String?] = [:]) throws {
        self.git = git
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "portal-token-git-\(UUID().uuidString)")
        let bin = directory.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: bin.appendingPathComponent("git-credential-portal-token").path,
            withDestinationPath: ProcessRunner.portalTokenPath)
        let askpass = bin.appendingPathComponent("askpass")
        // The same askpass as git's own helper tests: it names the prompt on stderr and answers
        // "askpass-username" or "askpass-password".
        try writeExecutableScript(
            """
            #!/bin/sh
            echo >&2 askpass: $*
            what=$(echo $1 | cut -d" " -f1 | tr A-Z a-z | tr -cd a-z)
            echo "askpass-$what"
            """, to: askpass)
        let home = directory.appendingPathComponent("home")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        var changes: [String: String?] = [
            "PATH": bin.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"),
            "GIT_ASKPASS": askpass.path,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": home.appendingPathComponent(".gitconfig").path,
            "GIT_TERMINAL_PROMPT": "0",
            "XDG_CONFIG_HOME": home.appendingPathComponent(".config").path,
            "XDG_DATA_HOME": home.appendingPathComponent(".local/share").path,
            // The audit log and the session lock of this harness alone.
            "XDG_STATE_HOME": home.appendingPathComponent(".local/state").path,
        ]
        for (name, value) in backend.environment(directory: directory) { changes[name] = value }
        for (name, value) in extraEnvironment { changes[name] = value }
        environment = ProcessRunner.environment(changes)
        backendState = try backend.prepare(directory: directory, environment: &environment)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// `git -c credential.helper=portal-token [-c …] credential OPERATION` with `input` on stdin,
    /// run by the harness's git, under `environment` when given.
    @discardableResult
    public func credential(
        _ operation: String, _ input: String, config: [String] = [],
        environment: [String: String]? = nil
    ) throws -> ProcessResult {
        var arguments = ["-c", "credential.helper=portal-token"]
        for entry in config { arguments += ["-c", entry] }
        arguments += ["credential", operation]
        return try ProcessRunner.run(
            try git.executable(), arguments, stdin: input,
            environment: environment ?? self.environment, timeout: 30)
    }

    /// portal-token itself, under the helper's environment.
    @discardableResult
    public func portalToken(_ arguments: [String], stdin: String? = nil) throws -> ProcessResult {
        try ProcessRunner.run(
            ProcessRunner.portalTokenPath, arguments, stdin: stdin, environment: environment, timeout: 30)
    }

    /// A host name no other test uses, so tests can share one keyring.
    public static func uniqueHost(_ stem: String) -> String {
        "\(stem)-\(UInt32.random(in: 0...UInt32.max)).tld"
    }
}
