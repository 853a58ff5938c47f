import PortalTokenCore

extension ScriptedTransport {
    /// Answers every request with `status` and the JSON `body`.
    public convenience init(status: Int, json body: String) {
        self.init { request in HTTPResponse(status: status, body: Array(body.utf8), effectiveURL: request.url) }
    }

    /// Fails every request as the network would.
    public convenience init(failing error: HTTPError) {
        self.init { _ throws(HTTPError) in throw error }
    }
}
