import Foundation
import Testing

/// The dependency rule, held by a test since SwiftPM lets a module import any module the package
/// has built: only the composition root imports the adapter modules (docs/development.md,
/// "Modules and the dependency rule").
@Suite("the dependency rule")
struct DependencyRuleTests {
    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources")

    /// The modules that wrap an outside thing (a C library, the kernel, a socket, a process).
    static let adapters: Set<String> = [
        "SecretServiceStore", "EncryptedFileStore", "KernelKeyring", "SessionBus", "PortalHTTP", "HookRunner",
        "TerminalQRCode", "LoopbackRedirectListener", "Composition", "CLibSecret", "CCurl", "CKeyutils",
        "CProcessHardening", "CQRencode", "CSodium", "VaultStore", "AuditFileLog", "LocalHTTPServer",
        "PeerCredentials", "CPeerCredentials", "AgentClient", "TPMKeySealer", "CTPM2",
    ]

    /// What each module that is not an adapter may import besides the toolchain's own modules.
    static let allowed: [String: Set<String>] = [
        "Basics": [],
        "PortalTokenCore": ["Basics", "CSodium"],
        "Operations": ["Basics", "PortalTokenCore"],
        "Commands": ["Basics", "PortalTokenCore", "Operations"],
        "portal-token-docgen": ["Commands", "Operations", "PortalTokenCore"],
        "portal-token": ["Composition"],
    ]

    /// Sources/ by layer: each group folder holds modules; Operations, Commands and Composition
    /// are modules of their own.
    static let groups = ["Core", "Adapters", "CLibraries", "Programs"]
    static let topLevelModules = ["Operations", "Commands", "Composition"]

    /// Every module of Sources, with its folder.
    static func modules() throws -> [(name: String, directory: URL)] {
        var found = topLevelModules.map { ($0, sources.appendingPathComponent($0)) }
        for group in groups {
            let folder = sources.appendingPathComponent(group)
            for name in try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() {
                found.append((name, folder.appendingPathComponent(name)))
            }
        }
        return found
    }

    static func imports(of module: String) throws -> [(file: String, module: String)] {
        let directory = try #require(try modules().first { $0.name == module }?.directory, "no module \(module)")
        let files = try #require(FileManager.default.enumerator(atPath: directory.path)).compactMap { $0 as? String }
        var found: [(String, String)] = []
        for file in files where file.hasSuffix(".swift") {
            let text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            for line in text.split(separator: "\n") {
                let words = line.split(separator: " ").map(String.init)
                guard let index = words.firstIndex(of: "import"), index + 1 < words.count,
                    words[..<index].allSatisfy({ $0.hasPrefix("@") || ["public", "internal", "package"].contains($0) })
                else { continue }
                found.append((module + "/" + file, words[index + 1]))
            }
        }
        return found
    }

    @Test("the commands, the core and Basics import no adapter module; only Composition does")
    func onlyTheCompositionRootImportsAdapters() throws {
        for (module, allowed) in Self.allowed {
            let imports = try Self.imports(of: module)
            #expect(!imports.isEmpty, "\(module) has no sources")
            for (file, imported) in imports where Self.adapters.contains(imported) && !allowed.contains(imported) {
                Issue.record("\(file) imports the adapter module \(imported)")
            }
            for (file, imported) in imports
            where !allowed.contains(imported) && !Self.adapters.contains(imported)
                && !["Glibc", "Foundation", "Synchronization", "Dispatch"].contains(imported)
            {
                Issue.record("\(file) imports \(imported), which \(module) may not")
            }
        }
    }

    @Test("no module of Sources imports sd-bus, which only the tests use as an independent D-Bus client")
    func noProductModuleImportsSDBus() throws {
        for (module, _) in try Self.modules() {
            for (file, imported) in try Self.imports(of: module) where imported == "CSDBus" {
                Issue.record("\(file) imports CSDBus")
            }
        }
    }

    @Test("every module of Sources is either an adapter or has a rule")
    func everyModuleIsKnown() throws {
        for (module, _) in try Self.modules() where !Self.adapters.contains(module) && Self.allowed[module] == nil {
            Issue.record("Sources/…/\(module) is neither an adapter nor covered by the dependency rule")
        }
    }

    @Test("Sources/ reads by layer: the core, the adapters and their C libraries, the commands, composition, programs")
    func sourcesByLayer() throws {
        let entries = Set(try FileManager.default.contentsOfDirectory(atPath: Self.sources.path))
        #expect(entries == Set(Self.groups + Self.topLevelModules), "\(entries.sorted())")
        let layer = { (group: String) in
            Set(try FileManager.default.contentsOfDirectory(atPath: Self.sources.appendingPathComponent(group).path))
        }
        #expect(try layer("Core") == ["Basics", "PortalTokenCore"])
        // Every adapter lives with the adapters, every C library with the C libraries.
        for module in Self.adapters where module != "Composition" {
            let group =
                module.hasPrefix("C") && module.dropFirst().first?.isUppercase == true ? "CLibraries" : "Adapters"
            #expect(try layer(group).contains(module), "\(module) is not in Sources/\(group)")
        }
    }
}
