// swift-tools-version:6.0
import PackageDescription

/// encfs: encrypted resource bundles mounted read-only through FUSE.
///
/// Imports point one way, and the dependencies below are what enforce it:
/// CryptCore → COpenSSL; EncFS (the FUSE-free core: format, keys, index,
/// reader, writer, the public API) → CryptCore; EncFSMount (the FUSE file
/// system and its daemon) → EncFS, CFuse; EncFSCLI (argument parsing, key
/// options, prompts, the commands) → EncFS, EncFSMount; the executables are
/// thin `main.swift` files over EncFSCLI. `Scripts/check-layering.sh` keeps
/// only what the compiler cannot check.
let package = Package(
    name: "encfs",
    products: [
        .executable(name: "encfs-pack", targets: ["encfs-pack"]),
        .executable(name: "encfs-mount", targets: ["encfs-mount"]),
        .executable(name: "encfs-inspect", targets: ["encfs-inspect"]),
        .executable(name: "encfs-keygen", targets: ["encfs-keygen"]),
        .library(name: "EncFS", targets: ["EncFS"]),
    ],
    targets: [
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CFuse", pkgConfig: "fuse3", providers: [.apt(["libfuse3-dev"])]),
        .target(name: "CryptCore", dependencies: ["COpenSSL"]),
        .target(name: "EncFS", dependencies: ["CryptCore"]),
        .target(name: "EncFSMount", dependencies: ["EncFS", "CryptCore", "CFuse"]),
        .target(name: "EncFSCLI", dependencies: ["EncFS", "EncFSMount", "CryptCore"]),
        .executableTarget(name: "encfs-pack", dependencies: ["EncFSCLI"]),
        .executableTarget(name: "encfs-mount", dependencies: ["EncFSCLI"]),
        .executableTarget(name: "encfs-inspect", dependencies: ["EncFSCLI"]),
        .executableTarget(name: "encfs-keygen", dependencies: ["EncFSCLI"]),
        // Fuzz harness and corpus replayer (Scripts/fuzz.sh, FuzzReplayTests);
        // test tooling, so not a product.
        .executableTarget(name: "encfs-fuzz", dependencies: ["EncFS", "EncFSCLI", "CryptCore"]),
        .testTarget(name: "CryptCoreTests", dependencies: ["CryptCore"], resources: [.copy("Vectors")]),
        .testTarget(name: "FormatTests", dependencies: ["EncFS", "CryptCore"], resources: [.copy("Fixtures")]),
        .testTarget(name: "MountTests", dependencies: ["EncFS", "EncFSMount"]),
        // The public API as an application sees it: EncFS only, no FUSE.
        .testTarget(name: "LibraryTests", dependencies: ["EncFS"]),
        // A program that embeds the library through its public API only;
        // LibraryTests runs it and checks that it links no libfuse.
        .executableTarget(name: "encfs-embed-example", dependencies: ["EncFS"], path: "examples/embed",
                          exclude: ["README.md"]),
        // The mount layer's pure parts (directory cursor, option and log
        // formatting, the daemon's argv): no FUSE mount, no binaries.
        .testTarget(name: "MountUnitTests", dependencies: ["EncFS", "EncFSMount", "EncFSCLI"]),
    ]
)
