// swift-tools-version:6.0
import PackageDescription

/// encfs: encrypted resource bundles mounted read-only through FUSE.
///
/// Imports point one way, and the dependencies below are what enforce it:
/// CryptCore → COpenSSL; EncFSCore (format, keys, index, reader, writer,
/// rekeyer, byte sources: FUSE-free and Foundation-free) → CryptCore,
/// CZstd (zstd for compressed bundles, only in EncFSCore/Compression/);
/// EncFSRemote (bundles over HTTP range requests, the ciphertext cache) →
/// EncFSCore, CCurl; EncFS (the public API, `EncryptedBundle`) → EncFSCore,
/// EncFSRemote; EncFSMount (the FUSE file system and its daemon) →
/// EncFSCore, CFuse; EncFSCLI (argument parsing, key options, prompts, the
/// commands) → EncFSCore, EncFSMount, EncFSRemote, CKeyring (the keyctl
/// system call, for the kernel keyring); the executables are thin
/// `main.swift` files over EncFSCLI.
///
/// The public API is a target of its own because it speaks `Data` and
/// `Date`: linking Foundation costs a process about 1.7 MiB of resident
/// memory, which the tools and the mount daemon do not pay
/// (docs/ARCHITECTURE.md). `Scripts/check-layering.sh` keeps only what the
/// compiler cannot check.
let package = Package(
    name: "encfs",
    products: [
        .executable(name: "encfs-pack", targets: ["encfs-pack"]),
        .executable(name: "encfs-mount", targets: ["encfs-mount"]),
        .executable(name: "encfs-inspect", targets: ["encfs-inspect"]),
        .executable(name: "encfs-keygen", targets: ["encfs-keygen"]),
        .executable(name: "encfs-rekey", targets: ["encfs-rekey"]),
        .executable(name: "encfs-ctl", targets: ["encfs-ctl"]),
        .executable(name: "encfs-serve", targets: ["encfs-serve"]),
        .library(name: "EncFS", targets: ["EncFS"]),
        // libencfs.so: the C ABI (include/encfs.h) over the public API.
        .library(name: "encfs", type: .dynamic, targets: ["EncFSC"]),
    ],
    targets: [
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CFuse", pkgConfig: "fuse3", providers: [.apt(["libfuse3-dev"])]),
        // The kernel keyring's keyctl system call (variadic syscall()), for
        // --key-keyring; the kernel headers only, no library.
        .systemLibrary(name: "CKeyring"),
        // libcurl's header only: the library is loaded with dlopen when a
        // remote bundle is opened (EncFSRemote/LibCurl.swift).
        .systemLibrary(name: "CCurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // zstd for compressed bundles (format v2); used only in
        // Sources/EncFSCore/Compression/ (Scripts/check-layering.sh).
        .systemLibrary(name: "CZstd", pkgConfig: "libzstd", providers: [.apt(["libzstd-dev"])]),
        // FUSE over io_uring: raw io_uring system calls and the FUSE ring
        // ABI (kernel headers only, no library); used only in
        // Sources/EncFSMount/Uring/ (Scripts/check-layering.sh).
        .systemLibrary(name: "CUring"),
        .systemLibrary(name: "CIPSecMB", providers: [.apt(["libipsec-mb-dev"])]),
        .target(name: "CryptCore", dependencies: ["COpenSSL", "CIPSecMB"]),
        .target(name: "EncFSCore", dependencies: ["CryptCore", "CZstd"]),
        .target(name: "EncFS", dependencies: ["EncFSCore", "EncFSRemote", "CryptCore"]),
        // System calls Swift cannot make (variadic prctl and syscall,
        // SO_PEERCRED's struct): kernel and libc headers only, no library.
        .systemLibrary(name: "CProcess"),
        // What the mount and encfs-serve share, FUSE-free: the access
        // policy's rules and caller checks, error codes, process hardening.
        .target(name: "EncFSService", dependencies: ["EncFSCore", "CryptCore", "CProcess"]),
        .target(name: "EncFSMount", dependencies: ["EncFSCore", "EncFSService", "CryptCore", "CFuse", "CUring"]),
        // Bundles over HTTP range requests and their ciphertext cache: the
        // only target that sees libcurl; no Foundation, no libfuse.
        .target(name: "EncFSRemote", dependencies: ["EncFSCore", "CryptCore", "CCurl"]),
        // BuildInfo: the git commit for --version, generated at build time.
        // FUSE-free, so that encfs-serve can use it without linking libfuse.
        .target(name: "EncFSCLI", dependencies: ["EncFSCore", "EncFSService", "EncFSRemote", "CryptCore", "CKeyring"], plugins: ["BuildInfo"]),
        // The commands that need the FUSE file system: encfs-mount, encfs-ctl.
        .target(name: "EncFSMountCLI", dependencies: ["EncFSCLI", "EncFSCore", "EncFSService", "EncFSMount", "EncFSRemote", "CryptCore"]),
        .plugin(name: "BuildInfo", capability: .buildTool()),
        // The C ABI of libencfs.so (include/encfs.h, docs/C-API.md): SONAME
        // libencfs.so.0, only encfs_* exported (the version script), and the
        // Swift runtime linked in, so the library loads where no Swift
        // toolchain is installed.
        .target(name: "EncFSC", dependencies: ["EncFS", "EncFSCore"], exclude: ["encfs.map"],
                linkerSettings: [.unsafeFlags(["-static-stdlib", "-use-ld=lld", "-Xlinker", "-soname=libencfs.so.0",
                                               // -static-stdlib links FoundationEssentials but
                                               // not the two libraries it is built on; -z defs
                                               // makes any symbol left undefined fail the link.
                                               "-Xlinker", "-l_FoundationCollections", "-Xlinker", "-l_FoundationCShims",
                                               "-Xlinker", "-z", "-Xlinker", "defs",
                                               "-Xlinker", "--version-script=\(Context.packageDirectory)/Sources/EncFSC/encfs.map"])]),
        .executableTarget(name: "encfs-pack", dependencies: ["EncFSCLI"]),
        // The Swift runtime linked in: the mount starts two processes (the
        // command, then the daemon), each paying the dynamic loader for a
        // dozen Swift libraries otherwise (docs/PERFORMANCE.md, mount start).
        .executableTarget(name: "encfs-mount", dependencies: ["EncFSMountCLI"],
                          linkerSettings: [.unsafeFlags(["-static-stdlib"])]),
        .executableTarget(name: "encfs-inspect", dependencies: ["EncFSCLI"]),
        .executableTarget(name: "encfs-keygen", dependencies: ["EncFSCLI"]),
        // `encfs-inspect rekey` as a command of its own: the one that writes a bundle.
        .executableTarget(name: "encfs-rekey", dependencies: ["EncFSCLI"]),
        .executableTarget(name: "encfs-ctl", dependencies: ["EncFSMountCLI"]),
        // encfs-serve: a bundle over loopback HTTP or a unix socket, without
        // FUSE (issue 28); libmicrohttpd only in EncFSServe/HTTPEndpoint.swift.
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .target(name: "EncFSServe", dependencies: ["EncFSCLI", "EncFSCore", "EncFSService", "EncFSRemote", "CryptCore",
                                                   "CProcess", "CMicroHTTPD"]),
        .executableTarget(name: "encfs-serve", dependencies: ["EncFSServe"]),
        // Fuzz harness and corpus replayer (Scripts/fuzz.sh, FuzzReplayTests);
        // test tooling, so not a product.
        .executableTarget(name: "encfs-fuzz", dependencies: ["EncFSCore", "EncFSCLI", "CryptCore", "EncFSServe"]),
        // The CPU time of signing one s3:// request (Scripts/bench/bench_fleet.py);
        // bench tooling, so not a product.
        .executableTarget(name: "encfs-sigv4-bench", dependencies: ["EncFSRemote", "CryptCore"]),
        // What the test targets share (scratch directories, the seeded
        // generator, the binary runner and the test case over it, the nginx
        // runner); test tooling, so not a product. EncFSCore and CryptCore
        // only for BundleSurgery (offsets inside a bundle, from its index).
        .target(name: "SharedTestSupport", dependencies: ["EncFSCore", "CryptCore"], path: "Tests/SharedTestSupport"),
        .testTarget(name: "CryptCoreTests", dependencies: ["CryptCore", "SharedTestSupport"], resources: [.copy("Vectors")]),
        .testTarget(name: "FormatTests", dependencies: ["EncFSCore", "CryptCore", "SharedTestSupport"], resources: [.copy("Fixtures")]),
        // Real FUSE mounts through the release binaries, run once per transport.
        .testTarget(name: "MountTests", dependencies: ["EncFSCore", "EncFSService", "EncFSMount", "SharedTestSupport"]),
        // The binaries that never mount (help, man pages, completion,
        // inspect, JSON, progress, version) and the command-line layer's
        // units (option parsing, the daemon's argv, error codes).
        .testTarget(name: "CLITests", dependencies: ["EncFSCore", "EncFSService", "EncFSMount", "EncFSCLI", "EncFSMountCLI", "CryptCore", "SharedTestSupport"]),
        // Remote bundles without a mount: the public API over nginx, the
        // remote command line, the retry policy, the page-cache warmer
        // (mounted remote bundles stay in MountTests.RemoteMountTests).
        .testTarget(name: "RemoteTests", dependencies: ["EncFS", "EncFSCore", "EncFSService", "EncFSRemote", "EncFSMount", "EncFSCLI", "EncFSMountCLI", "SharedTestSupport"]),
        // The public API as an application sees it: EncFS only, no FUSE.
        .testTarget(name: "LibraryTests", dependencies: ["EncFS", "SharedTestSupport"]),
        // A program that embeds the library through its public API only;
        // LibraryTests runs it and checks that it links no libfuse.
        .executableTarget(name: "encfs-embed-example", dependencies: ["EncFS"], path: "examples/embed",
                          exclude: ["README.md"]),
        // libencfs through its C ABI and the Python package over it: C
        // programs compiled by the tests (plain, ASan, Valgrind) and the
        // pytest suite of bindings/python, against a local and an nginx-served
        // bundle.
        .testTarget(name: "EmbedTests", dependencies: ["EncFSCore", "CryptCore", "SharedTestSupport"], exclude: ["C", "Fixture"]),
        // The mount layer's pure parts (directory cursor, kernel options,
        // log escaping, control-socket directories): no FUSE mount, no binaries.
        .testTarget(name: "MountUnitTests", dependencies: ["EncFSCore", "EncFSService", "EncFSMount", "SharedTestSupport"]),
        // encfs-serve through the real binary with curl, python, wrk and chromium (issue 28).
        .testTarget(name: "ServeTests", dependencies: ["EncFSCore", "CryptCore", "SharedTestSupport"]),
    ]
)
