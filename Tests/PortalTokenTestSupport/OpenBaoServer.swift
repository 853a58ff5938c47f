import Foundation
import Glibc

/// The real OpenBao server `contrib/testing/openbao.sh start` runs for the suite, on loopback with
/// TLS from a test CA; `PORTAL_TOKEN_TEST_OPENBAO` names the file it describes itself in. Without
/// it the Vault tests fail rather than skip: the server is part of what is tested.
public enum OpenBaoServer {
    public struct Unavailable: Error, CustomStringConvertible {
        public var description: String
    }

    /// `VAULT_ADDR`, `VAULT_CACERT`, `VAULT_TOKEN_FILE` (the root token) and `OPENBAO_BIN`.
    public static func settings() throws -> [String: String] {
        guard let path = ProcessInfo.processInfo.environment["PORTAL_TOKEN_TEST_OPENBAO"], !path.isEmpty,
            let text = try? String(contentsOfFile: path, encoding: .utf8)
        else {
            throw Unavailable(
                description:
                    "no OpenBao server: run the suite with contrib/test.sh, or start one with "
                    + "contrib/testing/openbao.sh start DIR and set PORTAL_TOKEN_TEST_OPENBAO=DIR/env")
        }
        var values: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            values[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return values
    }

    public static var address: String { get throws { try settings()["VAULT_ADDR"] ?? "" } }
    public static var caFile: String { get throws { try settings()["VAULT_CACERT"] ?? "" } }
    public static var rootTokenFile: String { get throws { try settings()["VAULT_TOKEN_FILE"] ?? "" } }

    /// A path prefix no other test uses.
    public static func freshPrefix() -> String { "portal-token-test/\(UInt32.random(in: 0...UInt32.max))" }

    /// Runs `bao` as the root token, or as the token in `tokenFile` (given in its environment,
    /// never its arguments).
    @discardableResult
    public static func bao(_ arguments: [String], stdin: String? = nil, tokenFile: String? = nil) throws
        -> ProcessResult
    {
        let settings = try settings()
        let token = try String(contentsOfFile: tokenFile ?? settings["VAULT_TOKEN_FILE"] ?? "", encoding: .utf8)
        let result = try ProcessRunner.run(
            settings["OPENBAO_BIN"] ?? "bao", arguments, stdin: stdin,
            environment: ProcessRunner.environment([
                "VAULT_ADDR": settings["VAULT_ADDR"], "VAULT_CACERT": settings["VAULT_CACERT"],
                "BAO_ADDR": settings["VAULT_ADDR"], "BAO_CACERT": settings["VAULT_CACERT"],
                "BAO_TOKEN": token.trimmingCharacters(in: .whitespacesAndNewlines), "VAULT_TOKEN": nil,
            ]))
        guard result.exitCode == 0 else {
            throw Unavailable(description: "bao \(arguments.first ?? "") failed: \(result.stderr)")
        }
        return result
    }

    /// A new token with only `policy` (HCL), written to a 0600 file under `directory`; returns
    /// the file's path. `ttl` bounds its life.
    public static func tokenFile(policy: String, directory: URL, ttl: String = "1h") throws -> String {
        let name = "portal-token-test-\(UInt32.random(in: 0...UInt32.max))"
        try bao(["policy", "write", name, "-"], stdin: policy)
        let created = try bao(["token", "create", "-policy=\(name)", "-ttl=\(ttl)", "-field=token"])
        let path = directory.appendingPathComponent("\(name).token").path
        _ = FileManager.default.createFile(
            atPath: path, contents: Data(created.stdout.utf8), attributes: [.posixPermissions: 0o600])
        return path
    }

    /// A new AppRole role under the `approle` auth mount (enabled on first use) whose tokens
    /// carry only `policy` and live `tokenTTL`; its secret ID, usable `secretIDUses` times (0 for
    /// any number), is written to a 0600 file under `directory`. Returns the role ID and that
    /// file's path.
    public static func appRole(
        policy: String, directory: URL, tokenTTL: String = "1h", secretIDUses: Int = 0
    ) throws -> (roleID: String, secretIDFile: String) {
        let name = "portal-token-test-\(UInt32.random(in: 0...UInt32.max))"
        if !(try bao(["auth", "list", "-format=json"]).stdout.contains("\"approle/\"")) {
            // Another test may enable it at the same moment: what counts is that it is enabled.
            _ = try? bao(["auth", "enable", "approle"])
        }
        try bao(["policy", "write", name, "-"], stdin: policy)
        try bao([
            "write", "auth/approle/role/\(name)", "token_policies=\(name)", "token_ttl=\(tokenTTL)",
            "token_max_ttl=1h", "secret_id_num_uses=\(secretIDUses)",
        ])
        let roleID = try bao(["read", "-field=role_id", "auth/approle/role/\(name)/role-id"]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let secretID = try bao(["write", "-f", "-field=secret_id", "auth/approle/role/\(name)/secret-id"]).stdout
        let path = directory.appendingPathComponent("\(name).secret-id").path
        _ = FileManager.default.createFile(
            atPath: path, contents: Data(secretID.utf8), attributes: [.posixPermissions: 0o600])
        return (roleID, path)
    }

    /// Revokes the token in `tokenFile`, as an administrator or its expiry would.
    public static func revoke(tokenFile: String) throws {
        try bao(["token", "revoke", "-self"], tokenFile: tokenFile)
    }

    /// The policy a host needs for the items under `prefix` of the `secret` mount: the one
    /// docs/storage.md gives.
    public static func readWritePolicy(prefix: String) -> String {
        """
        path "secret/data/\(prefix)/*" { capabilities = ["create", "read", "update"] }
        path "secret/metadata/\(prefix)/*" { capabilities = ["create", "read", "update", "list"] }
        path "secret/metadata/\(prefix)/" { capabilities = ["list"] }
        """
    }

    /// Reading and listing only.
    public static func readOnlyPolicy(prefix: String) -> String {
        """
        path "secret/data/\(prefix)/*" { capabilities = ["read"] }
        path "secret/metadata/\(prefix)/*" { capabilities = ["read", "list"] }
        """
    }

    /// The environment that makes portal-token use the Vault store under `prefix`, with the
    /// token read from `tokenFile` (the root token when nil).
    public static func environment(prefix: String, tokenFile: String? = nil) throws -> [String: String?] {
        [
            "PORTAL_TOKEN_BACKEND": "vault", "VAULT_ADDR": try address, "VAULT_CACERT": try caFile,
            "VAULT_TOKEN": nil, "PORTAL_TOKEN_VAULT_TOKEN_FILE": try tokenFile ?? rootTokenFile,
            "PORTAL_TOKEN_VAULT_PATH_PREFIX": prefix,
        ]
    }
}

extension OpenBaoServer {
    /// One request the server's audit log recorded (`contrib/testing/openbao.sh` enables it
    /// with `OPENBAO_AUDIT_FILE`): what was asked, of which path, from which TCP port.
    public struct AuditedRequest: Sendable, Equatable {
        public var operation: String
        public var path: String
        public var remotePort: Int
    }

    /// Every request the audit log holds whose path contains `fragment` (a test's own prefix).
    public static func auditedRequests(containing fragment: String) throws -> [AuditedRequest] {
        guard let file = try settings()["OPENBAO_AUDIT_FILE"] else {
            throw Unavailable(
                description: "the OpenBao server keeps no audit log: start it with OPENBAO_AUDIT_FILE set")
        }
        let text = try String(contentsOfFile: file, encoding: .utf8)
        var requests: [AuditedRequest] = []
        for line in text.split(separator: "\n") where line.contains(fragment) && line.contains(#""type":"request""#) {
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let request = object["request"] as? [String: Any], let path = request["path"] as? String,
                path.contains(fragment)
            else { continue }
            requests.append(
                AuditedRequest(
                    operation: request["operation"] as? String ?? "", path: path,
                    remotePort: request["remote_port"] as? Int ?? 0))
        }
        return requests
    }
}

/// The three-node OpenBao cluster with Raft storage that `contrib/testing/openbao-cluster.sh`
/// runs for the suite on loopback (TLS with a test CA, between the nodes too);
/// `PORTAL_TOKEN_TEST_OPENBAO_CLUSTER` names the file it describes itself in. Without it the
/// cluster tests fail rather than skip.
public struct OpenBaoCluster: Sendable {
    public var addresses: [String]
    public var caFile: String
    /// A token holding only the policy of contrib/vault/portal-token-policy.hcl.
    public var tokenFile: String
    public var pids: [pid_t]

    public init() throws {
        guard let path = ProcessInfo.processInfo.environment["PORTAL_TOKEN_TEST_OPENBAO_CLUSTER"], !path.isEmpty,
            let text = try? String(contentsOfFile: path, encoding: .utf8)
        else {
            throw OpenBaoServer.Unavailable(
                description:
                    "no OpenBao cluster: run the suite with contrib/test.sh, or start one with "
                    + "contrib/testing/openbao-cluster.sh start DIR and set PORTAL_TOKEN_TEST_OPENBAO_CLUSTER=DIR/env")
        }
        var values: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            values[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        addresses = (1...3).map { values["VAULT_ADDR_\($0)"] ?? "" }
        pids = (1...3).map { pid_t(values["OPENBAO_PID_\($0)"] ?? "") ?? 0 }
        caFile = values["VAULT_CACERT"] ?? ""
        tokenFile = values["VAULT_TOKEN_FILE"] ?? ""
    }

    /// The nodes whose process still runs.
    public var liveNodes: [Int] { (0..<3).filter { pids[$0] > 0 && Glibc.kill(pids[$0], 0) == 0 } }

    /// The node the cluster names as its leader, asked of a live node.
    public func leader() throws -> Int? {
        for node in liveNodes {
            let answer = try ProcessRunner.run(
                "/usr/bin/curl",
                ["--silent", "--max-time", "3", "--cacert", caFile, addresses[node] + "/v1/sys/leader"])
            guard answer.exitCode == 0,
                let object = try? JSONSerialization.jsonObject(with: Data(answer.stdout.utf8)) as? [String: Any],
                let leader = object["leader_address"] as? String, !leader.isEmpty
            else { continue }
            return addresses.firstIndex(of: leader)
        }
        return nil
    }

    /// Kills a node at once (SIGKILL), as a crash or a pulled plug would.
    public func kill(node: Int) {
        _ = Glibc.kill(pids[node], SIGKILL)
    }

    /// The environment that makes portal-token use the cluster's node `node` under `prefix`
    /// (which must lie under `portal-token/`, the policy's prefix).
    public func environment(prefix: String, node: Int) -> [String: String?] {
        [
            "PORTAL_TOKEN_BACKEND": "vault", "VAULT_ADDR": addresses[node], "VAULT_CACERT": caFile,
            "VAULT_TOKEN": nil, "PORTAL_TOKEN_VAULT_TOKEN_FILE": tokenFile, "PORTAL_TOKEN_VAULT_PATH_PREFIX": prefix,
        ]
    }
}

extension OpenBaoCluster {
    private static let inUse = NSLock()

    /// Runs `body` while no other test of this process uses the cluster: one of them kills its
    /// leader.
    public static func exclusively<Result>(_ body: () throws -> Result) rethrows -> Result {
        inUse.lock()
        defer { inUse.unlock() }
        return try body()
    }
}
