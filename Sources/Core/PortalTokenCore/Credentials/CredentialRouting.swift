/// Which credential-protocol requests are answered from the Portal session
/// (docs/sessions.md, "Portal origins in the credential protocol") and which from generic storage: the bearer rule of
/// the configured API host, applied to git's `protocol` and `host`.
public enum CredentialRouting {
    public enum Route: Sendable, Equatable {
        /// A Portal origin: answered from, and changing, the signed-in session.
        case portalSession
        /// Any other origin: the stored git credentials.
        case storage
    }

    /// The route for `request` with the configured API host (nil: the default host). An
    /// unreadable API host is an error only for a request it could be about: a plain git
    /// request for another host (github.com) goes to storage as ever.
    public static func route(_ request: CredentialRequest, apiHost: String?) throws(InvalidAPIHostError) -> Route {
        guard let protocolName = request.protocolName, let host = request.host?.gitHost else { return .storage }
        let base: PortalAPIBase
        do {
            base = try PortalAPIBase(apiHost: apiHost ?? PortalAPIBase.defaultHost)
        } catch {
            if PortalHostGate.mayBePortalOrigin(
                protocolName: protocolName, host: host, unreadableAPIHost: apiHost ?? "")
            {
                throw error
            }
            return .storage
        }
        return PortalHostGate(apiBase: base).isPortalOrigin(protocolName: protocolName, host: host)
            ? .portalSession : .storage
    }
}
