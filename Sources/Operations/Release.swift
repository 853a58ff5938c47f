/// This build's release.
public enum Release {
    /// The version `--version` prints and Portal's requests carry in their User-Agent.
    public static let version = "0.1.0"
}
