import Foundation
import Glibc

/// A real TPM 2.0 for a test: Debian's swtpm on a Unix socket of its own, with its own state
/// (so a second one is another machine's TPM), reached through tpm2-tss's swtpm TCTI. It has no
/// resource manager in front, as a TPM in a VM may not: whatever portal-token loads it must flush.
public final class SoftwareTPM: @unchecked Sendable {
    public let directory: String
    private let process: RunningProcess

    /// The TCTI portal-token and tpm2-tools reach it through (`TPM2TOOLS_TCTI`).
    public var tcti: String { "swtpm:path=\(directory)/tpm.sock" }

    public init() throws {
        directory =
            FileManager.default.temporaryDirectory.appendingPathComponent("portal-token-tpm-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: directory + "/state", withIntermediateDirectories: true)
        guard
            let swtpm = ["/usr/bin/swtpm", "/bin/swtpm"].first(where: {
                FileManager.default.isExecutableFile(atPath: $0)
            })
        else { throw ContractFailure("swtpm is not installed: run contrib/deps.sh test") }
        process = try RunningProcess(
            swtpm,
            [
                "socket", "--tpm2", "--tpmstate", "dir=\(directory)/state",
                "--server", "type=unixio,path=\(directory)/tpm.sock",
                "--ctrl", "type=unixio,path=\(directory)/tpm.sock.ctrl",
                "--flags", "not-need-init,startup-clear",
            ], environment: ProcessInfo.processInfo.environment)
        let deadline = Date().addingTimeInterval(10)
        while access(directory + "/tpm.sock", F_OK) != 0 || access(directory + "/tpm.sock.ctrl", F_OK) != 0 {
            guard Date() < deadline else { throw ContractFailure("swtpm did not start: \(process.stderr)") }
            usleep(20_000)
        }
    }

    deinit {
        kill(process.pid, SIGTERM)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A tpm2-tools command against this TPM (`tpm2_pcrextend`, `tpm2_dictionarylockout`, …).
    @discardableResult
    public func tool(_ name: String, _ arguments: [String]) throws -> ProcessResult {
        let result = try ProcessRunner.run(
            "/usr/bin/" + name, arguments,
            environment: ProcessRunner.environment(["TPM2TOOLS_TCTI": tcti, "TSS2_LOG": "all+NONE"]), timeout: 30)
        guard result.exitCode == 0 else { throw ContractFailure("\(name) failed: \(result.stderr)") }
        return result
    }

    /// Stops it answering (SIGSTOP) until `resume`.
    public func pause() { kill(process.pid, SIGSTOP) }
    public func resume() { kill(process.pid, SIGCONT) }

    /// Puts the TPM into dictionary-attack lockout: wrong authorization values for an object of
    /// its own until the failure counter reaches the TPM's limit.
    public func lockOut() throws {
        let work = directory + "/lockout"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        try "secret\n".write(toFile: work + "/data", atomically: false, encoding: .utf8)
        try tool("tpm2_createprimary", ["-Q", "-C", "o", "-c", work + "/primary.ctx"])
        try tool("tpm2_flushcontext", ["-t"])
        try tool(
            "tpm2_create",
            [
                "-Q", "-C", work + "/primary.ctx", "-p", "right", "-i", work + "/data", "-u", work + "/k.pub", "-r",
                work + "/k.priv",
            ])
        try tool("tpm2_flushcontext", ["-t"])
        try tool(
            "tpm2_load",
            ["-Q", "-C", work + "/primary.ctx", "-u", work + "/k.pub", "-r", work + "/k.priv", "-c", work + "/k.ctx"])
        try tool("tpm2_flushcontext", ["-t"])
        for _ in 0..<4 {
            _ = try? tool("tpm2_unseal", ["-c", work + "/k.ctx", "-p", "wrong"])
            try tool("tpm2_flushcontext", ["-t"])
        }
        let state = try tool("tpm2_getcap", ["properties-variable"]).stdout
        guard state.contains("inLockout:                 1") else {
            throw ContractFailure("the TPM did not go into lockout:\n\(state)")
        }
    }
}
