/// The version of encfs: what every command prints for `--version`
/// (`encfs-pack 0.1.0`), and what an embedding program can show.
public enum EncFSVersion {
    /// Major.minor.patch.
    public static let string = "0.1.0"
}
