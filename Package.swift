// swift-tools-version:6.0
import PackageDescription

/// encfs: encrypted resource bundles mounted read-only through FUSE.
///
/// Imports point one way: CryptCore → COpenSSL; EncFS → CryptCore (and, in
/// `Sources/EncFS/FUSE/` only, CFuse); the executables are thin `main.swift`
/// files over EncFS. `Scripts/check-layering.sh` keeps the rule honest.
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
        .target(name: "EncFS", dependencies: ["CryptCore", "CFuse"]),
        .executableTarget(name: "encfs-pack", dependencies: ["EncFS"]),
        .executableTarget(name: "encfs-mount", dependencies: ["EncFS"]),
        .executableTarget(name: "encfs-inspect", dependencies: ["EncFS"]),
        .executableTarget(name: "encfs-keygen", dependencies: ["EncFS"]),
        // Fuzz harness and corpus replayer (Scripts/fuzz.sh, FuzzReplayTests);
        // test tooling, so not a product.
        .executableTarget(name: "encfs-fuzz", dependencies: ["EncFS", "CryptCore"]),
        .testTarget(name: "CryptCoreTests", dependencies: ["CryptCore"], resources: [.copy("Vectors")]),
        .testTarget(name: "FormatTests", dependencies: ["EncFS", "CryptCore"], resources: [.copy("Fixtures")]),
        .testTarget(name: "MountTests", dependencies: ["EncFS"]),
    ]
)
