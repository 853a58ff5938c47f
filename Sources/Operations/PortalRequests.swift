import Basics
import PortalTokenCore

// The two commands that send a request to Portal with the session: each goes through the agent
// in client mode (its proxy adds the session, slides the expiry or ends the session), through
// the proxy under `exec --proxy`, else straight, and a 401 has ended the session (the hook ran
// once, wherever the session is kept) before the operation returns.

/// `api`: one request to the Portal API.
package enum Api {
    /// What `api` sends: the method, a path (or, without the agent, a URL on the API host), a
    /// JSON body and the caller's own headers.
    package struct Request {
        package var method: String
        package var path: String
        package var body: [UInt8]?
        package var headers: [HTTPHeader]

        package init(method: String, path: String, body: [UInt8]?, headers: [HTTPHeader]) {
            (self.method, self.path, self.body, self.headers) = (method, path, body, headers)
        }

        /// The path without its query, for messages: a query may carry something private.
        package var pathForMessages: String {
            String(path.prefix { $0 != "?" && $0 != "#" })
        }
    }

    /// Portal's answer whatever its status, but a 401, which is the error of the ended session.
    package static func run(_ request: Request, _ context: Context) throws -> HTTPResponse {
        context.audit?.method = request.method
        let response: HTTPResponse
        if let agent = try context.agent() {
            // The agent sends it to its own API host: a path is all it takes.
            guard request.path.hasPrefix("/") else {
                throw CLIError.usage(
                    "through the agent at \(agent.socketPath), api takes a path such as /api/v3/clients/me, not a URL",
                    hint: "the agent sends the request to its own API host")
            }
            response = try agent.portal(request.method, request.path, body: request.body, headers: request.headers)
            if response.status == 401 {
                throw rejection(response, method: request.method, path: request.pathForMessages, agent: agent)
            }
        } else if case let apiBase = try context.apiBase(), let marker = context.ownProxyMarker(apiBase) {
            response = try throughProxy(request, apiBase, marker: marker, context)
        } else {
            response = try context.sessionService().api(
                method: request.method, path: request.path, body: request.body, headers: request.headers)
        }
        context.audit?.httpStatus = response.status
        return response
    }

    /// Under `exec --proxy` (or a shell that took `proxy --listen`'s lines), the request goes to the
    /// proxy with its header and no bearer: the session stays with the proxy, which adds the
    /// token, slides the expiry, and ends the session on a 401 (docs/proxy.md, "portal-token
    /// under the proxy").
    private static func throughProxy(
        _ request: Request, _ apiBase: PortalAPIBase, marker: HTTPHeader, _ context: Context
    ) throws -> HTTPResponse {
        let (method, path, body, headers) = (request.method, request.path, request.body, request.headers)
        guard let url = apiBase.resolve(path) else { throw SessionError.foreignOrigin }
        let requests = PortalRequestBuilder(gate: PortalHostGate(apiBase: apiBase), version: Release.version)
        let outgoing = requests.request(method, url, body: body, extraHeaders: headers + [marker])
        let response: HTTPResponse
        do {
            response = try context.transport().send(outgoing)
        } catch let error as HTTPError {
            throw SessionError.network(error)
        }
        if response.status == 401 {
            throw CLIError(
                "Portal answered HTTP 401 to \(method) \(request.pathForMessages) through the proxy: "
                    + "the session has ended",
                hint: "the proxy ended the session and ran the hook; sign in again", exitCode: .sessionEnded)
        }
        return response
    }

    /// A non-2xx answer from Portal: exit 6, naming the status and the request, never the body.
    /// A 401 through the agent is the end of its session, which the agent has ended (exit 3).
    package static func rejection(
        _ response: HTTPResponse, method: String, path: String, agent: AgentConnection? = nil
    ) -> CLIError {
        if response.status == 401, let agent {
            return CLIError(
                "Portal answered HTTP 401 to \(method) \(path) through the agent at \(agent.socketPath): "
                    + "the session has ended",
                hint: "the agent ended the session and ran its hook; sign in again on the agent's host",
                exitCode: .sessionEnded)
        }
        return CLIError("Portal answered HTTP \(response.status) to \(method) \(path)", exitCode: .rejected)
    }
}

/// `refresh`: the session's check with Portal, which slides its expiry.
package enum Refresh {
    /// The session Portal accepted: its end user and its new expiry (RFC 3339).
    package static func run(_ context: Context) throws -> (endUserID: String, expiresAt: String?) {
        context.audit?.method = "GET"
        let path = SessionService.validationPath
        if let agent = try context.agent() {
            // The agent's proxy sends it with the session, slides the expiry, or ends the session.
            let response = try agent.portal("GET", path, body: nil, headers: [])
            guard response.isSuccess else { throw Api.rejection(response, method: "GET", path: path, agent: agent) }
            let status = try agent.sessionStatus(context)
            return (status.endUserID, status.expiresAt)
        }
        let (session, response) = try context.sessionService().refresh()
        context.audit?.httpStatus = response.status
        guard response.isSuccess else { throw Api.rejection(response, method: "GET", path: path) }
        return (session.endUserID, session.expiresAt.map(RFC3339.format))
    }
}
