/// The version of encfs: what every command prints for `--version`
/// (`encfs-pack 0.1.0`), and what an embedding program can show.
package enum EncFSVersion {
    /// Major.minor.patch.
    package static let string = "0.1.0"
}
