import Foundation

/// What portal-token keeps in the kernel keyring, as a process of the user in its own user
/// namespace finds it: the persistent keyring, linked for the listing into a session keyring of
/// the listing's own (`keyctl session -`), so that no other process of the suite comes to
/// possess it.
public enum KernelKeys {
    /// The script that prints each entry of the persistent keyring as `ID DESCRIPTION`.
    static let listing = """
        anchor=$(keyctl get_persistent @s) || exit 1
        for id in $(keyctl rlist "$anchor"); do printf '%s %s\\n' "$id" "$(keyctl rdescribe "$id")"; done
        """

    /// Each entry's key ID and description (`user;UID;GID;PERM;NAME`), run through `wrapper`
    /// (such as setpriv to another uid) with `environment`.
    public static func entries(
        wrapper: [String] = [], environment: [String: String]? = nil
    ) throws -> [(id: String, description: String)] {
        let command = wrapper + ["/usr/bin/keyctl", "session", "-", "/bin/sh", "-c", listing]
        let result = try ProcessRunner.run(
            command[0], Array(command.dropFirst()), environment: environment, timeout: 30)
        return result.stdout.split(separator: "\n").compactMap { line -> (id: String, description: String)? in
            let fields = line.split(separator: " ", maxSplits: 1)
            guard fields.count == 2 else { return nil }
            return (String(fields[0]), String(fields[1]))
        }
    }

    /// The names of portal-token's entries (`portal-token:…`).
    public static func names(wrapper: [String] = [], environment: [String: String]? = nil) throws -> [String] {
        try entries(wrapper: wrapper, environment: environment).compactMap { entry in
            entry.description.split(separator: ";", maxSplits: 4).last.map(String.init)
        }.filter { $0.hasPrefix("portal-token:") }
    }
}
