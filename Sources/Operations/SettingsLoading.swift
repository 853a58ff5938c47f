import Basics
import PortalTokenCore

extension Settings {
    /// Settings from the flags, the environment and the config file (docs/settings.md, "Precedence").
    package static func load(flags: [String: String], environment: [String: String]) throws -> Settings {
        let explicitPath = Settings(flags: flags, environment: environment).value(.configFile)
        let configHome: String
        if let value = environment["XDG_CONFIG_HOME"], value.hasPrefix("/") {
            configHome = value
        } else {
            configHome = (environment["HOME"] ?? "") + "/.config"
        }
        let userPath = configHome + "/portal-token/config"
        let path = explicitPath ?? userPath
        var values: [String: String] = [:]
        do {
            let bytes = try FileReading.contents(of: path, ownOnly: true)
            values = try Settings.parseConfigFile(String(decoding: bytes, as: UTF8.self), path: path)
        } catch FileReading.Failure.missing where explicitPath == nil {
            // No config file is the ordinary case.
        } catch FileReading.Failure.writableByOthers(let mode) {
            throw CLIError.usage(
                "cannot read the config file \(path): it is writable by other users (mode \(String(mode, radix: 8)))",
                hint: "restrict it with 'chmod go-w \(path)'")
        } catch let failure as FileReading.Failure {
            throw CLIError.usage("cannot read the config file \(path): \(failure.described())")
        }
        // The audit log's settings come from the user's own file only (docs/audit.md, "Turning it
        // off"): when another file is in use, that one is read for them alone, and a file there that
        // cannot be read leaves the log on.
        var userValues = values
        if path != userPath {
            userValues = [:]
            if let bytes = try? FileReading.contents(of: userPath, ownOnly: true),
                let parsed = try? Settings.parseConfigFile(String(decoding: bytes, as: UTF8.self), path: userPath)
            {
                userValues = parsed
            }
        }
        return Settings(
            flags: flags, environment: environment, configFile: values, configPath: path, userConfigFile: userValues)
    }

    /// The settings every command reads: a value that is wrong is reported before a setting
    /// that is missing (`--backend bogus` says so, rather than "no auth environment ID").
    package func checkValues() throws {
        _ = try Context.requestedBackend(self)
        _ = try bool(.trace)
        _ = try auditLogEnabled()
        _ = try auditLogMaxBytes()
        _ = try auditJournalEnabled()
    }
}
