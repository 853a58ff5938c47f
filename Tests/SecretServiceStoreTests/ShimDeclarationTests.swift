import Foundation
import PortalTokenTestSupport
import Testing

/// CLibSecret's shim.h declares the part of GLib's, GIO's and libsecret's ABI it uses instead of
/// including their headers (which need pkg-config's flags to be found). This compiles one C
/// program twice, against the installed headers and against the shim, and compares what each
/// reports: every type's size and signedness, every structure's size, alignment and field
/// offsets, every enumeration value. Needs a C compiler, pkg-config and libsecret-1-dev
/// (`contrib/deps.sh test`); without them the test fails rather than skips.
@Suite("CLibSecret's declarations")
struct ShimDeclarationTests {
    static let shim = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Sources/CLibraries/CLibSecret/shim.h").standardized.path

    static let program = #"""
        #ifdef WITH_INSTALLED_HEADERS
        #include <libsecret/secret.h>
        #else
        #include SHIM
        #endif
        #include <stdio.h>
        #include <stddef.h>

        #define TYPE(t) printf("%s size %zu signed %d\n", #t, sizeof(t), (t)-1 < (t)0)
        #define POINTER(t) printf("%s size %zu\n", #t, sizeof(t))
        #define STRUCT(t) printf("%s size %zu align %zu\n", #t, sizeof(t), _Alignof(t))
        #define FIELD(t, f) printf("%s.%s at %zu size %zu\n", #t, #f, offsetof(t, f), sizeof(((t *)0)->f))
        #define VALUE(v) printf("%s = %lld\n", #v, (long long)(v))

        int main(void) {
            TYPE(gchar); TYPE(gint); TYPE(guint); TYPE(gboolean); TYPE(guint32); TYPE(guint64);
            TYPE(gsize); TYPE(gssize); TYPE(GQuark); TYPE(GLogLevelFlags);
            POINTER(gpointer); POINTER(gconstpointer); POINTER(GHashFunc); POINTER(GEqualFunc);
            POINTER(GDestroyNotify); POINTER(GLogWriterFunc);
            STRUCT(GList); FIELD(GList, data); FIELD(GList, next); FIELD(GList, prev);
            STRUCT(GError); FIELD(GError, domain); FIELD(GError, code); FIELD(GError, message);
            STRUCT(GHashTableIter);
            STRUCT(GLogField); FIELD(GLogField, key); FIELD(GLogField, value); FIELD(GLogField, length);
            TYPE(GLogWriterOutput); VALUE(G_LOG_WRITER_HANDLED); VALUE(G_LOG_WRITER_UNHANDLED);
            VALUE(G_IO_ERROR_CANCELLED);
            TYPE(GBusType); VALUE(G_BUS_TYPE_STARTER); VALUE(G_BUS_TYPE_NONE); VALUE(G_BUS_TYPE_SYSTEM);
            VALUE(G_BUS_TYPE_SESSION);
            TYPE(GDBusCallFlags); VALUE(G_DBUS_CALL_FLAGS_NONE); VALUE(G_DBUS_CALL_FLAGS_NO_AUTO_START);
            VALUE(G_DBUS_CALL_FLAGS_ALLOW_INTERACTIVE_AUTHORIZATION);
            TYPE(SecretServiceFlags); VALUE(SECRET_SERVICE_NONE); VALUE(SECRET_SERVICE_OPEN_SESSION);
            VALUE(SECRET_SERVICE_LOAD_COLLECTIONS);
            TYPE(SecretSearchFlags); VALUE(SECRET_SEARCH_NONE); VALUE(SECRET_SEARCH_ALL);
            VALUE(SECRET_SEARCH_UNLOCK); VALUE(SECRET_SEARCH_LOAD_SECRETS);
            TYPE(SecretCollectionFlags); VALUE(SECRET_COLLECTION_NONE); VALUE(SECRET_COLLECTION_LOAD_ITEMS);
            TYPE(SecretItemCreateFlags); VALUE(SECRET_ITEM_CREATE_NONE); VALUE(SECRET_ITEM_CREATE_REPLACE);
            TYPE(SecretSchemaFlags); VALUE(SECRET_SCHEMA_NONE); VALUE(SECRET_SCHEMA_DONT_MATCH_NAME);
            TYPE(SecretSchemaAttributeType); VALUE(SECRET_SCHEMA_ATTRIBUTE_STRING);
            VALUE(SECRET_SCHEMA_ATTRIBUTE_INTEGER); VALUE(SECRET_SCHEMA_ATTRIBUTE_BOOLEAN);
            return 0;
        }
        """#

    /// Compiles the program with `flags` and returns what it prints.
    static func report(_ directory: String, _ name: String, _ flags: [String]) throws -> String {
        let binary = "\(directory)/\(name)"
        let compile = try ProcessRunner.run(
            "/usr/bin/cc", ["-std=c11", "-Wall", "-Werror", "-o", binary, "\(directory)/check.c"] + flags)
        #expect(compile.exitCode == 0, "cc \(name): \(compile.stderr)")
        let run = try ProcessRunner.run(binary)
        #expect(run.exitCode == 0, "\(run.stderr)")
        return run.stdout
    }

    @Test("the shim's types, layouts and values are the installed headers' own")
    func matchesInstalledHeaders() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("shim-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Self.program.write(toFile: "\(directory)/check.c", atomically: true, encoding: .utf8)
        let pkgConfig = try ProcessRunner.run("/usr/bin/pkg-config", ["--cflags", "libsecret-1"])
        #expect(pkgConfig.exitCode == 0, "libsecret-1-dev is needed: \(pkgConfig.stderr)")
        let installedFlags = pkgConfig.stdout.split(whereSeparator: \.isWhitespace).map(String.init)
        let installed = try Self.report(directory, "installed", ["-DWITH_INSTALLED_HEADERS"] + installedFlags)
        let shim = try Self.report(directory, "shim", ["-DSHIM=\"\(Self.shim)\""])
        #expect(!shim.isEmpty)
        #expect(shim == installed)
    }
}
