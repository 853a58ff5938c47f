import Foundation
import PortalTokenTestSupport

// Starts the loopback fake Portal server by hand, for trying portal-token or a benchmark:
//   portal-fake-server [--port N] [--live TOKEN]... [--live-file PATH] [--lenient]
// Prints its base URL on stdout, then serves until killed. --lenient drops the header checks,
// for clients such as plain curl that do not send portal-token's headers.
let usage = "usage: portal-fake-server [--port N] [--live TOKEN]... [--live-file PATH] [--lenient]"
var port: UInt16 = 0
var liveTokens: [String] = []
var strict = true
var arguments = CommandLine.arguments.dropFirst()
func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("portal-fake-server: \(message)\n\(usage)\n".utf8))
    exit(2)
}
while let argument = arguments.popFirst() {
    switch argument {
    case "--port":
        guard let value = arguments.popFirst(), let number = UInt16(value) else { fail("--port needs a number") }
        port = number
    case "--live":
        guard let token = arguments.popFirst(), !token.isEmpty else { fail("--live needs a token") }
        liveTokens.append(token)
    case "--live-file":
        // One token a line, so that tokens need not appear in the process list.
        guard let path = arguments.popFirst(), let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            fail("--live-file needs a readable file")
        }
        liveTokens += text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    case "--lenient":
        strict = false
    case "-h", "--help":
        print(usage)
        exit(0)
    default:
        fail("unknown argument '\(argument)'")
    }
}
do {
    let server = try FakePortalServer(port: port, strict: strict)
    for token in liveTokens { server.registerLiveToken(token) }
    // Written straight to the descriptor so a parent reading a pipe sees it at once.
    FileHandle.standardOutput.write(Data((server.baseURL + "\n").utf8))
    while true { pause() }
} catch {
    fail("\(error)")
}
