import Foundation
import PortalTokenTestSupport
import Testing

/// FoundationNetworking costs every invocation 6–12 ms; the binary must carry none of it.
@Suite("binary")
struct BinaryTests {
    /// The debug binary, and the release one when the test script built it.
    static var binaries: [String] {
        var paths = [ProcessRunner.portalTokenPath]
        if let release = ProcessInfo.processInfo.environment["PORTAL_TOKEN_RELEASE_BIN"] { paths.append(release) }
        return paths
    }

    @Test("the release binary is built by the test script")
    func releaseBinaryIsPresent() throws {
        let release = try #require(
            ProcessInfo.processInfo.environment["PORTAL_TOKEN_RELEASE_BIN"],
            "PORTAL_TOKEN_RELEASE_BIN is not set: run the suite through contrib/test.sh")
        #expect(FileManager.default.isExecutableFile(atPath: release))
    }

    @Test("no FoundationNetworking symbol or library in the binary", arguments: binaries)
    func noFoundationNetworking(binary: String) throws {
        let symbols = try ProcessRunner.run("/usr/bin/nm", [binary], timeout: 60)
        #expect(symbols.exitCode == 0)
        #expect(symbols.stdout.split(separator: "\n").count > 1000, "nm found too few symbols to be meaningful")
        #expect(!symbols.stdout.contains("FoundationNetworking"))
        #expect(!symbols.stdout.contains("URLSession"))
        let dynamic = try ProcessRunner.run("/usr/bin/readelf", ["--dynamic", binary], timeout: 30)
        #expect(!dynamic.stdout.contains("FoundationNetworking"))
    }

    @Test("libcurl is not linked: it is loaded only when a request is made", arguments: binaries)
    func libcurlIsNotLinked(binary: String) throws {
        let dynamic = try ProcessRunner.run("/usr/bin/readelf", ["--dynamic", binary], timeout: 30)
        #expect(dynamic.stdout.contains("(NEEDED)"))
        #expect(!dynamic.stdout.contains("libcurl"))
    }

    @Test("libqrencode is not linked: it is loaded only when a two-factor enrollment draws a code", arguments: binaries)
    func libqrencodeIsNotLinked(binary: String) throws {
        let dynamic = try ProcessRunner.run("/usr/bin/readelf", ["--dynamic", binary], timeout: 30)
        #expect(dynamic.stdout.contains("(NEEDED)"))
        #expect(!dynamic.stdout.contains("libqrencode"))
    }

    /// The release binary, as installed and measured.
    private static func releaseBinary() throws -> String {
        try #require(
            ProcessInfo.processInfo.environment["PORTAL_TOKEN_RELEASE_BIN"],
            "PORTAL_TOKEN_RELEASE_BIN is not set: run the suite through contrib/test.sh")
    }

    private static let glibLibraries = ["libsecret-1", "libgio-2.0", "libgobject-2.0", "libglib-2.0"]

    /// Loading libstdc++ and binding its symbols is most of an empty Swift program's start; the
    /// release link takes the C++ runtime and libgcc's unwinder in, and sets no RUNPATH, so that
    /// the loader looks for each library only where the system keeps it.
    @Test("the release binary loads no libstdc++ or libgcc_s, and has no RUNPATH")
    func releaseBinaryLinksTheCxxRuntimeIn() throws {
        let dynamic = try ProcessRunner.run("/usr/bin/readelf", ["--dynamic", try Self.releaseBinary()], timeout: 30)
        #expect(dynamic.stdout.contains("(NEEDED)"))
        for entry in ["libstdc++", "libgcc_s", "(RUNPATH)", "(RPATH)"] {
            #expect(!dynamic.stdout.contains(entry), "\(entry) in \(dynamic.stdout)")
        }
    }

    /// In every build: CLibSecret declares what it uses and names no library to link.
    @Test(
        "libsecret and GLib are not linked: they are loaded when the Secret Service is first used",
        arguments: binaries)
    func libsecretIsNotLinked(binary: String) throws {
        let dynamic = try ProcessRunner.run("/usr/bin/readelf", ["--dynamic", binary], timeout: 30)
        #expect(dynamic.stdout.contains("(NEEDED)"))
        for library in Self.glibLibraries {
            #expect(!dynamic.stdout.contains(library), "NEEDED \(library)")
        }
    }

    @Test(
        """
        start-up maps no GLib; a write loads libsecret, and a get from an unlocked keyring reads over the \
        session bus without mapping libsecret, GLib or libsystemd
        """)
    func libsecretIsLoadedOnDemand() throws {
        let binary = try Self.releaseBinary()
        let traced = ProcessRunner.environment(["LD_DEBUG": "files"])
        let version = try ProcessRunner.run(binary, ["--version"], environment: traced)
        #expect(version.exitCode == 0)
        #expect(version.stderr.contains("file=libc.so.6"), "LD_DEBUG traced nothing: \(version.stderr)")
        for library in Self.glibLibraries {
            #expect(!version.stderr.contains(library), "\(library) loaded by --version")
        }

        let host = "on-demand-\(UUID().uuidString.lowercased()).tld"
        for backend in ["secret-service", "auto"] {
            var environment = traced
            environment["PORTAL_TOKEN_BACKEND"] = backend
            let stored = try ProcessRunner.run(
                binary, ["store"], stdin: "protocol=https\nhost=\(host)\nusername=u\npassword=p-\(backend)\n",
                environment: environment)
            #expect(stored.exitCode == 0, "\(stored.stderr)")
            #expect(
                stored.stderr.contains("file=libsecret-1.so.0 [0];  dynamically loaded by"), "a write without libsecret"
            )
            let found = try ProcessRunner.run(
                binary, ["get"], stdin: "protocol=https\nhost=\(host)\n", environment: environment)
            #expect(found.exitCode == 0)
            #expect(found.stdout == "username=u\npassword=p-\(backend)\n")
            #expect(found.stderr.contains("file=libc.so.6"), "LD_DEBUG traced nothing: \(found.stderr)")
            #expect(!found.stderr.contains("libsystemd"), "libsystemd loaded by a get under \(backend)")
            for library in Self.glibLibraries {
                #expect(!found.stderr.contains("file=\(library)"), "\(library) loaded by a get under \(backend)")
            }
        }
        _ = try? ProcessRunner.run(
            binary, ["erase"], stdin: "protocol=https\nhost=\(host)\n",
            environment: ProcessRunner.environment(["PORTAL_TOKEN_BACKEND": "secret-service"]))
    }
}
