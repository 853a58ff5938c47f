import Foundation
import PortalTokenCore
import PortalTokenTestSupport

// Starts the loopback fake Portal server by hand, for trying portal-token or a benchmark.
// Prints its base URL on stdout, then serves until killed. --lenient drops the header checks,
// for clients such as plain curl that do not send portal-token's headers.
//
// With --auth-env it also serves the six Client Auth endpoints, so every sign-in flow can be
// tried locally:
//
//   portal-fake-server --port 3000 --auth-env env-local --redirect-url http://127.0.0.1:8765/callback
//
// then, in another terminal (the fake answers any sender and template unless given them):
//
//   export PORTAL_API_HOST=127.0.0.1:3000 PORTAL_AUTH_ENVIRONMENT_ID=env-local \
//          PORTAL_REDIRECT_URL=http://127.0.0.1:8765/callback \
//          PORTAL_MAGIC_LINK_FROM_EMAIL=noreply@example.com PORTAL_MAGIC_LINK_TEMPLATE_ID=template-1
//   portal-token login --email you@example.com
//
// Each magic link the fake "sends" is printed on stdout as "magic link: URL" (and appended to
// --outbox FILE): open it in a browser to complete the sign-in. The Google and Apple authorize
// URLs point at the fake itself, which sends the browser straight back with a grant.
let usage = """
    usage: portal-fake-server [--port N] [--live TOKEN]... [--live-file PATH] [--lenient]
                              [--auth-env ID [--redirect-url URL]... [--end-user ID] [--totp CODE [--totp-enroll]]
                               [--magic-links send|rate-limited|unauthorized] [--outbox FILE]
                               [--methods LIST] [--from-email ADDRESS] [--template-id ID] [--no-account-abstraction]]
    """
var port: UInt16 = 0
var liveTokens: [String] = []
var strict = true
var authEnvironment: String?
var redirectURLs: [String] = []
var endUser = FakeClientAuth.EndUser(id: "end-user-1")
var magicLinks = FakeClientAuth.MagicLinkBehaviour.send
var outbox: String?
var methods: [String]?
var fromEmail: String?
var templateID: String?
var accountAbstraction = true
var arguments = CommandLine.arguments.dropFirst()
func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("portal-fake-server: \(message)\n\(usage)\n".utf8))
    exit(2)
}
@MainActor func value(_ flag: String) -> String {
    guard let value = arguments.popFirst(), !value.isEmpty else { fail("\(flag) needs a value") }
    return value
}
while let argument = arguments.popFirst() {
    switch argument {
    case "--port":
        guard let number = UInt16(value(argument)) else { fail("--port needs a number") }
        port = number
    case "--live":
        liveTokens.append(value(argument))
    case "--live-file":
        // One token a line, so that tokens need not appear in the process list.
        guard let text = try? String(contentsOfFile: value(argument), encoding: .utf8) else {
            fail("--live-file needs a readable file")
        }
        liveTokens += text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    case "--lenient":
        strict = false
    case "--auth-env":
        authEnvironment = value(argument)
    case "--redirect-url":
        redirectURLs.append(value(argument))
    case "--end-user":
        endUser.id = value(argument)
    case "--totp":
        endUser.totpCode = value(argument)
    case "--totp-enroll":
        endUser.enrolling = true
    case "--magic-links":
        switch value(argument) {
        case "send": magicLinks = .send
        case "rate-limited": magicLinks = .rateLimited
        case "unauthorized": magicLinks = .unauthorized
        default: fail("--magic-links takes send, rate-limited or unauthorized")
        }
    case "--outbox":
        outbox = value(argument)
    case "--methods":
        methods = value(argument).split(separator: ",").map(String.init)
    case "--from-email":
        fromEmail = value(argument)
    case "--template-id":
        templateID = value(argument)
    case "--no-account-abstraction":
        accountAbstraction = false
    case "-h", "--help":
        print(usage)
        exit(0)
    default:
        fail("unknown argument '\(argument)'")
    }
}
if authEnvironment == nil, !redirectURLs.isEmpty || endUser.totpCode != nil || outbox != nil {
    fail("the sign-in options need --auth-env")
}
if endUser.enrolling, endUser.totpCode == nil { fail("--totp-enroll needs --totp CODE") }
do {
    let server = try FakePortalServer(port: port, strict: strict)
    for token in liveTokens { server.registerLiveToken(token) }
    // Written straight to the descriptor so a parent reading a pipe sees it at once.
    FileHandle.standardOutput.write(Data((server.baseURL + "\n").utf8))
    if let authEnvironment {
        if redirectURLs.isEmpty { redirectURLs = ["http://127.0.0.1:8765/callback"] }
        var options = FakeClientAuth.Options(
            authEnvironmentID: authEnvironment, redirectURLs: redirectURLs,
            magicLinkFromEmail: fromEmail, magicLinkTemplateID: templateID,
            magicLinkBehaviour: magicLinks, accountAbstractionAvailable: accountAbstraction,
            endUser: endUser, outboxPath: outbox)
        if let methods { options.allowedMethods = methods }
        let auth = FakeClientAuth(server: server, options: options)
        FileHandle.standardError.write(
            Data(
                """
                portal-fake-server: sign-in for auth environment \(authEnvironment), redirect URL \
                \(redirectURLs.joined(separator: ", "))
                portal-fake-server: end user \(endUser.id)\(endUser.totpCode.map { ", two-factor code \($0)" } ?? "")

                """.utf8))
        // Prints each magic link as it is "sent", for a person to open.
        Thread {
            var printed = 0
            while true {
                let links = auth.sentLinks
                for sent in links.dropFirst(printed) {
                    FileHandle.standardOutput.write(Data("magic link: \(sent.link)\n".utf8))
                }
                printed = links.count
                usleep(100_000)
            }
        }.start()
    }
    while true { pause() }
} catch {
    fail("\(error)")
}
