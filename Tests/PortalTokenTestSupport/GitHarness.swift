import Foundation

/// Real git, driven as a user's git would drive a credential helper: `credential.helper` set to
/// `portal-token`, found on PATH as `git-credential-portal-token` (a symlink to the binary),
/// with an askpass program that shows when git had to ask the user instead.
public final class GitHarness: @unchecked Sendable {
    public let directory: URL
    public private(set) var environment: [String: String]
    /// What the backend needs kept alive while the harness lives (a private session bus).
    private var backendState: AnyObject?

    public init(backend: TestBackend, extraEnvironment: [String: String?] = [:]) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("portal-token-git-\(UUID().uuidString)")
        let bin = directory.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: bin.appendingPathComponent("git-credential-portal-token").path,
                                                   withDestinationPath: ProcessRunner.portalTokenPath)
        let askpass = bin.appendingPathComponent("askpass")
        // The same askpass as git's own helper tests: it names the prompt on stderr and answers
        // "askpass-username" or "askpass-password".
        try writeExecutableScript("""
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
        ]
        for (name, value) in backend.environment(directory: directory) { changes[name] = value }
        for (name, value) in extraEnvironment { changes[name] = value }
        environment = ProcessRunner.environment(changes)
        backendState = try backend.prepare(directory: directory, environment: &environment)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// `git -c credential.helper=portal-token [-c …] credential OPERATION` with `input` on stdin.
    @discardableResult
    public func credential(_ operation: String, _ input: String, config: [String] = []) throws -> ProcessResult {
        var arguments = ["-c", "credential.helper=portal-token"]
        for entry in config { arguments += ["-c", entry] }
        arguments += ["credential", operation]
        return try ProcessRunner.run("/usr/bin/git", arguments, stdin: input, environment: environment, timeout: 30)
    }

    /// portal-token itself, under the helper's environment.
    @discardableResult
    public func portalToken(_ arguments: [String], stdin: String? = nil) throws -> ProcessResult {
        try ProcessRunner.run(ProcessRunner.portalTokenPath, arguments, stdin: stdin, environment: environment, timeout: 30)
    }

    /// A host name no other test uses, so tests can share one keyring.
    public static func uniqueHost(_ stem: String) -> String {
        "\(stem)-\(UInt32.random(in: 0...UInt32.max)).tld"
    }
}
