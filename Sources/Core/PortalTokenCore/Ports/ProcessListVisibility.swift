/// Whether other local users can read this user's command lines (`/proc/PID/cmdline`): they can
/// unless `/proc` is mounted with `hidepid` (proc(5)). A browser's launcher holds a custom-scheme
/// redirect URL, grant included, in its command line while it runs, so `login` warns when they
/// can (docs/signing-in.md, "Which browsers put the URL on a command line").
public enum ProcessListVisibility {
    /// The `hidepid` values that hide other users' processes, or at least their command lines:
    /// 1 (`noaccess`), 2 (`invisible`) and 4 (`ptraceable`); 0 (`off`) hides nothing.
    static let hidingValues: Set<Substring> = ["1", "2", "4", "noaccess", "invisible", "ptraceable"]

    /// From the text of `/proc/self/mountinfo` (or `/proc/mounts`): true only when the mount at
    /// `/proc` that is in effect (the last one listed) is a proc mount with a `hidepid` that
    /// hides; false when it is not, or when no such mount is listed.
    public static func hidesOtherUsers(mountInfo: String) -> Bool {
        var hides = false
        for line in mountInfo.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            let mountPoint: Substring
            let fileSystem: Substring
            let options: [Substring]
            if let separator = fields.firstIndex(of: "-"), separator >= 6, separator + 3 < fields.count {
                // mountinfo: ID PARENT MAJOR:MINOR ROOT MOUNT-POINT OPTIONS [OPTIONAL…] - TYPE SOURCE SUPER-OPTIONS
                mountPoint = fields[4]
                fileSystem = fields[separator + 1]
                options = fields[5].split(separator: ",") + fields[separator + 3].split(separator: ",")
            } else if fields.count >= 4 {
                // mounts: SOURCE MOUNT-POINT TYPE OPTIONS DUMP PASS
                mountPoint = fields[1]
                fileSystem = fields[2]
                options = fields[3].split(separator: ",")
            } else {
                continue
            }
            guard mountPoint == "/proc" else { continue }
            let hidepid = options.last { $0.hasPrefix("hidepid=") }?.dropFirst("hidepid=".count)
            hides = fileSystem == "proc" && hidepid.map(hidingValues.contains) == true
        }
        return hides
    }
}
