import PortalTokenCore
import Testing

/// Whether /proc hides other users' command lines, read from the mount table
/// (docs/signing-in.md, "Which browsers put the URL on a command line").
@Suite("process list visibility")
struct ProcessListVisibilityTests {
    static func mountInfo(_ procOptions: String, superOptions: String = "rw") -> String {
        """
        21 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
        22 21 0:21 / /proc \(procOptions) shared:12 - proc proc \(superOptions)
        23 21 0:5 / /dev rw,nosuid - devtmpfs udev rw,size=4000k
        """
    }

    @Test("hidepid noaccess, invisible or ptraceable (1, 2 or 4) hides; none, 0 or off does not")
    func hidepidValues() {
        for value in ["1", "2", "4", "noaccess", "invisible", "ptraceable"] {
            #expect(
                ProcessListVisibility.hidesOtherUsers(
                    mountInfo: Self.mountInfo("rw,nosuid", superOptions: "rw,hidepid=\(value)")), "\(value)")
            #expect(ProcessListVisibility.hidesOtherUsers(mountInfo: Self.mountInfo("rw,hidepid=\(value)")))
        }
        for value in ["0", "off"] {
            #expect(
                !ProcessListVisibility.hidesOtherUsers(
                    mountInfo: Self.mountInfo("rw", superOptions: "rw,hidepid=\(value),gid=0")))
        }
        #expect(!ProcessListVisibility.hidesOtherUsers(mountInfo: Self.mountInfo("rw,nosuid,relatime")))
        #expect(!ProcessListVisibility.hidesOtherUsers(mountInfo: Self.mountInfo("rw", superOptions: "rw,subset=pid")))
    }

    @Test("the mount in effect is the last one at /proc; another file system or mount point does not count")
    func whichMount() {
        let hidden = Self.mountInfo("rw", superOptions: "rw,hidepid=invisible")
        #expect(!ProcessListVisibility.hidesOtherUsers(mountInfo: hidden + "\n30 21 0:40 / /proc rw - proc proc rw"))
        #expect(
            ProcessListVisibility.hidesOtherUsers(
                mountInfo: Self.mountInfo("rw") + "\n30 21 0:40 / /proc rw - proc proc rw,hidepid=2"))
        #expect(
            !ProcessListVisibility.hidesOtherUsers(
                mountInfo: "22 21 0:21 / /proc rw - tmpfs tmpfs rw,hidepid=2\n"))
        #expect(
            !ProcessListVisibility.hidesOtherUsers(
                mountInfo: "22 21 0:21 / /run/proc rw - proc proc rw,hidepid=2\n"))
        #expect(!ProcessListVisibility.hidesOtherUsers(mountInfo: ""))
    }

    @Test("/proc/mounts, the older table, is read too")
    func procMounts() {
        #expect(ProcessListVisibility.hidesOtherUsers(mountInfo: "proc /proc proc rw,nosuid,hidepid=invisible 0 0\n"))
        #expect(!ProcessListVisibility.hidesOtherUsers(mountInfo: "proc /proc proc rw,nosuid,relatime 0 0\n"))
    }
}
