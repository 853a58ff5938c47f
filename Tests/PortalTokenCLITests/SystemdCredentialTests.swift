import Foundation
import Glibc
import PortalTokenTestSupport
import Testing

/// portal-token as a systemd service whose passphrase is `LoadCredentialEncrypted=`: a credential
/// systemd-creds sealed to the TPM (swtpm here). With no systemd instance to start a unit, the
/// service manager's own step is done as it does it: `systemd-creds decrypt` into a private
/// `$CREDENTIALS_DIRECTORY`, then the service runs with that variable set (docs/settings.md,
/// "Passphrase sources").
@Suite("the passphrase as a systemd credential sealed to the TPM")
struct SystemdCredentialTests {
    /// Runs systemd-creds, and records its failure.
    static func systemdCreds(_ arguments: [String], stdin: String? = nil) throws {
        let result = try ProcessRunner.run(
            "/usr/bin/systemd-creds", arguments, stdin: stdin, environment: ProcessRunner.environment([:]),
            timeout: 30)
        #expect(result.exitCode == 0, "systemd-creds \(arguments[0]) failed: \(result.stderr)")
    }

    @Test("a store whose passphrase is LoadCredentialEncrypted= round-trips through git with no other source")
    func encryptedCredential() throws {
        let tpm = try SoftwareTPM()
        let git = try GitHarness(backend: .file, extraEnvironment: ["PORTAL_TOKEN_KEY_CACHE_TIMEOUT": "0"])
        let passphrase = "unit passphrase \(UUID().uuidString)"
        let sealed = git.directory.appendingPathComponent("portal-token.passphrase.cred").path
        // What `systemd-creds encrypt --with-key=tpm2` writes for the unit's LoadCredentialEncrypted=.
        try Self.systemdCreds(
            ["encrypt", "--name=portal-token.passphrase", "--with-key=tpm2", "--tpm2-device=\(tpm.tcti)", "-", sealed],
            stdin: passphrase)
        #expect(try !String(contentsOfFile: sealed, encoding: .isoLatin1).contains(passphrase))
        // What the service manager does at the unit's start: the credential, decrypted, in a
        // directory of the service's own.
        let credentials = git.directory.appendingPathComponent("credentials").path
        try FileManager.default.createDirectory(
            atPath: credentials, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let loaded = credentials + "/portal-token.passphrase"
        try Self.systemdCreds(
            ["decrypt", "--name=portal-token.passphrase", "--tpm2-device=\(tpm.tcti)", sealed, loaded])
        chmod(loaded, 0o400)
        var service = git.environment
        service["PORTAL_TOKEN_PASSPHRASE"] = nil
        service["CREDENTIALS_DIRECTORY"] = credentials
        let host = GitHarness.uniqueHost("unit")
        let approve = try git.credential(
            "approve", "protocol=https\nhost=\(host)\nusername=u\npassword=unit-pw\n\n", environment: service)
        #expect(approve.exitCode == 0, "\(approve.stderr)")
        let filled = try git.credential("fill", "protocol=https\nhost=\(host)\n\n", environment: service)
        #expect(filled.exitCode == 0 && filled.stdout.contains("password=unit-pw\n"), "\(filled.stderr)")
        // The credential is the passphrase: the same file opens with it given any other way.
        var direct = git.environment
        direct["PORTAL_TOKEN_PASSPHRASE"] = passphrase
        let get = try ProcessRunner.run(
            ProcessRunner.portalTokenPath, ["get"], stdin: "protocol=https\nhost=\(host)\n\n", environment: direct,
            timeout: 30)
        #expect(get.exitCode == 0 && get.stdout.contains("password=unit-pw\n"), "\(get.stderr)")
        // Without the credential directory, and no other source, the service cannot open it.
        service["CREDENTIALS_DIRECTORY"] = nil
        let without = try git.credential("fill", "protocol=https\nhost=\(host)\n\n", environment: service)
        #expect(!without.stdout.contains("unit-pw"))
    }
}
