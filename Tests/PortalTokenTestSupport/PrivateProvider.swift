import Foundation

/// The Secret Service providers the suite runs against, each on a bus of its own
/// (contrib/testing/provider.sh; docs/storage.md, "Providers").
public enum TestProvider: String, CaseIterable, Sendable, CustomStringConvertible {
    case gnomeKeyring42 = "gnome-keyring-42"
    case gnomeKeyring48 = "gnome-keyring-48"
    case keepassxc
    case kwallet

    public var description: String { rawValue }

    /// The name `doctor` and `status` give it.
    public var productName: String {
        switch self {
        case .gnomeKeyring42, .gnomeKeyring48: "gnome-keyring"
        case .keepassxc: "KeePassXC"
        case .kwallet: "KWallet"
        }
    }
}

/// One provider started by contrib/testing/provider.sh on a private session bus, under a HOME of
/// its own, unlocked; stopped (daemon and bus, by their PIDs) when the value goes.
public final class PrivateProvider: @unchecked Sendable {
    public let provider: TestProvider
    public let directory: URL
    /// The environment a client of this provider runs with: the test process's, with the
    /// provider's bus, HOME and XDG directories, and no display.
    public let environment: [String: String]

    /// - Parameter withoutCollection: KWallet only: a daemon with no wallet, so no collection
    ///   and no `default` alias.
    public init(_ provider: TestProvider, withoutCollection: Bool = false) throws {
        self.provider = provider
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "portal-token-provider-\(UUID().uuidString)")
        try Self.script(
            ["start", provider.rawValue, directory.path],
            environment: withoutCollection ? ["PROVIDER_NO_COLLECTION": "1"] : [:])
        let lines = try String(contentsOf: directory.appendingPathComponent("env"), encoding: .utf8)
        var changes: [String: String?] = ["DISPLAY": nil, "WAYLAND_DISPLAY": nil]
        for line in lines.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            changes[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        environment = ProcessRunner.environment(changes)
    }

    /// Locks the default collection, as a screen lock would.
    public func lock() throws { try Self.script(["lock", directory.path]) }

    /// Unlocks it as its user would: the provider starts again with its password.
    public func unlock() throws { try Self.script(["unlock", directory.path]) }

    deinit { _ = try? Self.script(["stop", directory.path]) }

    /// contrib/testing/provider.sh, found from this file's place in the repository.
    static let scriptPath = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("contrib/testing/provider.sh").path

    private static func script(_ arguments: [String], environment: [String: String?] = [:]) throws {
        let result = try ProcessRunner.run(
            scriptPath, arguments, environment: ProcessRunner.environment(environment), timeout: 120)
        guard result.exitCode == 0 else {
            throw ContractFailure("provider.sh \(arguments.joined(separator: " ")) failed: \(result.stderr)")
        }
    }
}

/// A libsecret program other than portal-token (git's C helper, `secret-tool`), run as a client
/// of the session's provider. kwalletd5 fails about one encrypted session in a hundred
/// (docs/storage.md, "Providers"), which those programs do not work around: a run the provider
/// refused for its session is run again, three times at most, and so is one `again` asks for.
public enum LibsecretClient {
    public static func run(
        _ executable: String, _ arguments: [String], stdin: String? = nil, environment: [String: String]? = nil,
        timeout: Double = 20, again: (ProcessResult) -> Bool = { _ in false }
    ) throws -> ProcessResult {
        var result: ProcessResult
        var runs = 0
        repeat {
            runs += 1
            result = try ProcessRunner.run(
                executable, arguments, stdin: stdin, environment: environment ?? ProcessRunner.environment(),
                timeout: timeout)
        } while runs < 3 && ((result.exitCode != 0 && isRefusedSession(result)) || again(result))
        return result
    }

    /// Whether the provider refused the encrypted session, or libsecret could not decode a secret
    /// it sent (its assertion on stderr).
    public static func metFailedSession(_ result: ProcessResult) -> Bool {
        isRefusedSession(result) || result.stderr.contains("secret_value_get_text: assertion")
    }

    /// kwalletd5's answers for a session it could not use.
    static func isRefusedSession(_ result: ProcessResult) -> Bool {
        result.stderr.contains("Can't find session /org/freedesktop/secrets/session/")
            || result.stderr.contains("Client public key size is invalid")
    }
}
