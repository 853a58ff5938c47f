import Basics
import PortalTokenCore

// The session as the commands that read it hand it out (`token`, script-mode `get`,
// `exec-credential`) and as the agent's `GET /v1/token` and `GET /v1/exec-credential` send it;
// the session itself is `Context.usableSession()`.

/// The session as JSON.
package enum SessionOutput {
    /// The `get --format json` / `token --format json` object: token, endUserId,
    /// authEnvironmentId and an RFC 3339 expiresAt.
    package static func json(_ session: PortalSession) -> String {
        var members: [String: JSONValue] = [
            "token": .string(session.token.text),
            "endUserId": .string(session.endUserID),
            "authEnvironmentId": .string(session.authEnvironmentID),
        ]
        members["expiresAt"] = session.expiresAt.map { .string(RFC3339.format($0)) } ?? .null
        return JSONValue.object(members).serialized
    }
}

/// A Kubernetes client-go ExecCredential of the session (`exec-credential`).
package enum ExecCredential {
    package static let apiGroup = "client.authentication.k8s.io"
    package static let versions = ["v1", "v1beta1"]

    /// The apiVersion to answer in: KUBERNETES_EXEC_INFO's `apiVersion`, else v1.
    package static func apiVersion(execInfo: String?) throws(CLIError) -> String {
        guard let execInfo, !execInfo.trimmingWhitespace.isEmpty else { return "\(apiGroup)/v1" }
        guard let info = try? JSONValue.parse(execInfo) else {
            throw .usage("KUBERNETES_EXEC_INFO is not JSON")
        }
        guard let requested = info["apiVersion"]?.stringValue else { return "\(apiGroup)/v1" }
        guard versions.contains(where: { "\(apiGroup)/\($0)" == requested }) else {
            throw .usage(
                "KUBERNETES_EXEC_INFO asks for \(requested.prefix(80)), which portal-token does not speak",
                hint: "use apiVersion \(apiGroup)/v1 or \(apiGroup)/v1beta1 in the kubeconfig")
        }
        return requested
    }

    /// The ExecCredential document.
    package static func document(_ session: PortalSession, apiVersion: String) -> [UInt8] {
        var status: [String: JSONValue] = ["token": .string(session.token.text)]
        if let expiresAt = session.expiresAt { status["expirationTimestamp"] = .string(RFC3339.format(expiresAt)) }
        let credential = JSONValue.object([
            "apiVersion": .string(apiVersion), "kind": .string("ExecCredential"), "status": .object(status),
        ])
        return Array((credential.serialized + "\n").utf8)
    }
}
