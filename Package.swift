// swift-tools-version:6.0
import PackageDescription

// Dependencies point inward: PortalTokenCore is pure; each adapter wraps one outside thing;
// Composition is the one place that picks concrete adapters; Commands imports none. The
// dependencies below say so, but SwiftPM lets a target import any module the package has built,
// so what holds the rule is a test: Tests/CommandsTests/DependencyRuleTests.swift.
let package = Package(
    name: "portal-token",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "portal-token", targets: ["portal-token"])
    ],
    targets: [
        // Its own declarations of the few types libsecret's calls take: libsecret is loaded with
        // dlopen when the keyring is first used, and building needs neither its headers nor GLib's
        // (see shim.h).
        .systemLibrary(name: "CLibSecret", path: "Sources/CLibraries/CLibSecret"),
        // Headers only: libcurl itself is loaded with dlopen when a request is made (see shim.h).
        .systemLibrary(
            name: "CCurl", path: "Sources/CLibraries/CCurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .systemLibrary(
            name: "CSodium", path: "Sources/CLibraries/CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        .systemLibrary(
            name: "CKeyutils", path: "Sources/CLibraries/CKeyutils",
            pkgConfig: "libkeyutils",
            providers: [.apt(["libkeyutils-dev"])]
        ),
        // sd-bus, for the tests only: an independent D-Bus client that calls the desktop handler as
        // a launcher does (portal-token speaks D-Bus itself: Sources/Adapters/SessionBus).
        .systemLibrary(
            name: "CSDBus", path: "Tests/CSDBus",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        // Headers only: tpm2-tss is loaded with dlopen when a store sealed by the TPM is opened (see shim.h).
        .systemLibrary(
            name: "CTPM2", path: "Sources/CLibraries/CTPM2",
            providers: [.apt(["libtss2-dev"])]
        ),
        // Headers only: the process hardening that needs a C call (prctl is variadic).
        .systemLibrary(name: "CProcessHardening", path: "Sources/CLibraries/CProcessHardening"),
        // Headers only: libqrencode is loaded with dlopen when a QR code is drawn (see shim.h).
        .systemLibrary(
            name: "CQRencode", path: "Sources/CLibraries/CQRencode",
            providers: [.apt(["libqrencode-dev"])]
        ),
        // POSIX plumbing every module may use: bounded file reading, the monotonic clock, hex,
        // percent-coding, trimming, the environment, mkdir -p, the cross-process file lock, the
        // loopback TCP listening socket and the one way a program is started.
        .target(name: "Basics", path: "Sources/Core/Basics"),
        // libsodium's one wrapper (Sodium.swift): digests, the file's cipher and key derivation, and
        // random bytes, which are all the core takes of the system beside Basics.
        .target(name: "PortalTokenCore", dependencies: ["Basics", "CSodium"], path: "Sources/Core/PortalTokenCore"),
        .target(
            name: "SecretServiceStore", dependencies: ["Basics", "PortalTokenCore", "CLibSecret"],
            path: "Sources/Adapters/SecretServiceStore"),
        .target(
            name: "KernelKeyring", dependencies: ["Basics", "PortalTokenCore", "CKeyutils"],
            path: "Sources/Adapters/KernelKeyring"),
        .target(name: "SessionBus", dependencies: ["Basics", "PortalTokenCore"], path: "Sources/Adapters/SessionBus"),
        .target(
            name: "EncryptedFileStore", dependencies: ["Basics", "PortalTokenCore", "KernelKeyring"],
            path: "Sources/Adapters/EncryptedFileStore"),
        .target(
            name: "PortalHTTP", dependencies: ["Basics", "PortalTokenCore", "CCurl", "CPeerCredentials"],
            path: "Sources/Adapters/PortalHTTP"),
        // KV version 2 of OpenBao or HashiCorp Vault as an item store, over the HTTPTransport port.
        .target(name: "VaultStore", dependencies: ["Basics", "PortalTokenCore"], path: "Sources/Adapters/VaultStore"),
        .target(name: "HookRunner", dependencies: ["Basics", "PortalTokenCore"], path: "Sources/Adapters/HookRunner"),
        // The audit log as a file: appends, rotation, the fingerprint key.
        .target(
            name: "AuditFileLog", dependencies: ["Basics", "PortalTokenCore"], path: "Sources/Adapters/AuditFileLog"),
        // The encrypted file's key sealed by a TPM 2.0, through tpm2-tss's ESAPI.
        .target(
            name: "TPMKeySealer", dependencies: ["Basics", "PortalTokenCore", "CTPM2"],
            path: "Sources/Adapters/TPMKeySealer"),
        .target(
            name: "TerminalQRCode", dependencies: ["Basics", "PortalTokenCore", "CQRencode"],
            path: "Sources/Adapters/TerminalQRCode"),
        .target(
            name: "LoopbackRedirectListener", dependencies: ["Basics", "PortalTokenCore"],
            path: "Sources/Adapters/LoopbackRedirectListener"),
        // Headers only: pidfd_open and pidfd_send_signal, SO_PEERCRED's fields, SO_PEERPIDFD.
        .systemLibrary(name: "CPeerCredentials", path: "Sources/CLibraries/CPeerCredentials"),
        // Who is on the other end of a Unix socket, from the kernel.
        .target(
            name: "PeerCredentials", dependencies: ["Basics", "PortalTokenCore", "CPeerCredentials"],
            path: "Sources/Adapters/PeerCredentials"),
        // A small, strict HTTP/1.1 server on listening sockets (the agent's Unix sockets).
        .target(
            name: "LocalHTTPServer", dependencies: ["Basics", "PortalTokenCore"],
            path: "Sources/Adapters/LocalHTTPServer"),
        // Client mode: one bounded HTTP exchange with the agent over its Unix socket.
        .target(
            name: "AgentClient", dependencies: ["Basics", "PortalTokenCore", "CPeerCredentials"],
            path: "Sources/Adapters/AgentClient"),
        // The operations both front ends call (the CLI's commands and the agent's routes), with
        // what they run in: the Context of settings and streams, and Services, the ports the
        // composition root fills. It imports no adapter module.
        .target(name: "Operations", dependencies: ["Basics", "PortalTokenCore"]),
        // The front ends: the CLI's commands, which parse, call an operation and render its value,
        // and the agent's router, which sends the same values as JSON. No adapter module either.
        .target(name: "Commands", dependencies: ["Basics", "PortalTokenCore", "Operations"]),
        // The composition root: the one module that imports the adapters and fills Services.
        .target(
            name: "Composition",
            dependencies: [
                "Basics", "PortalTokenCore", "Operations", "Commands", "SecretServiceStore", "SessionBus",
                "EncryptedFileStore",
                "KernelKeyring", "PortalHTTP", "HookRunner", "TerminalQRCode", "LoopbackRedirectListener",
                "CProcessHardening", "VaultStore", "AuditFileLog", "LocalHTTPServer", "PeerCredentials",
                "AgentClient", "TPMKeySealer",
            ]),
        .executableTarget(name: "portal-token", dependencies: ["Composition"], path: "Sources/Programs/portal-token"),
        // Writes the shell completions and the man page's OPTIONS and EXIT STATUS from the option table.
        .executableTarget(
            name: "portal-token-docgen", dependencies: ["Commands", "Operations", "PortalTokenCore"],
            path: "Sources/Programs/portal-token-docgen"),

        .target(
            name: "PortalTokenTestSupport", dependencies: ["Basics", "PortalTokenCore", "CSDBus"],
            path: "Tests/PortalTokenTestSupport"),
        .executableTarget(
            name: "portal-fake-server", dependencies: ["PortalTokenTestSupport"], path: "Tests/portal-fake-server"),
        .testTarget(name: "BasicsTests", dependencies: ["Basics"]),
        .testTarget(
            name: "PortalTokenCoreTests", dependencies: ["Basics", "PortalTokenCore", "PortalTokenTestSupport"]),
        .testTarget(
            name: "SecretServiceStoreTests",
            dependencies: ["Basics", "SecretServiceStore", "SessionBus", "PortalTokenTestSupport"]),
        .testTarget(name: "EncryptedFileStoreTests", dependencies: ["EncryptedFileStore", "PortalTokenTestSupport"]),
        // The contracts against a real OpenBao server that contrib/test.sh starts (VAULT_ADDR).
        .testTarget(
            name: "VaultStoreTests",
            dependencies: ["VaultStore", "PortalHTTP", "PortalTokenCore", "PortalTokenTestSupport"]),
        .testTarget(
            name: "PortalHTTPTests",
            dependencies: ["PortalHTTP", "PortalTokenCore", "PortalTokenTestSupport", "LoopbackRedirectListener"]),
        .testTarget(
            name: "HookRunnerTests", dependencies: ["HookRunner", "PortalTokenCore", "PortalTokenTestSupport"]),
        .testTarget(name: "TerminalQRCodeTests", dependencies: ["TerminalQRCode", "PortalTokenCore"]),
        .testTarget(name: "AuditFileLogTests", dependencies: ["AuditFileLog", "PortalTokenCore", "Basics"]),
        .testTarget(
            name: "LocalHTTPServerTests",
            dependencies: ["LocalHTTPServer", "PeerCredentials", "PortalTokenCore", "PortalTokenTestSupport"]),
        .testTarget(
            name: "LoopbackRedirectListenerTests",
            dependencies: ["LoopbackRedirectListener", "PortalTokenCore", "PortalTokenTestSupport"]),
        // Commands run inside the test process with every adapter faked (the auto decision, the
        // locks and the session cache run for real): parsing, usage errors, output and exit codes.
        .testTarget(
            name: "CommandsTests",
            dependencies: ["Commands", "Operations", "PortalTokenCore", "PortalTokenTestSupport"],
            // The expected help, completions and man page text, compared by SnapshotTests.
            exclude: ["Snapshots"]),
        // The binary in a real process: exit codes of a real process, signals, the real keyring, real git.
        .testTarget(
            name: "PortalTokenCLITests", dependencies: ["AgentClient", "PortalTokenCore", "PortalTokenTestSupport"]),
    ]
)
