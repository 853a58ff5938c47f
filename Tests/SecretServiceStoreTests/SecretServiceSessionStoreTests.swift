import PortalTokenCore
import PortalTokenTestSupport
import SecretServiceStore
import Testing

extension InProcessKeyringTests {
    @Suite("Portal sessions in the Secret Service", .serialized)
    struct SecretServiceSessionStoreTests {
        private let store = Sessions(SecretServiceItemStore(timeoutMilliseconds: 15000, allowPrompt: false))

        private func environmentID() -> String { "env-\(UInt32.random(in: 0...UInt32.max))" }

        private func session(_ environment: String, user: String = "user-1", token: String = "token-1") -> PortalSession
        {
            PortalSession(
                token: Secret(token), endUserID: user, authEnvironmentID: environment,
                issuedAt: 1_700_000_000, lastActivityAt: 1_700_003_600)
        }

        @Test("a saved session loads back; nothing is stored for another environment")
        func roundTrip() throws {
            let environment = environmentID()
            try store.saveSession(session(environment))
            defer { _ = try? store.deleteSession(authEnvironmentID: environment) }
            #expect(try store.loadSession(authEnvironmentID: environment) == .present(session(environment)))
            #expect(try store.loadSession(authEnvironmentID: environmentID()) == .absent)
        }

        @Test(
            """
            saving replaces its end user's previous session and keeps another end user's beside it; each is read by \
            its end user, and the environment's newest without one
            """)
        func keepsEachEndUsersSession() throws {
            let environment = environmentID()
            try store.saveSession(session(environment, user: "user-1", token: "old"))
            try store.saveSession(session(environment, user: "user-1", token: "first"))
            try store.saveSession(session(environment, user: "user-2", token: "second"))
            defer { _ = try? store.deleteSession(authEnvironmentID: environment) }
            #expect(
                try store.loadSession(authEnvironmentID: environment, endUserID: "user-1")
                    == .present(session(environment, user: "user-1", token: "first")))
            #expect(
                try store.loadSession(authEnvironmentID: environment, endUserID: "user-2")
                    == .present(session(environment, user: "user-2", token: "second")))
            #expect(try store.loadSession(authEnvironmentID: environment, endUserID: "user-3") == .absent)
            let items = try LibsecretClient.run(
                "/usr/bin/secret-tool", ["search", "--all", "auth-environment-id", environment],
                environment: ProcessRunner.environment(), timeout: 10)
            // secret-tool prints the item paths on stdout and their details on stderr.
            let listing = items.stdout + items.stderr
            #expect(listing.components(separatedBy: "label = ").count == 3, "expected one item per end user")
            #expect(listing.contains("label = Portal session for user-1 (\(environment))"))
            #expect(listing.contains("label = Portal session for user-2 (\(environment))"))
            // Deleting one end user's leaves the other's.
            #expect(try store.deleteSession(authEnvironmentID: environment, endUserID: "user-1"))
            #expect(try store.loadSession(authEnvironmentID: environment, endUserID: "user-1") == .absent)
            #expect(
                try store.loadSession(authEnvironmentID: environment)
                    == .present(session(environment, user: "user-2", token: "second")))
        }

        @Test("delete removes the session and says whether there was one")
        func deletes() throws {
            let environment = environmentID()
            try store.saveSession(session(environment))
            #expect(try store.deleteSession(authEnvironmentID: environment))
            #expect(try store.loadSession(authEnvironmentID: environment) == .absent)
            #expect(try store.deleteSession(authEnvironmentID: environment) == false)
        }

        @Test("an item whose payload is not a session record reads as unreadable")
        func unreadable() throws {
            let environment = environmentID()
            let written = try LibsecretClient.run(
                "/usr/bin/secret-tool",
                [
                    "store", "--label=broken", "xdg:schema", SessionItems.schema,
                    "auth-environment-id", environment, "end-user-id", "user-1",
                ], stdin: #"{"clientSessionToken":"stored-token"}"#, environment: ProcessRunner.environment(),
                timeout: 10)
            #expect(written.exitCode == 0)
            #expect(try store.loadSession(authEnvironmentID: environment) == .unreadable)
            #expect(try store.deleteSession(authEnvironmentID: environment))
        }
    }
}
