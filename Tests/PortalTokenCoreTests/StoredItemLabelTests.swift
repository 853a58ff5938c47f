import PortalTokenCore
import Testing

/// The labels items are written with keep no `/` (docs/storage.md, "Providers").
@Suite("item labels")
struct StoredItemLabelTests {
    @Test("a git credential's label is git's helper's, each / written as ∕; other labels are kept")
    func labels() {
        let item = CredentialItems.item(
            for: Credential(
                protocolName: "https", host: CredentialHost(server: "example.com", port: 8443),
                path: "team/repo.git", username: "alice", password: Secret("pw")))
        #expect(item.label == "Git: https:∕∕example.com:8443∕team∕repo.git")
        #expect(!item.label.contains("/"))
        #expect(StoredItem.storableLabel("Portal session for u (env)") == "Portal session for u (env)")
        // What a provider holds is read as it is.
        let read = StoredItem(
            storedAttributes: [:], label: "Git: https://example.com/", secret: Secret("s"), created: nil,
            modified: nil, id: "/1")
        #expect(read.label == "Git: https://example.com/")
    }
}
