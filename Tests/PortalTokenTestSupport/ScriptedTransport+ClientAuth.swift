import PortalTokenCore
import Synchronization

/// A transport that answers from a script and records what it was asked, for tests of the
/// request builders and answer mappings without a socket.
public final class ScriptedTransport: HTTPTransport, Sendable {
    public enum Step: Sendable {
        case respond(HTTPResponse)
        case fail(HTTPError)
    }

    private struct State {
        var steps: [Step]
        var requests: [HTTPRequest] = []
    }

    private let state: Mutex<State>

    public init(_ steps: [Step]) {
        state = Mutex(State(steps: steps))
    }

    /// Answers every request with `status` and the JSON `body`.
    public convenience init(status: Int, json body: String) {
        self.init([.respond(HTTPResponse(status: status, body: Array(body.utf8), effectiveURL: ""))])
    }

    public var requests: [HTTPRequest] { state.withLock { $0.requests } }

    public func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        let step: Step = state.withLock { state in
            state.requests.append(request)
            // The last step repeats, so a single step answers every request.
            return state.steps.count > 1 ? state.steps.removeFirst() : state.steps[0]
        }
        switch step {
        case .respond(var response):
            response.effectiveURL = request.url
            return response
        case .fail(let error):
            throw error
        }
    }
}
