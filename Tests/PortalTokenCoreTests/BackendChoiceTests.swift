import PortalTokenCore
import PortalTokenTestSupport
import Testing

@Suite("backend choice")
struct BackendChoiceTests {
    private func unreachable() throws(StoreError) -> SecretServicePresence {
        Issue.record("a forced backend asked the session bus")
        return .provider
    }

    @Test("auto uses the Secret Service when a provider is registered, and only it")
    func autoKeyring() throws {
        let choice = try BackendChoice.decide(.auto, requestedBy: "default") { () throws(StoreError) in .provider }
        #expect(choice.backend == .secretService)
        #expect(!choice.isFallback)
        #expect(choice.fallbackNotice == nil)
    }

    @Test(
        "auto uses the file when there is no bus or no provider, and says why",
        arguments: [
            (SecretServicePresence.noBus, "there is no D-Bus session bus"),
            (.noProvider, "no Secret Service provider is registered on the session bus"),
        ])
    func autoFallsBack(presence: SecretServicePresence, reason: String) throws {
        let choice = try BackendChoice.decide(.auto, requestedBy: "default") { () throws(StoreError) in presence }
        #expect(choice.backend == .file)
        #expect(choice.isFallback)
        #expect(choice.reason == reason)
        #expect(choice.fallbackNotice == "using the encrypted file store: \(reason)")
    }

    @Test(
        "a bus that does not answer is an error in auto, never a switch to the file",
        arguments: [StoreError.Kind.timedOut, .failed])
    func unansweredBusIsNoSwitch(kind: StoreError.Kind) {
        #expect(throws: StoreError(kind, "the session bus did not answer")) {
            try BackendChoice.decide(.auto, requestedBy: "default") { () throws(StoreError) -> SecretServicePresence in
                throw StoreError(kind, "the session bus did not answer")
            }
        }
    }

    @Test("a forced backend is used without asking the bus, and says who chose it")
    func forced() throws {
        let file = try BackendChoice.decide(.file, requestedBy: "--backend", presence: unreachable)
        #expect(file == BackendChoice(backend: .file, reason: "chosen by --backend"))
        #expect(file.fallbackNotice == nil)
        let keyring = try BackendChoice.decide(
            .secretService, requestedBy: "PORTAL_TOKEN_BACKEND", presence: unreachable)
        #expect(keyring == BackendChoice(backend: .secretService, reason: "chosen by PORTAL_TOKEN_BACKEND"))
    }
}
