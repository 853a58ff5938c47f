import Foundation

/// What a finished child process left behind.
public struct ProcessResult: Sendable {
    public var exitCode: Int32
    public var stdout: String
    public var stderr: String
    /// How long it ran, in seconds.
    public var duration: Double
}

/// Runs programs as a user would, with their output captured in files (no pipe can fill up).
public enum ProcessRunner {
    /// The portal-token binary under test: `PORTAL_TOKEN_BIN`, else the one built beside the tests.
    public static var portalTokenPath: String {
        if let path = ProcessInfo.processInfo.environment["PORTAL_TOKEN_BIN"], !path.isEmpty { return path }
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return executable.deletingLastPathComponent().appendingPathComponent("portal-token").path
    }

    @discardableResult
    public static func run(_ executable: String, _ arguments: [String] = [], stdin: String? = nil,
                           environment: [String: String]? = nil, timeout: Double = 30,
                           directory: String? = nil) throws -> ProcessResult {
        let scratch = FileManager.default.temporaryDirectory
            .appendingPathComponent("portal-token-run-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let outURL = scratch.appendingPathComponent("out"), errURL = scratch.appendingPathComponent("err")
        FileManager.default.createFile(atPath: outURL.path, contents: nil)
        FileManager.default.createFile(atPath: errURL.path, contents: nil)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        process.standardOutput = try FileHandle(forWritingTo: outURL)
        process.standardError = try FileHandle(forWritingTo: errURL)
        let input = Pipe()
        if stdin != nil {
            process.standardInput = input
        } else {
            process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        }
        let started = Date()
        try process.run()
        if let stdin {
            try input.fileHandleForWriting.write(contentsOf: Data(stdin.utf8))
            try input.fileHandleForWriting.close()
        }
        let deadline = started.addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(2000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw ProcessTimeout(command: ([executable] + arguments).joined(separator: " "), seconds: timeout)
        }
        process.waitUntilExit()
        return ProcessResult(
            exitCode: process.terminationStatus,
            stdout: (try? String(contentsOf: outURL, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOf: errURL, encoding: .utf8)) ?? "",
            duration: Date().timeIntervalSince(started))
    }

    /// Runs portal-token itself.
    @discardableResult
    public static func portalToken(_ arguments: [String], stdin: String? = nil,
                                   environment: [String: String]? = nil, timeout: Double = 30) throws -> ProcessResult {
        try run(portalTokenPath, arguments, stdin: stdin, environment: environment, timeout: timeout)
    }

    /// The environment of the test process with some variables changed (nil removes one).
    public static func environment(_ changes: [String: String?] = [:]) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        for (name, value) in changes { environment[name] = value }
        return environment
    }
}

public struct ProcessTimeout: Error, CustomStringConvertible {
    public let command: String
    public let seconds: Double
    public var description: String { "\(command) did not finish within \(seconds) s" }
}
