import Foundation
import Glibc
import PortalTokenTestSupport
import Testing

/// The encrypted file's key sealed by a real TPM 2.0 (swtpm), through real git: the file opens
/// with no passphrase on its machine, another machine's TPM or a changed PCR is refused and the
/// recovery passphrase opens it, and every TPM failure is exit 4 within its bound with the file
/// untouched (docs/storage.md, "A key sealed by the TPM"). One test at a time: each starts its own
/// swtpm and runs git and portal-token many times, and the suites beside it time their bounds on
/// the same two cores.
@Suite("the file's key sealed by the TPM", .serialized)
struct TPMSealedFileTests {
    /// A git whose file store seals its key to `tpm`; the key cache is off, so every run asks the TPM.
    static func harness(_ tpm: SoftwareTPM, pcrs: String? = nil) throws -> GitHarness {
        try GitHarness(
            backend: .file,
            extraEnvironment: [
                "PORTAL_TOKEN_FILE_TPM": "on", "PORTAL_TOKEN_FILE_TPM_PCRS": pcrs, "TPM2TOOLS_TCTI": tpm.tcti,
                "PORTAL_TOKEN_KEY_CACHE_TIMEOUT": "0",
            ])
    }

    /// A git whose file store seals its key to a swtpm of its own, holding one credential, with
    /// `password`, for a host of its own.
    static func sealedStore(_ stem: String, password: String, pcrs: String? = nil) throws -> (
        tpm: SoftwareTPM, git: GitHarness, host: String
    ) {
        let tpm = try SoftwareTPM()
        let git = try harness(tpm, pcrs: pcrs)
        let host = GitHarness.uniqueHost(stem)
        let approve = try git.credential(
            "approve", "protocol=https\nhost=\(host)\nusername=u\npassword=\(password)\n\n")
        #expect(approve.exitCode == 0, "\(approve.stderr)")
        return (tpm, git, host)
    }

    static func storePath(_ git: GitHarness) -> String { git.directory.appendingPathComponent("store").path }

    static func storeBytes(_ git: GitHarness) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: storePath(git))))
    }

    /// The harness's environment without any passphrase source, and with `changes`.
    static func withoutPassphrase(_ git: GitHarness, _ changes: [String: String] = [:]) -> [String: String] {
        var environment = git.environment
        environment["PORTAL_TOKEN_PASSPHRASE"] = nil
        for (name, value) in changes { environment[name] = value }
        return environment
    }

    static func fill(_ git: GitHarness, _ host: String, environment: [String: String]) throws -> ProcessResult {
        try git.credential("fill", "protocol=https\nhost=\(host)\n\n", environment: environment)
    }

    static func get(_ git: GitHarness, _ host: String, environment: [String: String]) throws -> ProcessResult {
        try ProcessRunner.run(
            ProcessRunner.portalTokenPath, ["get"], stdin: "protocol=https\nhost=\(host)\n\n", environment: environment,
            timeout: 30)
    }

    @Test("a store sealed to the TPM round-trips through git with no passphrase source set")
    func roundTrip() throws {
        let tpm = try SoftwareTPM()
        let git = try Self.harness(tpm)
        // The swtpm lives as long as the test does, used or not after this line.
        defer { withExtendedLifetime(tpm) {} }
        let host = GitHarness.uniqueHost("tpm")
        // Created with its recovery passphrase, as every sealed file is.
        let approve = try git.credential("approve", "protocol=https\nhost=\(host)\nusername=u\npassword=sealed-pw\n\n")
        #expect(approve.exitCode == 0, "\(approve.stderr)")
        let bytes = try Self.storeBytes(git)
        #expect(bytes[8] == 0 && bytes[9] == 2, "the file is not in format version 2")
        let filled = try Self.fill(git, host, environment: Self.withoutPassphrase(git))
        #expect(filled.exitCode == 0, "\(filled.stderr)")
        #expect(filled.stdout.contains("password=sealed-pw\n"))
        #expect(!filled.stderr.contains("askpass"), "git had to ask: \(filled.stderr)")
        // status and doctor say what opens it, and doctor wants no passphrase source for it.
        let status = try ProcessRunner.run(
            ProcessRunner.portalTokenPath, ["status", "--format", "json"],
            environment: Self.withoutPassphrase(git, ["PORTAL_AUTH_ENVIRONMENT_ID": "tpm-environment"]), timeout: 30)
        #expect(
            status.stdout.contains(#""fileKey":"sealed by the TPM; the passphrase recovers it""#), "\(status.stdout)")
        let file = try Self.doctorFileCheck(Self.withoutPassphrase(git))
        #expect(file["status"] as? String == "ok", "\(file)")
        #expect((file["detail"] as? String)?.contains("key: sealed by the TPM") == true, "\(file)")
        // A write with the same key keeps the sealed object: no TPM command, the same bytes there.
        let second = try git.credential(
            "approve", "protocol=https\nhost=other-\(host)\nusername=u\npassword=p2\n\n",
            environment: Self.withoutPassphrase(git))
        #expect(second.exitCode == 0, "\(second.stderr)")
        let rewritten = try Self.storeBytes(git)
        let sealedLength = Int(bytes[88]) << 8 | Int(bytes[89])
        #expect(Array(rewritten[83..<(90 + sealedLength)]) == Array(bytes[83..<(90 + sealedLength)]))
    }

    @Test(
        "the file on another machine's TPM is refused, the file left as it is, and opens with the recovery passphrase")
    func anotherTPM() throws {
        let (tpm, git, host) = try Self.sealedStore("tpm-moved", password: "moved-pw")
        // The swtpm lives as long as the test does, used or not after this line.
        defer { withExtendedLifetime(tpm) {} }
        let before = try Self.storeBytes(git)
        let other = try SoftwareTPM()
        let refused = try Self.get(git, host, environment: Self.withoutPassphrase(git, ["TPM2TOOLS_TCTI": other.tcti]))
        #expect(refused.exitCode == 4)
        #expect(refused.stderr.contains("sealed by another TPM"), "\(refused.stderr)")
        #expect(refused.stderr.contains("recovery passphrase"), "\(refused.stderr)")
        #expect(!refused.stdout.contains("moved-pw"))
        #expect(try Self.storeBytes(git) == before)
        var recovering = git.environment
        recovering["TPM2TOOLS_TCTI"] = other.tcti
        let recovered = try Self.get(git, host, environment: recovering)
        #expect(recovered.exitCode == 0, "\(recovered.stderr)")
        #expect(recovered.stdout.contains("password=moved-pw\n"))
        #expect(recovered.stderr.contains("opened with its recovery passphrase"), "\(recovered.stderr)")
        #expect(try Self.storeBytes(git) == before, "a read rewrote the file")
        // The next write seals it to the new machine's TPM: from then on it needs no passphrase there.
        let write = try git.credential(
            "approve", "protocol=https\nhost=\(host)\nusername=u\npassword=moved-pw-2\n\n", environment: recovering)
        #expect(write.exitCode == 0, "\(write.stderr)")
        let there = try Self.fill(git, host, environment: Self.withoutPassphrase(git, ["TPM2TOOLS_TCTI": other.tcti]))
        #expect(there.exitCode == 0 && there.stdout.contains("password=moved-pw-2\n"), "\(there.stderr)")
    }

    @Test("a changed PCR is refused with the recovery route named, and the recovery passphrase opens the file")
    func changedPCR() throws {
        let (tpm, git, host) = try Self.sealedStore("tpm-pcr", password: "pcr-pw", pcrs: "7")
        let sealed = try Self.storeBytes(git)
        #expect(Array(sealed[84..<88]) == [0, 0, 0, 0x80], "the file does not name PCR 7")
        #expect(try Self.get(git, host, environment: Self.withoutPassphrase(git)).exitCode == 0)
        try tpm.tool("tpm2_pcrextend", ["7:sha256=" + String(repeating: "ab", count: 32)])
        let refused = try Self.get(git, host, environment: Self.withoutPassphrase(git))
        #expect(refused.exitCode == 4)
        #expect(refused.stderr.contains("a PCR it is bound to has changed"), "\(refused.stderr)")
        #expect(refused.stderr.contains("recovery passphrase"))
        #expect(try Self.storeBytes(git) == sealed)
        let recovered = try Self.get(git, host, environment: git.environment)
        #expect(recovered.exitCode == 0 && recovered.stdout.contains("password=pcr-pw\n"), "\(recovered.stderr)")
        // Sealed again by the next write, to PCR 7's new value.
        #expect(
            try git.credential("approve", "protocol=https\nhost=x-\(host)\nusername=u\npassword=p\n\n").exitCode == 0)
        #expect(try Self.get(git, host, environment: Self.withoutPassphrase(git)).exitCode == 0)
    }

    enum Failure: String, CaseIterable, CustomStringConvertible {
        case lockout = "a TPM in dictionary-attack lockout"
        case absent = "no TPM"
        case withoutResourceManager = "the TPM without the kernel's resource manager"
        case stalled = "a TPM that stopped answering"
        var description: String { rawValue }
    }

    @Test(
        "a TPM failure is exit 4 within its bound, the file left byte for byte as it was", arguments: Failure.allCases)
    func failures(_ failure: Failure) throws {
        let (tpm, git, host) = try Self.sealedStore("tpm-fails", password: "kept-pw")
        let before = try Self.storeBytes(git)
        var environment = Self.withoutPassphrase(git)
        let expected: String
        switch failure {
        case .lockout:
            try tpm.lockOut()
            expected = "dictionary-attack lockout"
        case .absent:
            environment["TPM2TOOLS_TCTI"] = "device:" + git.directory.appendingPathComponent("tpmrm0").path
            expected = "no TPM could be reached"
        case .withoutResourceManager:
            environment["TPM2TOOLS_TCTI"] = "device:/dev/tpm0"
            expected = "without the kernel's resource manager"
        case .stalled:
            tpm.pause()
            expected = "did not answer in time"
        }
        defer { tpm.resume() }
        let started = Date()
        let result = try Self.get(git, host, environment: environment)
        let elapsed = Date().timeIntervalSince(started)
        #expect(result.exitCode == 4, "\(result.stderr)")
        #expect(result.stderr.contains(expected), "\(result.stderr)")
        #expect(!result.stdout.contains("kept-pw"))
        // A TPM that stopped answering is waited for 4 s (TPMKeySealer's bound); the others fail at once.
        #expect(elapsed < (failure == .stalled ? 8 : 5), "it took \(elapsed) s")
        #expect(try Self.storeBytes(git) == before)
        // A write fails as plainly and writes nothing.
        if failure != .stalled {
            let write = try git.credential(
                "approve", "protocol=https\nhost=\(host)\nusername=u\npassword=new-pw\n\n", environment: environment)
            #expect(try Self.storeBytes(git) == before, "\(write.stderr)")
            let rekey = try Self.fileKey([], environment: environment)
            #expect(rekey.exitCode == 4 && rekey.stderr.contains(expected), "\(rekey.stderr)")
            #expect(try Self.storeBytes(git) == before)
            // Opened by the recovery passphrase, then the new seal fails (or does not unseal):
            // nothing is written either.
            var recovering = environment
            recovering["PORTAL_TOKEN_PASSPHRASE"] = git.environment["PORTAL_TOKEN_PASSPHRASE"]
            let reseal = try Self.fileKey([], environment: recovering)
            #expect(reseal.exitCode == 4 && reseal.stderr.contains("nothing was written"), "\(reseal.stderr)")
            #expect(try Self.storeBytes(git) == before)
        }
    }

    /// doctor's check of the encrypted file.
    static func doctorFileCheck(_ environment: [String: String]) throws -> [String: Any] {
        let doctor = try ProcessRunner.run(
            ProcessRunner.portalTokenPath, ["doctor", "--format", "json"], environment: environment, timeout: 30)
        let object = try JSONSerialization.jsonObject(with: Data(doctor.stdout.utf8)) as? [String: Any]
        let checks = object?["checks"] as? [[String: Any]] ?? []
        return try #require(checks.first { $0["check"] as? String == "encrypted file" }, "no encrypted file check")
    }

    static func fileKey(_ arguments: [String], environment: [String: String]) throws -> ProcessResult {
        try ProcessRunner.run(
            ProcessRunner.portalTokenPath, ["file-key"] + arguments, environment: environment, timeout: 30)
    }

    @Test("file-key seals a passphrase file now, binds it to other PCRs, and unseals it, each in one rewrite")
    func fileKeyReseals() throws {
        let tpm = try SoftwareTPM()
        let git = try Self.harness(tpm)
        // The swtpm lives as long as the test does, used or not after this line.
        defer { withExtendedLifetime(tpm) {} }
        let host = GitHarness.uniqueHost("tpm-rekey")
        var off = git.environment
        off["PORTAL_TOKEN_FILE_TPM"] = "off"
        let approve = try git.credential(
            "approve", "protocol=https\nhost=\(host)\nusername=u\npassword=rekey-pw\n\n", environment: off)
        #expect(approve.exitCode == 0, "\(approve.stderr)")
        #expect(try Self.storeBytes(git)[9] == 1)
        // doctor says the file is not kept as the settings ask, and what re-keys it.
        let unsealedDetail = try Self.doctorFileCheck(git.environment)["detail"] as? String ?? ""
        #expect(
            unsealedDetail.contains(
                "key: the passphrase; the settings ask for: sealed by the TPM; the passphrase recovers it "
                    + "(portal-token file-key re-keys it now"), "\(unsealedDetail)")
        // Sealed now, not at the next write.
        let sealed = try Self.fileKey([], environment: git.environment)
        #expect(sealed.exitCode == 0, "\(sealed.stderr)")
        #expect(sealed.stderr.contains("file key: sealed by the TPM; the passphrase recovers it"), "\(sealed.stderr)")
        #expect(try Self.storeBytes(git)[9] == 2)
        #expect((try Self.doctorFileCheck(git.environment)["detail"] as? String)?.contains("settings ask") == false)
        let filled = try Self.fill(git, host, environment: Self.withoutPassphrase(git))
        #expect(filled.stdout.contains("password=rekey-pw\n"), "\(filled.stderr)")
        // Bound to PCR 7 with no passphrase at hand: the TPM opens the file to re-seal it.
        let bound = try Self.fileKey([], environment: Self.withoutPassphrase(git, ["PORTAL_TOKEN_FILE_TPM_PCRS": "7"]))
        #expect(bound.exitCode == 0 && bound.stderr.contains("bound to PCR 7;"), "\(bound.stderr)")
        #expect(Array(try Self.storeBytes(git)[84..<88]) == [0, 0, 0, 0x80])
        #expect(try Self.get(git, host, environment: Self.withoutPassphrase(git)).exitCode == 0)
        // Off: version 1 again, which the passphrase alone opens.
        let unsealed = try Self.fileKey([], environment: off)
        #expect(unsealed.exitCode == 0 && unsealed.stderr.contains("file key: the passphrase"), "\(unsealed.stderr)")
        #expect(try Self.storeBytes(git)[9] == 1)
        #expect(try Self.get(git, host, environment: Self.withoutPassphrase(git)).exitCode == 4)
        #expect(try Self.get(git, host, environment: git.environment).stdout.contains("password=rekey-pw\n"))
    }

    @Test("file-key after a PCR changed, the key still cached: sealed again to the new value, never the old copy")
    func fileKeyResealsWithCachedKey() throws {
        let tpm = try SoftwareTPM()
        let git = try Self.harness(tpm, pcrs: "7")
        // The swtpm lives as long as the test does, used or not after this line.
        defer { withExtendedLifetime(tpm) {} }
        let host = GitHarness.uniqueHost("tpm-cached")
        var cached = Self.withoutPassphrase(git, ["PORTAL_TOKEN_FILE_TPM_RECOVERY": "none"])
        cached["PORTAL_TOKEN_KEY_CACHE_TIMEOUT"] = "600"
        cached["PORTAL_TOKEN_FILE"] = git.directory.appendingPathComponent("cached-store").path
        let store = try ProcessRunner.run(
            ProcessRunner.portalTokenPath, ["store"], stdin: "protocol=https\nhost=\(host)\nusername=u\npassword=c\n\n",
            environment: cached, timeout: 30)
        #expect(store.exitCode == 0, "\(store.stderr)")
        defer { _ = try? ProcessRunner.run(ProcessRunner.portalTokenPath, ["lock"], environment: cached, timeout: 30) }
        try tpm.tool("tpm2_pcrextend", ["7:sha256=" + String(repeating: "cd", count: 32)])
        // The cache opens it still, so file-key never needs the TPM to read it.
        let rekeyed = try Self.fileKey([], environment: cached)
        #expect(rekeyed.exitCode == 0, "\(rekeyed.stderr)")
        var uncached = cached
        uncached["PORTAL_TOKEN_KEY_CACHE_TIMEOUT"] = "0"
        let opened = try Self.get(git, host, environment: uncached)
        #expect(opened.exitCode == 0 && opened.stdout.contains("password=c\n"), "\(opened.stderr)")
    }

    @Test("file-key on a file keyed for the TPM alone, a passphrase now asked for: refused without one, set with one")
    func fileKeyGivesAPassphrase() throws {
        let tpm = try SoftwareTPM()
        let git = try Self.harness(tpm)
        // The swtpm lives as long as the test does, used or not after this line.
        defer { withExtendedLifetime(tpm) {} }
        let host = GitHarness.uniqueHost("tpm-gains-passphrase")
        let alone = Self.withoutPassphrase(git, ["PORTAL_TOKEN_FILE_TPM_RECOVERY": "none"])
        let approve = try git.credential(
            "approve", "protocol=https\nhost=\(host)\nusername=u\npassword=g\n\n", environment: alone)
        #expect(approve.exitCode == 0, "\(approve.stderr)")
        let before = try Self.storeBytes(git)
        #expect(before[10] == 0)
        let refused = try Self.fileKey([], environment: Self.withoutPassphrase(git))
        #expect(refused.exitCode == 4 && refused.stderr.contains("--new-passphrase"), "\(refused.stderr)")
        #expect(try Self.storeBytes(git) == before)
        let file = git.directory.appendingPathComponent("first-passphrase").path
        try "a first passphrase\n".write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o600)
        let given = try Self.fileKey(["--new-passphrase-file", file], environment: Self.withoutPassphrase(git))
        #expect(given.exitCode == 0 && given.stderr.contains("the passphrase recovers it"), "\(given.stderr)")
        #expect(try Self.storeBytes(git)[10] != 0)
        let other = try SoftwareTPM()
        let recovered = try Self.get(
            git, host,
            environment: Self.withoutPassphrase(
                git, ["TPM2TOOLS_TCTI": other.tcti, "PORTAL_TOKEN_PASSPHRASE": "a first passphrase"]))
        #expect(recovered.exitCode == 0 && recovered.stdout.contains("password=g\n"), "\(recovered.stderr)")
        // Keyed for the TPM alone again, then file-tpm off: a passphrase of its own, version 1.
        #expect(try Self.fileKey([], environment: alone).exitCode == 0)
        #expect(try Self.storeBytes(git)[10] == 0)
        let off = Self.withoutPassphrase(git, ["PORTAL_TOKEN_FILE_TPM": "off"])
        let unsealed = try Self.fileKey(["--new-passphrase-file", file], environment: off)
        #expect(unsealed.exitCode == 0 && unsealed.stderr.contains("file key: the passphrase"), "\(unsealed.stderr)")
        #expect(try Self.storeBytes(git)[9] == 1)
        var byPassphrase = off
        byPassphrase["PORTAL_TOKEN_PASSPHRASE"] = "a first passphrase"
        #expect(try Self.get(git, host, environment: byPassphrase).stdout.contains("password=g\n"))
    }

    @Test(
        "file-key --new-passphrase-file on a sealed file: the TPM still opens it, only the new passphrase recovers it")
    func fileKeyNewPassphrase() throws {
        let (tpm, git, host) = try Self.sealedStore("tpm-new-passphrase", password: "np-pw")
        // The swtpm lives as long as the test does, used or not after this line.
        defer { withExtendedLifetime(tpm) {} }
        let file = git.directory.appendingPathComponent("new-passphrase").path
        try "the new recovery passphrase\n".write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o600)
        // Opened by the TPM: the current passphrase is not needed to change it.
        let rekeyed = try Self.fileKey(["--new-passphrase-file", file], environment: Self.withoutPassphrase(git))
        #expect(rekeyed.exitCode == 0 && rekeyed.stderr.contains("under its new passphrase"), "\(rekeyed.stderr)")
        #expect(try Self.get(git, host, environment: Self.withoutPassphrase(git)).stdout.contains("password=np-pw\n"))
        let other = try SoftwareTPM()
        var old = git.environment
        old["TPM2TOOLS_TCTI"] = other.tcti
        let refused = try Self.get(git, host, environment: old)
        #expect(refused.exitCode == 4 && refused.stderr.contains("wrong passphrase"), "\(refused.stderr)")
        let recovered = try Self.get(
            git, host,
            environment: Self.withoutPassphrase(
                git, ["TPM2TOOLS_TCTI": other.tcti, "PORTAL_TOKEN_PASSPHRASE": "the new recovery passphrase"]))
        #expect(recovered.exitCode == 0 && recovered.stdout.contains("password=np-pw\n"), "\(recovered.stderr)")
        // Keyed for the TPM alone, the file has no passphrase to change.
        let before = try Self.storeBytes(git)
        let none = try Self.fileKey(
            ["--new-passphrase-file", file],
            environment: Self.withoutPassphrase(git, ["PORTAL_TOKEN_FILE_TPM_RECOVERY": "none"]))
        #expect(none.exitCode == 4 && none.stderr.contains("by the TPM alone"), "\(none.stderr)")
        #expect(try Self.storeBytes(git) == before)
    }

    @Test("file-tpm off: the next write drops the sealed key and the file is version 1 again")
    func turnedOff() throws {
        let (tpm, git, host) = try Self.sealedStore("tpm-off", password: "p")
        // The swtpm lives as long as the test does, used or not after this line.
        defer { withExtendedLifetime(tpm) {} }
        #expect(try Self.storeBytes(git)[9] == 2)
        var off = git.environment
        off["PORTAL_TOKEN_FILE_TPM"] = "off"
        #expect(
            try git.credential("approve", "protocol=https\nhost=\(host)\nusername=u\npassword=p2\n\n", environment: off)
                .exitCode == 0)
        #expect(try Self.storeBytes(git)[9] == 1)
        let refused = try Self.get(git, host, environment: Self.withoutPassphrase(git))
        #expect(refused.exitCode == 4 && refused.stderr.contains("no passphrase"), "\(refused.stderr)")
    }

    @Test("file-tpm-recovery=none: no passphrase opens the file, another TPM cannot, and back to passphrase re-keys it")
    func noRecovery() throws {
        let tpm = try SoftwareTPM()
        let git = try Self.harness(tpm)
        // The swtpm lives as long as the test does, used or not after this line.
        defer { withExtendedLifetime(tpm) {} }
        let host = GitHarness.uniqueHost("tpm-alone")
        var alone = Self.withoutPassphrase(git, ["PORTAL_TOKEN_FILE_TPM_RECOVERY": "none"])
        // Created with no passphrase source at all.
        let approve = try git.credential(
            "approve", "protocol=https\nhost=\(host)\nusername=u\npassword=alone-pw\n\n", environment: alone)
        #expect(approve.exitCode == 0, "\(approve.stderr)")
        var bytes = try Self.storeBytes(git)
        #expect(bytes[9] == 2 && bytes[10] == 0, "the file is not keyed for the TPM alone")
        #expect(try Self.get(git, host, environment: alone).stdout.contains("password=alone-pw\n"))
        // No passphrase derives its key; another TPM cannot unseal it, and says the file has no recovery.
        let other = try SoftwareTPM()
        var elsewhere = git.environment
        elsewhere["TPM2TOOLS_TCTI"] = other.tcti
        let refused = try Self.get(git, host, environment: elsewhere)
        #expect(refused.exitCode == 4, "\(refused.stderr)")
        #expect(refused.stderr.contains("no recovery passphrase"), "\(refused.stderr)")
        #expect(try Self.storeBytes(git) == bytes)
        let status = try ProcessRunner.run(
            ProcessRunner.portalTokenPath, ["status"],
            environment: alone.merging(["PORTAL_AUTH_ENVIRONMENT_ID": "tpm-environment"]) { $1 }, timeout: 30)
        #expect(status.stdout.contains("no passphrase opens it"), "\(status.stdout)")
        // Back to a recovery passphrase: the next write with one re-keys the file under it.
        var recovering = git.environment
        recovering["PORTAL_TOKEN_FILE_TPM_RECOVERY"] = "passphrase"
        #expect(
            try git.credential(
                "approve", "protocol=https\nhost=\(host)\nusername=u\npassword=alone-pw-2\n\n", environment: recovering
            ).exitCode == 0)
        bytes = try Self.storeBytes(git)
        #expect(bytes[10] == 2, "the file is not keyed by the passphrase again")
        let opened = try Self.get(git, host, environment: elsewhere)
        #expect(opened.exitCode == 0 && opened.stdout.contains("password=alone-pw-2\n"), "\(opened.stderr)")
        // And file-tpm off on a file keyed for the TPM alone needs a passphrase: nothing is written without one.
        alone["PORTAL_TOKEN_FILE_TPM_RECOVERY"] = "none"
        #expect(
            try git.credential(
                "approve", "protocol=https\nhost=x-\(host)\nusername=u\npassword=p\n\n", environment: alone
            ).exitCode == 0)
        let sealedAlone = try Self.storeBytes(git)
        #expect(sealedAlone[10] == 0)
        var off = Self.withoutPassphrase(git, ["PORTAL_TOKEN_FILE_TPM": "off"])
        off["PORTAL_TOKEN_FILE_TPM_RECOVERY"] = nil
        let offWrite = try ProcessRunner.run(
            ProcessRunner.portalTokenPath, ["store"],
            stdin: "protocol=https\nhost=y-\(host)\nusername=u\npassword=p\n\n",
            environment: off, timeout: 30)
        #expect(offWrite.exitCode == 4 && offWrite.stderr.contains("needs a passphrase"), "\(offWrite.stderr)")
        #expect(try Self.storeBytes(git) == sealedAlone)
    }
}
